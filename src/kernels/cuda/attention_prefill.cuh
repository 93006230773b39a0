// What the two prefill attention kernels share (bf16_attention_prefill.cu: mma.sync, any sm_80+;
// sm90_bf16_attention_prefill.cu: wgmma, sm_90a): the block's rows = (token, q head) pairs of one
// query tile and kv head, the paged K/V tile loads into a swizzled shared-memory ring, the row key
// ranges and sinks, the FP32 online softmax in log2 units on accumulator fragments in the
// mma.sync C layout (which is also wgmma's), and the output store.
#pragma once

#include <climits>

#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern::attn_prefill {

using dev::fast_exp2;
using dev::kLog2e;
using dev::swz;

constexpr int kDh = kAttnHeadDim;    // 64: 8 chunks of 16 bytes per key row
constexpr int kKeys = 64;            // keys per shared-memory tile
static_assert(kDh == 64 && kKeys == 64, "fragment loops assume 64 head dims and 64 keys per tile");

// A warp's accumulator for MT m16 tiles of rows and the 64 columns (keys or head dims) of a tile:
// [m tile][n tile of 8 columns][C regs: (row g, cols 2c, 2c+1), (row g + 8, cols 2c, 2c+1)].
template <int MT>
using Frag = float[MT][8][4];

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The thread's rows r (< 2·MT) of a block whose warps own 16·MT consecutive rows each:
// row = warp·16·MT + lane/4 + 8r (m tile r/2, half r%2) is (tile token row / G, q head g·G + row % G);
// padding rows past the tile's tokens have token -1.
struct Row {
  int token, head;
};
template <int MT>
__device__ __forceinline__ int block_row(int r) {
  return int(threadIdx.x) / 32 * 16 * MT + int(threadIdx.x) % 32 / 4 + 8 * r;
}
template <int MT>
__device__ __forceinline__ Row tile_row(int r, int2 tile, int g, int G) {
  const int row = block_row<MT>(r), ti = row / G;
  return {ti < tile.y ? tile.x + ti : -1, g * G + row % G};
}

// Keys lo..hi a row sees (none for a padding row), and its sink in log2 units.
__device__ __forceinline__ void row_keys(const AttentionPrefillParams& p, Row w, int& lo, int& hi) {
  const int pos = w.token >= 0 ? p.positions[w.token] : 0;
  lo = w.token < 0 ? INT_MAX : p.window > 0 ? max(0, pos - p.window + 1) : 0;
  hi = w.token < 0 ? INT_MIN : pos;
}
__device__ __forceinline__ float row_sink(const AttentionPrefillParams& p, Row w) {
  return (p.sinks_f32 ? static_cast<const float*>(p.sinks)[w.head]
                      : __bfloat162float(static_cast<const __nv_bfloat16*>(p.sinks)[w.head])) * kLog2e;
}

// Per row: visible keys row_lo..row_hi (shared, for masking), the running max m (starting at the
// sink) and sum l. Per warp: keys any of its rows sees (lo..hi) and keys all its valid rows see
// (lo_all..hi_all): tiles inside the latter need no mask.
template <int MT>
struct RowState {
  float m[2 * MT], l[2 * MT];
  int lo = INT_MAX, hi = INT_MIN, lo_all = INT_MIN, hi_all = INT_MAX;

  __device__ __forceinline__ void init(const AttentionPrefillParams& p, int2 tile, int g, int G, int* row_lo,
                                       int* row_hi) {
#pragma unroll
    for (int r = 0; r < 2 * MT; ++r) {
      const Row w = tile_row<MT>(r, tile, g, G);
      int rlo, rhi;
      row_keys(p, w, rlo, rhi);
      if (threadIdx.x % 4 == 0) row_lo[block_row<MT>(r)] = rlo, row_hi[block_row<MT>(r)] = rhi;
      m[r] = row_sink(p, w), l[r] = 0.0f;
      lo = min(lo, rlo), hi = max(hi, rhi);
      if (w.token >= 0) lo_all = max(lo_all, rlo), hi_all = min(hi_all, rhi);
    }
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
      lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, o)), hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, o));
      lo_all = max(lo_all, __shfl_xor_sync(0xffffffffu, lo_all, o));
      hi_all = min(hi_all, __shfl_xor_sync(0xffffffffu, hi_all, o));
    }
  }
  __device__ __forceinline__ bool sees(int k0) const { return lo <= k0 + kKeys - 1 && hi >= k0; }
  __device__ __forceinline__ bool sees_all(int k0) const { return lo_all <= k0 && hi_all >= k0 + kKeys - 1; }
};

// Sets up the thread's rows (st) and the rows' key ranges in shared memory (row_lo, row_hi, by
// block row), and returns the block's key range: the union lo..hi over its kWarps warps.
template <int kWarps, int MT>
__device__ __forceinline__ int2 init_rows(const AttentionPrefillParams& p, int2 tile, int g, int G, RowState<MT>& st,
                                          int* row_lo, int* row_hi) {
  __shared__ int warp_lo[kWarps], warp_hi[kWarps];
  st.init(p, tile, g, G, row_lo, row_hi);
  if (threadIdx.x % 32 == 0) warp_lo[threadIdx.x / 32] = st.lo, warp_hi[threadIdx.x / 32] = st.hi;
  __syncthreads();
  int2 r = {INT_MAX, INT_MIN};
#pragma unroll
  for (int i = 0; i < kWarps; ++i) r.x = min(r.x, warp_lo[i]), r.y = max(r.y, warp_hi[i]);
  return r;
}

// Loads the key tiles of kv head g through the block table: a thread's keys in a tile are
// threadIdx/8 + i·threads/8 (16-byte chunk threadIdx % 8 of each row). The table entries of a tile
// are read (fetch) one iteration before its loads (load) need them, keeping the table's latency off
// the critical path. kAligned (the cache block size B divides the 64-key tile: every power of two
// up to 64): a key's slot in its block and its block's place in the tile are the same in every
// tile, so the per-chunk offsets are computed once and a load costs one multiply-add in 32 bits
// (offsets in 16-byte units are < 2^31: launcher contract). Kernels instantiate both.
// kFp8 (an FP8 cache: E4M3 rows of 64 bytes): the same chunks are 8 bytes of codes, loaded into
// registers by load() and widened exactly to BF16 into shared memory by land(), which the kernels
// call after the current tile's products, so the loads' latency still overlaps them.
template <int kThreads, bool kAligned, bool kFp8 = false>
struct KvLoader {
  static constexpr int kPerThread = kKeys * 8 / kThreads;  // 16-byte chunks of K (and of V) per thread
  uint2 kr[kFp8 ? kPerThread : 1], vr[kFp8 ? kPerThread : 1];  // kFp8: the codes loaded, not yet landed
  int blk[kPerThread];
  int cofs[kPerThread];  // kAligned: (key % B · Hkv + g) · 8 + chunk
  int kblk[kPerThread];  // kAligned: key / B, the key's block within the tile
  int B, Hkv, g;
  int stride;            // kAligned: 16-byte units per cache block (B · Hkv · 8)

  __device__ __forceinline__ KvLoader(int block_size, int n_kv_heads, int kv_head)
      : B(block_size), Hkv(n_kv_heads), g(kv_head), stride(block_size * n_kv_heads * 8) {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i)
      cofs[i] = ((key(i) % B) * Hkv + g) * 8 + int(threadIdx.x) % 8, kblk[i] = key(i) / B;
  }
  __device__ __forceinline__ static int key(int i) { return int(threadIdx.x) / 8 + i * (kThreads / 8); }

  __device__ __forceinline__ void fetch(const int32_t* table, int k0, int lo, int hi) {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int j = k0 + key(i);
      const int e = kAligned ? k0 / kKeys * (kKeys / B) + kblk[i] : j / B;
      blk[i] = j >= lo && j <= hi ? table[e] : 0;
    }
  }
  // Keys k0..k0+63 into shared memory (cp.async; kFp8: into registers, for land()); keys outside
  // lo..hi are zero-filled (never read from the cache: past the sequence's blocks the table holds no
  // valid block). Offsets count chunks: 16 bytes of BF16 or 8 bytes of E4M3.
  __device__ __forceinline__ void load(const AttentionPrefillParams& p, int k0, int lo, int hi, uint4* ks, uint4* vs) {
    const uint4* kc = static_cast<const uint4*>(p.k_cache);
    const uint4* vc = static_cast<const uint4*>(p.v_cache);
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int j = k0 + key(i);
      const bool ok = j >= lo && j <= hi;
      int64_t off = 0;
      if constexpr (kAligned) {
        off = ok ? uint32_t(blk[i] * stride + cofs[i]) : 0u;
      } else if (ok) {
        off = ((int64_t(blk[i]) * B + j % B) * Hkv + g) * (kDh / 8) + int(threadIdx.x) % 8;
      }
      if constexpr (kFp8) {
        kr[i] = ok ? __ldg(static_cast<const uint2*>(p.k_cache) + off) : make_uint2(0, 0);
        vr[i] = ok ? __ldg(static_cast<const uint2*>(p.v_cache) + off) : make_uint2(0, 0);
      } else {
        const int slot = swz(key(i), int(threadIdx.x) % 8);
        dev::cp_async16(ks + slot, kc + off, ok);
        dev::cp_async16(vs + slot, vc + off, ok);
      }
    }
  }
  // kFp8: the codes of the last load() as BF16 into its tile (made visible by the kernel's barrier
  // before the tile's products, with the async-proxy fence for wgmma); nothing for BF16.
  __device__ __forceinline__ void land(uint4* ks, uint4* vs) const {
    if constexpr (kFp8) {
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        const int slot = swz(key(i), int(threadIdx.x) % 8);
        ks[slot] = dev::e4m3x8_to_bf16x8(kr[i]);
        vs[slot] = dev::e4m3x8_to_bf16x8(vr[i]);
      }
    }
  }
};

// An FP8 cache's scales (1 for BF16): K's joins the softmax scale, V's the output.
struct KvScales {
  float k = 1.0f, v = 1.0f;
  __device__ __forceinline__ explicit KvScales(const AttentionPrefillParams& p) {
    if (p.kv_scales) k = p.kv_scales[0], v = p.kv_scales[1];
  }
};

// Online softmax, first half, for the thread's rows r (m tile r/2, half r%2; m in log2 units): with
// kMask, masks keys outside each row's row_lo..row_hi (shared memory; only tiles that some row of
// the warp sees in part); the row max (taken on raw scores, scale > 0) moves m (which starts at the
// sink) and alpha[r] = 2^(m_old - m_new), by which the caller rescales o and l. Returns whether
// any row's max moved in the warp (else alpha = 1 exactly and the rescale can be skipped).
template <bool kMask, int MT>
__device__ __forceinline__ bool softmax_max(Frag<MT>& s, RowState<MT>& st, float (&alpha)[2 * MT], const int* row_lo,
                                            const int* row_hi, int k0, float scale_log2) {
  const int c = threadIdx.x % 4;
  bool moved = false;
#pragma unroll
  for (int r = 0; r < 2 * MT; ++r) {
    const int mt = r / 2, h = r % 2;
    float mx = -INFINITY;
    if constexpr (kMask) {
      const int lo = row_lo[block_row<MT>(r)] - k0 - 2 * c, hi = row_hi[block_row<MT>(r)] - k0 - 2 * c;
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[mt][n][2 * h + e];
          if (8 * n + e < lo || 8 * n + e > hi) x = -INFINITY;  // key k0 + 8n + 2c + e
        }
    }
#pragma unroll
    for (int n = 0; n < 8; ++n) mx = fmaxf(mx, fmaxf(s[mt][n][2 * h], s[mt][n][2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(st.m[r], mx * scale_log2);
    moved |= m_new != st.m[r];
    alpha[r] = fast_exp2(st.m[r] - m_new);
    st.m[r] = m_new;
  }
  return __any_sync(0xffffffffu, moved);
}

// Second half (FP32): s -> p = 2^(s·scale_log2 - m) (one FFMA + ex2 per score) and, with kSum,
// l = l·α + Σp (the lane's share of each row; the wgmma kernel sums P on the tensor cores instead).
template <bool kSum, int MT>
__device__ __forceinline__ void softmax_exp(Frag<MT>& s, RowState<MT>& st, const float (&alpha)[2 * MT],
                                           float scale_log2) {
#pragma unroll
  for (int r = 0; r < 2 * MT; ++r) {
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = s[r / 2][n][2 * (r % 2) + e];
        x = fast_exp2(fmaf(x, scale_log2, -st.m[r]));
        if constexpr (kSum) sum += x;
      }
    if constexpr (kSum) st.l[r] = st.l[r] * alpha[r] + sum;
  }
}

template <int MT>
__device__ __forceinline__ void rescale(Frag<MT>& o, const float (&alpha)[2 * MT]) {
#pragma unroll
  for (int r = 0; r < 2 * MT; ++r)
#pragma unroll
    for (int n = 0; n < 8; ++n) o[r / 2][n][2 * (r % 2)] *= alpha[r], o[r / 2][n][2 * (r % 2) + 1] *= alpha[r];
}

// The BF16 A fragment of keys 16kk..16kk+15 of m tile mt from the probabilities in s (the C layout
// of two n tiles is the A layout of one k step).
template <int MT>
__device__ __forceinline__ void p_fragment(const Frag<MT>& s, int mt, int kk, uint32_t (&a)[4]) {
  a[0] = pack_bf16x2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
  a[1] = pack_bf16x2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
  a[2] = pack_bf16x2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
  a[3] = pack_bf16x2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
}

// out = v_scale · o / (l + 2^(sink - m)) for the thread's valid rows; st.l holds the lane's share of each
// row's sum (summed over the row's 4 lanes here) or, with kWholeSums, the whole sum.
template <int MT, bool kWholeSums = false>
__device__ __forceinline__ void store_out(const AttentionPrefillParams& p, int2 tile, int g, int G, const Frag<MT>& o,
                                          RowState<MT>& st, float v_scale) {
  const int c = threadIdx.x % 4;
#pragma unroll
  for (int r = 0; r < 2 * MT; ++r) {
    float l = st.l[r];
    if constexpr (!kWholeSums) {
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
    }
    const Row w = tile_row<MT>(r, tile, g, G);
    if (w.token < 0) continue;
    const float inv = v_scale / (l + fast_exp2(row_sink(p, w) - st.m[r]));
    __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + int64_t(w.token) * p.H * kDh + w.head * kDh;
#pragma unroll
    for (int n = 0; n < 8; ++n)
      *reinterpret_cast<__nv_bfloat162*>(out + 8 * n + 2 * c) =
          __floats2bfloat162_rn(o[r / 2][n][2 * (r % 2)] * inv, o[r / 2][n][2 * (r % 2) + 1] * inv);
  }
}

}  // namespace mx::cuda::kern::attn_prefill
