// bf16_attention_decode: attention with sinks (and an optional sliding window) over the paged BF16
// KV cache, split over the key range (flash-decoding). A block owns (token, kv head, split) and the
// group's <= 8 q heads, which are rows 0..7 of the A operand of mma.sync m16n8k16 (BF16 in, FP32
// accumulate): S = Q K^T and O += P V run on the tensor cores, each K/V tile serving all 8 heads
// (P as a BF16 value plus its BF16 residual, in A rows 8..15).
// Each warp streams its own 16-key tiles through a two-tile cp.async ring in shared memory, the
// block-table entries read one tile ahead; online softmax in FP32, log2 units. An FP8 cache
// (kv_scales: E4M3 codes of value / scale) streams through a three-tile ring of E4M3 tiles (the same
// bytes in flight), each widened exactly to FP16 (one cvt per pair) in one more tile before its
// products, which then run in FP16: Q prescaled by scale·log2 e·K scale, so the scores come out in
// log2 units (|q| would have to pass ~10^6 to overflow), and the V scale multiplies the output. The splits a token
// uses follow its real key range (the grid's count follows the table's capacity); with one, the
// block writes the output; with several, the last split block of a (token, kv head) to finish
// (device-memory counter) merges them with the sinks. Any T: each token attends to 0..pos.
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

using dev::fast_exp2;
using dev::kLog2e;
using dev::swz;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kDh = kAttnHeadDim;   // 64 = 8 chunks of 16 bytes per key row
constexpr int kG = kAttnMaxGroup;   // q heads per kv head, padded to 8 (A rows 0..7; rows 8..15 zero)
constexpr int kTileKeys = 16;       // keys per warp tile: one k step of P V
constexpr int kStages = 2;          // tiles per warp ring (4 KB each); measured against 3, 4 and 6
constexpr int kStages8 = 3;         // E4M3 tiles per warp ring (FP8 cache): the same bytes in flight
constexpr int kMinTiles = kAttnMinKeysPerSplit / kTileKeys;  // per split block
constexpr float kEmpty = -1e30f;    // running max before any key (finite: exp2(kEmpty - m) = 0)
static_assert(kDh == 64 && kG == 8 && kTileKeys == 16, "the fragment loops below assume these shapes");

// A K and a V tile of 128-byte key rows, swizzled as dev::swz.
struct KvTile {
  uint4 k[kTileKeys * 8], v[kTileKeys * 8];
};
// The same tiles of an FP8 cache: 64-byte key rows of E4M3 codes, in load order (row · 4 + chunk).
struct Fp8Tile {
  uint4 k[kTileKeys * 4], v[kTileKeys * 4];
};

// A warp's shared memory: the ring (BF16: kStages KvTiles; FP8: kStages8 Fp8Tiles and the KvTile
// they are widened into); after its key loop the warp's partial (WarpPartial) at its start.
template <bool kFp8>
struct Cache {
  static constexpr int kRing = kFp8 ? kStages8 : kStages;  // tiles in flight per warp
  static constexpr int kChunks = kFp8 ? 4 : 8;          // 16-byte chunks per key row in the cache
  static constexpr int kKeyStep = 32 / kChunks;         // keys between a lane's loads
  static constexpr int kLoads = kTileKeys * kChunks / 32;  // chunks of K (and of V) per lane and tile
  static constexpr size_t kWarpBytes = kFp8 ? kStages8 * sizeof(Fp8Tile) + sizeof(KvTile) : kStages * sizeof(KvTile);
  static constexpr size_t kRingBytes = kWarpBytes * kWarps;  // dynamic shared memory of a block
  // Below 48 KB with the static shared memory (the merge flag): no opt-in attribute needed.
  static_assert(kRingBytes <= 47 * 1024, "above 48 KB the launch needs the opt-in attribute");
};

// Split blocks of each (token, kv head) that have stored their partials; the last one merges and
// resets its counter to 0, so the counters are zero between calls.
__device__ unsigned int g_splits_done[kAttnMergeCounters];

__device__ __forceinline__ float sink_log2(const AttentionParams& p, int h) {
  return (p.sinks_f32 ? static_cast<const float*>(p.sinks)[h]
                      : __bfloat162float(static_cast<const __nv_bfloat16*>(p.sinks)[h])) * kLog2e;
}


// (x, y) as BF16 (kF16: FP16) pairs hi + residual: x = hi.x + res.x to ~2^-16 relative (BF16
// alone: 2^-9).
template <bool kF16>
__device__ __forceinline__ void split_x2(float x, float y, uint32_t& hi, uint32_t& res) {
  if constexpr (kF16) {
    const __half2 h = __floats2half2_rn(x, y);
    const float2 hf = __half22float2(h);
    const __half2 r = __floats2half2_rn(x - hf.x, y - hf.y);
    hi = *reinterpret_cast<const uint32_t*>(&h);
    res = *reinterpret_cast<const uint32_t*>(&r);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    const float2 hf = __bfloat1622float2(h);
    const __nv_bfloat162 r = __floats2bfloat162_rn(x - hf.x, y - hf.y);
    hi = *reinterpret_cast<const uint32_t*>(&h);
    res = *reinterpret_cast<const uint32_t*>(&r);
  }
}

// c += a · b on the tensor cores in BF16, or FP16 (the FP8 cache's path).
template <bool kF16>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (kF16)
    dev::mma_f16_16816(c, a[0], a[1], a[2], a[3], b0, b1);
  else
    dev::mma_bf16_16816(c, a, b0, b1);
}

// Shared memory of the merges, in the K/V ring once the key loop is done: a warp's (m, l, o) of
// its heads (in its own ring), the split factors of merge_splits (at the ring's start).
constexpr int kPad = kDh + 4;  // row stride of WarpPartial::o: the warp's float2 stores are conflict-free
struct WarpPartial {
  float m[kG], l[kG], o[kG][kPad];
};
using SplitFactors = float[kG][kAttnMaxSplits];
constexpr int kPF = kAttnPartialFloats;  // a split's partial: m, l, 2 unused, o[kDh]

// Merges the S split partials of q heads h0..h0+n-1 of token t with their sinks:
// out = sum_s o_s 2^(m_s - M) / (2^(sink - M) + sum_s l_s 2^(m_s - M)), M = max(sink, max_s m_s).
// Thread (h, q) = (tid / 16, tid % 16) owns dims 4q..4q+3 of head h; a head's 16 threads (half a
// warp) share its splits' (m, l) by shuffles. The partials are read through L2 (__ldcg: other blocks
// wrote them), a thread's loads issued together, kBatch splits at a time.
__device__ void merge_splits(const AttentionParams& p, int64_t t, int h0, int n, int S, SplitFactors& f) {
  constexpr int kBatch = 16, kPer = kAttnMaxSplits / 16;
  const int h = threadIdx.x / 16, q = threadIdx.x % 16;
  if (h >= n) return;
  const unsigned half = 0xffffu << (threadIdx.x & 16);
  const float* part = p.partials + (t * p.H + h0 + h) * p.splits * kPF;
  float ms[kPer], ls[kPer];
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int s = q + 16 * u;
    const float2 v = s < S ? __ldcg(reinterpret_cast<const float2*>(part + s * kPF)) : make_float2(kEmpty, 0.0f);
    ms[u] = v.x, ls[u] = v.y;
  }
  float4 ov[kBatch];
#pragma unroll
  for (int u = 0; u < kBatch; ++u)
    ov[u] = u < S ? __ldcg(reinterpret_cast<const float4*>(part + u * kPF + 4 + 4 * q)) : make_float4(0, 0, 0, 0);
  const float sink = sink_log2(p, h0 + h);
  float M = sink;
#pragma unroll
  for (int u = 0; u < kPer; ++u) M = fmaxf(M, ms[u]);
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(half, M, o));
  float den = 0.0f;
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const float e = exp2f(ms[u] - M);
    if (q + 16 * u < S) f[h][q + 16 * u] = e;
    den += ls[u] * e;
  }
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) den += __shfl_xor_sync(half, den, o);
  den += exp2f(sink - M);
  __syncwarp(half);
  float4 acc = make_float4(0, 0, 0, 0);
  for (int b = 0;; b += kBatch) {
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const float e = b + u < S ? f[h][b + u] : 0.0f;
      acc.x += e * ov[u].x, acc.y += e * ov[u].y, acc.z += e * ov[u].z, acc.w += e * ov[u].w;
    }
    if (b + kBatch >= S) break;
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int s = b + kBatch + u;
      ov[u] = s < S ? __ldcg(reinterpret_cast<const float4*>(part + s * kPF + 4 + 4 * q)) : make_float4(0, 0, 0, 0);
    }
  }
  auto* out = reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(p.out) + (t * p.H + h0 + h) * kDh + 4 * q);
  out[0] = __floats2bfloat162_rn(acc.x / den, acc.y / den);
  out[1] = __floats2bfloat162_rn(acc.z / den, acc.w / den);
}

// The keys a warp reads: tiles of kTileKeys keys at j = first + i * step (i < n), of which keys
// from..to-1 are real (the others are zero-filled and masked).
struct KeyRange {
  int first, step, n, from, to;
  __device__ int tile(int i) const { return first + i * step; }
};

// Cache block and in-block offset of the lane's keys j = tile(i) + lane/kChunks + kKeyStep·u
// (u < kLoads), read one tile ahead of their loads so that the table's latency is off the critical
// path.
template <bool kFp8>
struct TileBlocks {
  using C = Cache<kFp8>;
  int blk[C::kLoads], off[C::kLoads];

  __device__ __forceinline__ void fetch(const int32_t* table, int B, const KeyRange& r, int i) {
    const int j0 = r.tile(i) + int(threadIdx.x % 32) / C::kChunks;
    int q = j0 / B, o = j0 % B;
#pragma unroll
    for (int u = 0; u < C::kLoads; ++u) {
      const int j = j0 + C::kKeyStep * u;
      blk[u] = i < r.n && j >= r.from && j < r.to ? table[q] : 0;
      off[u] = o;
      for (o += C::kKeyStep; o >= B; o -= B) ++q;
    }
  }
};

// Tile i of the warp's range into `k`, `v` (cp.async, one key row per kChunks lanes: BF16 rows
// swizzled as dev::swz, E4M3 rows in load order); keys outside from..to-1 are zero-filled, never
// read (past a sequence's blocks the table holds no valid block).
template <bool kFp8>
__device__ __forceinline__ void load_tile(const AttentionParams& p, const TileBlocks<kFp8>& tb, int g,
                                          const KeyRange& r, int i, uint4* k, uint4* v) {
  using C = Cache<kFp8>;
  const int lane = threadIdx.x % 32, chunk = lane % C::kChunks;
  const uint4* kc = static_cast<const uint4*>(p.k_cache);
  const uint4* vc = static_cast<const uint4*>(p.v_cache);
#pragma unroll
  for (int u = 0; u < C::kLoads; ++u) {
    const int key = lane / C::kChunks + C::kKeyStep * u, j = r.tile(i) + key;
    const bool ok = j >= r.from && j < r.to;
    int64_t at = chunk;
    if (ok) at += ((int64_t(tb.blk[u]) * p.block_size + tb.off[u]) * p.Hkv + g) * C::kChunks;
    const int slot = kFp8 ? key * C::kChunks + chunk : swz(key, chunk);
    dev::cp_async16(k + slot, kc + at, ok);
    dev::cp_async16(v + slot, vc + at, ok);
  }
}

// FP8: the lane's own chunks of an E4M3 tile (landed: cp.async wait) into the FP16 tile (a KvTile
// of 2-byte values), exactly; a 16-byte chunk (16 dims) becomes chunks 2c and 2c + 1 of its row.
__device__ __forceinline__ void widen_tile(const Fp8Tile& src, KvTile& dst) {
  using C = Cache<true>;
  const int lane = threadIdx.x % 32, chunk = lane % C::kChunks;
#pragma unroll
  for (int u = 0; u < C::kLoads; ++u) {
    const int key = lane / C::kChunks + C::kKeyStep * u, at = key * C::kChunks + chunk;
    const uint4 k = src.k[at], v = src.v[at];
    dst.k[swz(key, 2 * chunk)] = dev::e4m3x8_to_f16x8(make_uint2(k.x, k.y));
    dst.k[swz(key, 2 * chunk + 1)] = dev::e4m3x8_to_f16x8(make_uint2(k.z, k.w));
    dst.v[swz(key, 2 * chunk)] = dev::e4m3x8_to_f16x8(make_uint2(v.x, v.y));
    dst.v[swz(key, 2 * chunk + 1)] = dev::e4m3x8_to_f16x8(make_uint2(v.z, v.w));
  }
}

// A fragments of the group's q (rows 0..7 = heads; rows 8..15 zero): regs (row, k 2c), (row + 8,
// k 2c), (row, k 2c + 8), (row + 8, k 2c + 8) of each 16-dim k step. kF16: FP16 values of
// q · prescale (the FP8 cache's path).
template <bool kF16>
__device__ __forceinline__ void load_q(const AttentionParams& p, int64_t t, int g, int G, float prescale,
                                       uint32_t (&qf)[4][4]) {
  const int lane = threadIdx.x % 32, h = lane / 4, c = lane % 4;
  const int64_t row = int64_t(p.H + 2 * p.Hkv) * kDh;
  const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.qkv) + t * row + (g * G + h) * kDh;
  auto pair = [&](int d) -> uint32_t {
    if (h >= G) return 0u;
    const uint32_t w = *reinterpret_cast<const uint32_t*>(q + d);
    if constexpr (!kF16) return w;
    const __half2 x = __floats2half2_rn(dev::bf16_lo(w) * prescale, dev::bf16_hi(w) * prescale);
    return *reinterpret_cast<const uint32_t*>(&x);
  };
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    qf[ks][0] = pair(16 * ks + 2 * c);
    qf[ks][2] = pair(16 * ks + 8 + 2 * c);
    qf[ks][1] = qf[ks][3] = 0u;
  }
}

// One tile: s = Q K^T (lane: head lane/4, keys 2c, 2c+1 and 8+2c, 8+2c+1), online softmax of the
// lane's head in log2 units (m: running max, l: the lane's partial sum), then o += P V with P as
// BF16 A fragments (the C layout of the two n tiles is the A layout of one k step): rows 0..7 hold
// P rounded to BF16, rows 8..15 the rounding residual, so o[n][0..1] + o[n][2..3] is P V with P
// exact to ~2^-16 (BF16 P alone cost the tiny-gqa8 fixture its 1e-3 logit bar) at no extra mma.
template <bool kF16>
__device__ __forceinline__ void attend_tile(const uint32_t (&qf)[4][4], const KvTile& kv, int j0, int from, int to,
                                            float scale_log2, float& m, float& l, float (&o)[8][4]) {
  const int lane = threadIdx.x % 32, c = lane % 4;
  float s[2][4] = {};
#pragma unroll
  for (int kp = 0; kp < 2; ++kp)  // dims 32kp..32kp+31: two k steps
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      uint32_t b[4];
      dev::ldmatrix_x4(b, kv.k + swz(8 * n + lane % 8, 4 * kp + lane / 8));
      mma_16816<kF16>(s[n], qf[2 * kp], b[0], b[1]);
      mma_16816<kF16>(s[n], qf[2 * kp + 1], b[2], b[3]);
    }
  const bool edge = j0 < from || j0 + kTileKeys > to;
  float mx = -INFINITY;
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int j = j0 + 8 * n + 2 * c + e;
      s[n][e] = edge && (j < from || j >= to) ? -INFINITY : s[n][e] * scale_log2;
      mx = fmaxf(mx, s[n][e]);
    }
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const float m_new = fmaxf(m, mx), alpha = fast_exp2(m - m_new);
  m = m_new;
  float sum = 0.0f;
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      s[n][e] = fast_exp2(s[n][e] - m_new);
      sum += s[n][e];
    }
  l = l * alpha + sum;
#pragma unroll
  for (int n = 0; n < 8; ++n) o[n][0] *= alpha, o[n][1] *= alpha, o[n][2] *= alpha, o[n][3] *= alpha;
  uint32_t a[4];  // P in BF16 in rows 0..7, its rounding residual in rows 8..15 (free rows of A)
  split_x2<kF16>(s[0][0], s[0][1], a[0], a[1]);
  split_x2<kF16>(s[1][0], s[1][1], a[2], a[3]);
#pragma unroll
  for (int dp = 0; dp < 4; ++dp) {  // dims 16dp..16dp+15: two n tiles
    uint32_t b[4];
    dev::ldmatrix_x4_trans(b, kv.v + swz(lane % 8 + 8 * ((lane / 8) & 1), 2 * dp + lane / 16));
    mma_16816<kF16>(o[2 * dp], a, b[0], b[1]);
    mma_16816<kF16>(o[2 * dp + 1], a, b[2], b[3]);
  }
}

// The tiles of the token's key range lo..pos that warp `warp` of split block `split` reads, and S,
// the splits the range uses. Tiles are aligned to kTileKeys; the grid has `splits` blocks per
// (token, kv head), from the block table's capacity; the range uses S of them (the others exit),
// each an equal share of at least kMinTiles tiles, and a block's warps take every kWarps-th tile.
__device__ __forceinline__ KeyRange warp_keys(int splits, int split, int warp, int lo, int pos, int& S) {
  const int base = lo / kTileKeys * kTileKeys, tiles = (pos - base) / kTileKeys + 1;
  const int want = min(splits, (tiles + kMinTiles - 1) / kMinTiles);
  const int per_split = (tiles + want - 1) / want;
  S = (tiles + per_split - 1) / per_split;
  const int t_begin = min(tiles, split * per_split), t_end = min(tiles, t_begin + per_split);
  return {.first = base + (t_begin + warp) * kTileKeys, .step = kWarps * kTileKeys,
          .n = max(0, t_end - t_begin - warp + kWarps - 1) / kWarps, .from = lo, .to = pos + 1};
}

// Tokens per call up to which a block looks for its sequence's other tokens to prefetch keys.
constexpr int kPrefetchMaxTokens = 64;

// Positions, tables and the keys of earlier calls are there before the kernel before this one
// (qkv_projection) runs; it writes the keys of this call's tokens only. Keys below the lowest
// position of the sequence's tokens in the call are stable: returns that position.
__device__ __forceinline__ int stable_end(const AttentionParams& p, int seq, int pos, int lo) {
  if (p.T > kPrefetchMaxTokens) return lo;
  int stable = pos;
  if (p.T > 1)
    for (int u = 0; u < int(p.T); ++u)
      if (p.seq_index[u] == seq) stable = min(stable, p.positions[u]);
  return stable;
}

// The warp's (m, l, o) into its own ring (its loads are done): the lane's head is lane/4 with dims
// 8n + 2c, 2c+1 in o[n][0..1]; l sums over the 4 lanes of a head.
// o is scaled by v_scale (an FP8 cache's V scale; 1 for BF16).
__device__ __forceinline__ void store_warp_partial(void* ring, float m, float l, const float (&o)[8][4], float v_scale) {
  const int lane = threadIdx.x % 32, h = lane / 4, c = lane % 4;
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  dev::cp_async_wait_all();  // only empty groups are left
  __syncwarp();
  WarpPartial& wp = *reinterpret_cast<WarpPartial*>(ring);
  if (c == 0) wp.m[h] = m, wp.l[h] = l;
#pragma unroll
  for (int n = 0; n < 8; ++n)  // rows h and h + 8: P's BF16 part and its residual
    *reinterpret_cast<float2*>(&wp.o[h][8 * n + 2 * c]) =
        make_float2((o[n][0] + o[n][2]) * v_scale, (o[n][1] + o[n][3]) * v_scale);
}

// Merges the block's warp partials (after a block barrier): with S == 1 the whole key range, so the
// output with the sink folded in (merge_splits' arithmetic); else the split's partial (m, l, o).
template <bool kFp8>
__device__ void store_block(const AttentionParams& p, const uint4* smem, int64_t t, int g, int split, int S) {
  const int G = p.H / p.Hkv;
  auto part = [&](int w) -> const WarpPartial& {
    return *reinterpret_cast<const WarpPartial*>(reinterpret_cast<const uint8_t*>(smem) + w * Cache<kFp8>::kWarpBytes);
  };
  for (int i = threadIdx.x; i < G * kDh; i += kThreads) {
    const int h = i / kDh, d = i % kDh;
    float mb = kEmpty;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mb = fmaxf(mb, part(w).m[h]);
    float ob = 0.0f, lb = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = exp2f(part(w).m[h] - mb);
      ob += part(w).o[h][d] * f;
      lb += part(w).l[h] * f;
    }
    if (S == 1) {
      const float sink = sink_log2(p, g * G + h), M = fmaxf(sink, mb), f = exp2f(mb - M);
      static_cast<__nv_bfloat16*>(p.out)[(t * p.H + g * G + h) * kDh + d] =
          __float2bfloat16(ob * f / (exp2f(sink - M) + lb * f));
    } else {
      float* out = p.partials + ((t * p.H + g * G + h) * p.splits + split) * kPF;
      out[4 + d] = ob;
      if (d == 0) out[0] = mb, out[1] = lb;
    }
  }
}

template <bool kFp8>
__global__ void __launch_bounds__(kThreads) bf16_attention_decode(AttentionParams p) {
  using C = Cache<kFp8>;
  static_assert(sizeof(WarpPartial) <= C::kWarpBytes && sizeof(SplitFactors) <= C::kRingBytes);
  static_assert(kThreads == kG * 16, "merge_splits: 16 threads per head");
  extern __shared__ __align__(128) uint4 smem[];
  const int64_t t = blockIdx.x;
  const int g = blockIdx.y, split = blockIdx.z, warp = threadIdx.x / 32;
  uint8_t* region = reinterpret_cast<uint8_t*>(smem) + warp * C::kWarpBytes;
  // Stage s of the ring (K at k(s), V at v(s)); FP8 tiles are widened into `wide`.
  auto k_of = [&](int s) -> uint4* {
    if constexpr (kFp8) return reinterpret_cast<Fp8Tile*>(region)[s].k;
    else return reinterpret_cast<KvTile*>(region)[s].k;
  };
  auto v_of = [&](int s) -> uint4* {
    if constexpr (kFp8) return reinterpret_cast<Fp8Tile*>(region)[s].v;
    else return reinterpret_cast<KvTile*>(region)[s].v;
  };
  KvTile* wide = reinterpret_cast<KvTile*>(region + C::kRing * sizeof(Fp8Tile));  // FP8 only: FP16 values
  const int pos = p.positions[t];
  const int lo = p.window > 0 ? max(0, pos - p.window + 1) : 0;
  int S;
  const KeyRange r = warp_keys(p.splits, split, warp, lo, pos, S);
  if (split >= S) return;
  const int seq = p.seq_index[t], B = int(p.block_size);
  const int32_t* table = p.block_tables + int64_t(seq) * p.max_blocks;

  // The warp's first tiles that hold only stable keys load before pdl_wait, while qkv_projection
  // still runs; one commit group per tile of the prologue (empty past the warp's tiles).
  const int stable = stable_end(p, seq, pos, lo);
  TileBlocks<kFp8> tb;
  tb.fetch(table, B, r, 0);
  int i = 0;
  for (; i < C::kRing - 1 && i < r.n && min(r.tile(i) + kTileKeys, r.to) <= stable; ++i) {
    load_tile(p, tb, g, r, i, k_of(i), v_of(i));
    dev::cp_async_commit();
    tb.fetch(table, B, r, i + 1);
  }
  dev::pdl_wait();  // q and this call's keys (and an FP8 cache's scales) come from qkv_projection
  for (; i < C::kRing - 1; ++i) {
    if (i < r.n) load_tile(p, tb, g, r, i, k_of(i), v_of(i));
    dev::cp_async_commit();
    tb.fetch(table, B, r, i + 1);
  }
  // FP8: the scores' scale (softmax scale, log2 e, the K scale) goes into Q.
  const float scale_log2 = p.scale * kLog2e * (kFp8 ? p.kv_scales[0] : 1.0f);
  const float v_scale = kFp8 ? p.kv_scales[1] : 1.0f;
  uint32_t qf[4][4];
  load_q<kFp8>(p, t, g, p.H / p.Hkv, scale_log2, qf);

  float m = kEmpty, l = 0.0f, o[8][4] = {};
  for (i = 0; i < r.n; ++i) {
    dev::cp_async_wait<C::kRing - 2>();  // tile i has landed (for this lane) ...
    __syncwarp();  // ... for the warp; the stage read at i - 1 (FP8: `wide`) is free
    const int ahead = i + C::kRing - 1;
    if (ahead < r.n) load_tile(p, tb, g, r, ahead, k_of(ahead % C::kRing), v_of(ahead % C::kRing));
    dev::cp_async_commit();
    tb.fetch(table, B, r, ahead + 1);
    if constexpr (kFp8) {
      widen_tile(reinterpret_cast<const Fp8Tile*>(region)[i % C::kRing], *wide);
      __syncwarp();
      attend_tile<true>(qf, *wide, r.tile(i), r.from, r.to, 1.0f, m, l, o);
    } else {
      attend_tile<false>(qf, reinterpret_cast<const KvTile*>(region)[i % C::kRing], r.tile(i), r.from, r.to,
                         scale_log2, m, l, o);
    }
  }

  // The next kernel (the o projection) may start streaming its weights now, not earlier: its
  // prefetch would queue ahead of this kernel's latency-bound K/V loads (docs/lab/RUNS_01-10.md,
  // run 6).
  dev::pdl_launch_dependents();
  store_warp_partial(region, m, l, o, v_scale);
  __syncthreads();
  store_block<kFp8>(p, smem, t, g, split, S);
  if (S == 1) return;

  __shared__ bool last;
  __threadfence();  // this block's partials are visible device-wide before it counts as done
  __syncthreads();  // (and the warp partials are read: the ring is free for merge_splits)
  if (threadIdx.x == 0) last = atomicAdd(&g_splits_done[t * p.Hkv + g], 1u) == unsigned(S) - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (threadIdx.x == 0) g_splits_done[t * p.Hkv + g] = 0;
  merge_splits(p, t, g * (p.H / p.Hkv), p.H / p.Hkv, S, *reinterpret_cast<SplitFactors*>(smem));
}

}  // namespace

cudaError_t run_bf16_attention_decode(const AttentionParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  if (p.splits < 1 || p.splits > kAttnMaxSplits || (p.splits > 1 && p.T * p.Hkv > kAttnMergeCounters))
    return cudaErrorInvalidValue;
  // A programmatic dependent (sm_90+): resident and waiting when its predecessor ends.
  const dim3 grid(unsigned(p.T), unsigned(p.Hkv), unsigned(p.splits));
  if (p.kv_scales) return launch_pdl(bf16_attention_decode<true>, grid, dim3(kThreads), Cache<true>::kRingBytes, s, p);
  return launch_pdl(bf16_attention_decode<false>, grid, dim3(kThreads), Cache<false>::kRingBytes, s, p);
}

}  // namespace mx::cuda::kern
