// bf16_attention_prefill: attention with sinks (and an optional sliding window) for many tokens per
// call over the paged BF16 KV cache, FlashAttention-2 style. A one-block kernel cuts the call into
// query tiles (consecutive tokens of one sequence); a block owns (tile, kv head) with 128 rows = the
// tile's tokens x the kv head's q heads, so each K/V tile in shared memory serves all of them.
// S = Q K^T and O += P V run on BF16 tensor cores (mma.sync m16n8k16, FP32 accumulate), with an
// FP32 online softmax in log2 units seeded with the sink; key tiles no row can see are never read.
#include <climits>

#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

constexpr int kDh = kAttnHeadDim;     // 64: 8 chunks of 16 bytes per key row
constexpr int kRows = kPrefillRows;   // (token, q head) rows per block
constexpr int kWarps = 4;             // 32 rows each: two m16 tiles
constexpr int kThreads = kWarps * 32;
constexpr int kKeys = 64;             // keys per shared-memory tile
constexpr int kStages = 4;            // K/V tiles in flight (cp.async ring): 64 KB of shared memory
constexpr int kLoadsPerThread = kKeys * 8 / kThreads;  // 16-byte chunks of K (and of V) per thread
constexpr int kTileThreads = 1024;    // the tile-list kernel
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kRows == kWarps * 32 && kDh == 64 && kKeys == 64, "fragment loops below assume these shapes");

using Frag = float[2][8][4];  // a warp's 32 x 64 accumulator: [m tile][n tile of 8 columns][mma C regs]

// K or V tile in shared memory: key r keeps its 8 chunks of 16 bytes at r*8 + (chunk ^ (r % 8)), so
// the 8 rows one ldmatrix matrix reads fall in 8 different bank groups.
__device__ __forceinline__ int swz(int key, int chunk) { return key * 8 + (chunk ^ (key & 7)); }

__device__ __forceinline__ float fast_exp2(float x) {  // ex2.approx: 2^-22 relative, exp2(-inf) = 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Exclusive scan over the kTileThreads threads of the block; *total gets the reduction of all.
template <typename Op>
__device__ int block_exclusive_scan(int v, int identity, Op op, int* total) {
  __shared__ int warp_incl[kTileThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int incl = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl = op(incl, n);
  }
  if (lane == 31) warp_incl[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int w = warp_incl[lane];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w = op(w, n);
    }
    warp_incl[lane] = w;
  }
  __syncthreads();
  int excl = __shfl_up_sync(0xffffffffu, incl, 1);
  if (lane == 0) excl = identity;
  if (warp > 0) excl = op(warp_incl[warp - 1], excl);
  *total = warp_incl[kTileThreads / 32 - 1];
  __syncthreads();
  return excl;
}

// Cuts the T tokens into query tiles: a tile starts where the sequence changes and every
// `tile_tokens` tokens after that. Writes tiles[i] = {first token, tokens} in token order.
__global__ void __launch_bounds__(kTileThreads) bf16_attention_prefill_tiles(AttentionPrefillParams p, int tile_tokens) {
  const int T = int(p.T), per = (T + kTileThreads - 1) / kTileThreads;
  const int t0 = min(T, int(threadIdx.x) * per), t1 = min(T, t0 + per);
  auto run_starts = [&](int t) { return t == 0 || p.seq_index[t] != p.seq_index[t - 1]; };
  int last = -1, count = 0, total = 0;
  for (int t = t0; t < t1; ++t)
    if (run_starts(t)) last = t;
  const int run = block_exclusive_scan(last, -1, [](int a, int b) { return max(a, b); }, &total);
  for (int t = t0, r = run; t < t1; ++t) {
    if (run_starts(t)) r = t;
    count += (t - r) % tile_tokens == 0;
  }
  int slot = block_exclusive_scan(count, 0, [](int a, int b) { return a + b; }, &total);
  for (int t = t0, r = run; t < t1; ++t) {
    if (run_starts(t)) r = t;
    if ((t - r) % tile_tokens == 0) p.tiles[slot++].x = t;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < total; i += kTileThreads) p.tiles[i].y = (i + 1 < total ? p.tiles[i + 1].x : T) - p.tiles[i].x;
  if (threadIdx.x == 0) *p.num_tiles = total;
}

// The physical cache blocks of this thread's keys of the tile at k0 (key threadIdx/8 + 16i), read
// one iteration before load_kv_tile needs them so that the table's latency is off the critical path.
__device__ __forceinline__ void fetch_blocks(const int32_t* table, int B, int k0, int lo, int hi,
                                             int (&blk)[kLoadsPerThread]) {
#pragma unroll
  for (int i = 0; i < kLoadsPerThread; ++i) {
    const int j = k0 + int(threadIdx.x) / 8 + i * (kThreads / 8);
    blk[i] = j >= lo && j <= hi ? table[j / B] : 0;
  }
}

// Keys k0..k0+63 of kv head g into shared memory (cp.async); keys outside lo..hi are zero-filled
// (never read from the cache: past the sequence's blocks the table holds no valid block).
__device__ __forceinline__ void load_kv_tile(const AttentionPrefillParams& p, const int (&blk)[kLoadsPerThread], int g,
                                             int k0, int lo, int hi, uint4* ks, uint4* vs) {
  const int chunk = threadIdx.x % 8, B = int(p.block_size);
  const uint4* kc = static_cast<const uint4*>(p.k_cache);
  const uint4* vc = static_cast<const uint4*>(p.v_cache);
#pragma unroll
  for (int i = 0; i < kLoadsPerThread; ++i) {
    const int key = threadIdx.x / 8 + i * (kThreads / 8), j = k0 + key;
    const bool ok = j >= lo && j <= hi;
    int64_t off = chunk;
    if (ok) off += ((int64_t(blk[i]) * B + j % B) * p.Hkv + g) * (kDh / 8);
    dev::cp_async16(ks + swz(key, chunk), kc + off, ok);
    dev::cp_async16(vs + swz(key, chunk), vc + off, ok);
  }
}

// s = Q . K^T for the warp's 32 rows and the tile's 64 keys (raw dot products).
__device__ __forceinline__ void qk_scores(const uint32_t (&qf)[2][4][4], const uint4* ks, Frag& s) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int n = 0; n < 8; ++n) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;
#pragma unroll
    for (int kp = 0; kp < 2; ++kp) {  // dims 32kp..32kp+31: two k steps
      uint32_t b[4];
      dev::ldmatrix_x4(b, ks + swz(8 * n + lane % 8, 4 * kp + lane / 8));
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        dev::mma_bf16_16816(s[mt][n], qf[mt][2 * kp], b[0], b[1]);
        dev::mma_bf16_16816(s[mt][n], qf[mt][2 * kp + 1], b[2], b[3]);
      }
    }
  }
}

// Online softmax step for the thread's 4 rows (r = 2·m tile + half, block row base + 8r; m, l in
// log2 units): when `mask`, masks keys outside each row's row_lo..row_hi (shared memory); rescales
// l and o by 2^(m_old - m_new); s -> p = 2^(s·scale_log2 - m_new) (one FFMA + ex2 per score; the
// max is taken on raw scores, scale > 0).
__device__ __forceinline__ void online_softmax(Frag& s, Frag& o, float (&m)[4], float (&l)[4], const int* row_lo,
                                               const int* row_hi, int k0, float scale_log2, bool mask) {
  const int c = threadIdx.x % 4, base = threadIdx.x / 32 * 32 + threadIdx.x % 32 / 4;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int mt = r / 2, h = r % 2;
    const int lo = mask ? row_lo[base + 8 * r] : INT_MIN, hi = mask ? row_hi[base + 8 * r] : INT_MAX;
    float mx = -INFINITY;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = s[mt][n][2 * h + e];
        const int j = k0 + 8 * n + 2 * c + e;
        if (j < lo || j > hi) x = -INFINITY;
        mx = fmaxf(mx, x);
      }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m[r], mx * scale_log2), alpha = fast_exp2(m[r] - m_new);  // m starts at the sink
    m[r] = m_new;
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = s[mt][n][2 * h + e];
        x = fast_exp2(fmaf(x, scale_log2, -m_new));
        sum += x;
        o[mt][n][2 * h + e] *= alpha;
      }
    l[r] = l[r] * alpha + sum;
  }
}

// o += P . V: the probabilities in s become BF16 A fragments in registers (the C layout of two
// n tiles is the A layout of one k step); V is read with transposing ldmatrix.
__device__ __forceinline__ void pv_accumulate(const Frag& s, const uint4* vs, Frag& o) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {  // keys 16kk..16kk+15
    uint32_t a[2][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      a[mt][0] = pack_bf16x2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
      a[mt][1] = pack_bf16x2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
      a[mt][2] = pack_bf16x2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
      a[mt][3] = pack_bf16x2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < 4; ++dp) {  // dims 16dp..16dp+15: two n tiles
      uint32_t b[4];
      dev::ldmatrix_x4_trans(b, vs + swz(16 * kk + lane % 8 + 8 * ((lane / 8) & 1), 2 * dp + lane / 16));
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        dev::mma_bf16_16816(o[mt][2 * dp], a[mt], b[0], b[1]);
        dev::mma_bf16_16816(o[mt][2 * dp + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// The thread's 4 rows r of a block: row = warp·32 + lane/4 + 8r (m tile r/2, half r%2) is (tile token
// row / G, q head g·G + row % G); padding rows past the tile's tokens have token -1.
struct Row {
  int token, head;
};
__device__ __forceinline__ Row tile_row(int r, int2 tile, int g, int G) {
  const int row = threadIdx.x / 32 * 32 + threadIdx.x % 32 / 4 + 8 * r, ti = row / G;
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

__device__ __forceinline__ void load_q(const AttentionPrefillParams& p, int2 tile, int g, int G, uint32_t (&qf)[2][4][4]) {
  const int c = threadIdx.x % 4;
  const int64_t width = int64_t(p.H + 2 * p.Hkv) * kDh;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int mt = r / 2, h = r % 2;
    const Row w = tile_row(r, tile, g, G);
    const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.qkv) + w.token * width + w.head * kDh;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {  // A regs: (row, k 2c), (row + 8, k 2c), (row, k 2c + 8), (row + 8, k 2c + 8)
      qf[mt][ks][h] = w.token < 0 ? 0u : *reinterpret_cast<const uint32_t*>(q + 16 * ks + 2 * c);
      qf[mt][ks][h + 2] = w.token < 0 ? 0u : *reinterpret_cast<const uint32_t*>(q + 16 * ks + 8 + 2 * c);
    }
  }
}

// out = o / (l + 2^(sink - m)) for the thread's valid rows.
__device__ __forceinline__ void store_out(const AttentionPrefillParams& p, int2 tile, int g, int G, const Frag& o,
                                          const float (&m)[4], float (&l)[4]) {
  const int c = threadIdx.x % 4;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    const Row w = tile_row(r, tile, g, G);
    if (w.token < 0) continue;
    const float inv = 1.0f / (l[r] + fast_exp2(row_sink(p, w) - m[r]));
    __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + int64_t(w.token) * p.H * kDh + w.head * kDh;
#pragma unroll
    for (int n = 0; n < 8; ++n)
      *reinterpret_cast<__nv_bfloat162*>(out + 8 * n + 2 * c) =
          __floats2bfloat162_rn(o[r / 2][n][2 * (r % 2)] * inv, o[r / 2][n][2 * (r % 2) + 1] * inv);
  }
}

using KvStages = uint4[kStages][kKeys * 8];  // the ring of K (or V) tiles

// One (query tile, kv head): loops over the key tiles that any of its rows can see, kStages - 1
// tiles loading (cp.async) while the current one is multiplied.
__device__ __forceinline__ void attend_tile(const AttentionPrefillParams& p, int2 tile, KvStages& ks, KvStages& vs) {
  __shared__ int range_lo[kWarps], range_hi[kWarps], row_lo[kRows], row_hi[kRows];
  const int g = blockIdx.y, G = p.H / p.Hkv, warp = threadIdx.x / 32;
  // Per row: visible keys row_lo..row_hi (shared) and the running max m (starting at the sink) and
  // sum l. Per warp: keys any row sees (w_lo..w_hi), keys all valid rows see (w_lo_all..w_hi_all).
  float m[4], l[4] = {};
  int w_lo = INT_MAX, w_hi = INT_MIN, w_lo_all = INT_MIN, w_hi_all = INT_MAX;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const Row w = tile_row(r, tile, g, G);
    int rlo, rhi;
    row_keys(p, w, rlo, rhi);
    if (threadIdx.x % 4 == 0) row_lo[warp * 32 + threadIdx.x % 32 / 4 + 8 * r] = rlo, row_hi[warp * 32 + threadIdx.x % 32 / 4 + 8 * r] = rhi;
    m[r] = row_sink(p, w);
    w_lo = min(w_lo, rlo), w_hi = max(w_hi, rhi);
    if (w.token >= 0) w_lo_all = max(w_lo_all, rlo), w_hi_all = min(w_hi_all, rhi);
  }
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) {
    w_lo = min(w_lo, __shfl_xor_sync(0xffffffffu, w_lo, o)), w_hi = max(w_hi, __shfl_xor_sync(0xffffffffu, w_hi, o));
    w_lo_all = max(w_lo_all, __shfl_xor_sync(0xffffffffu, w_lo_all, o));
    w_hi_all = min(w_hi_all, __shfl_xor_sync(0xffffffffu, w_hi_all, o));
  }
  if (threadIdx.x % 32 == 0) range_lo[warp] = w_lo, range_hi[warp] = w_hi;
  __syncthreads();
  int lo = INT_MAX, hi = INT_MIN;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) lo = min(lo, range_lo[i]), hi = max(hi, range_hi[i]);

  uint32_t qf[2][4][4];
  load_q(p, tile, g, G, qf);
  Frag o = {};
  const int32_t* table = p.block_tables + int64_t(p.seq_index[tile.x]) * p.max_blocks;
  const float scale_log2 = p.scale * kLog2e;
  const int first = lo / kKeys, last = hi / kKeys, B = int(p.block_size);
  int blk[kLoadsPerThread];
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {  // one commit group per tile, empty past the last
    fetch_blocks(table, B, (first + s) * kKeys, lo, hi, blk);
    if (first + s <= last) load_kv_tile(p, blk, g, (first + s) * kKeys, lo, hi, ks[s], vs[s]);
    dev::cp_async_commit();
  }
  fetch_blocks(table, B, (first + kStages - 1) * kKeys, lo, hi, blk);
  for (int kt = first; kt <= last; ++kt) {
    const int stage = (kt - first) % kStages, k0 = kt * kKeys;
    dev::cp_async_wait<kStages - 2>();  // tile kt has landed (for this thread) ...
    __syncthreads();                    // ... for all threads; the stage read at kt - 1 is free
    const int ahead = kt + kStages - 1;
    if (ahead <= last) load_kv_tile(p, blk, g, ahead * kKeys, lo, hi, ks[(stage + kStages - 1) % kStages],
                                    vs[(stage + kStages - 1) % kStages]);
    dev::cp_async_commit();
    fetch_blocks(table, B, (ahead + 1) * kKeys, lo, hi, blk);
    if (w_lo <= k0 + kKeys - 1 && w_hi >= k0) {  // the warp skips key tiles none of its rows sees
      Frag s;
      qk_scores(qf, ks[stage], s);
      const bool all_see = w_lo_all <= k0 && w_hi_all >= k0 + kKeys - 1;
      online_softmax(s, o, m, l, row_lo, row_hi, k0, scale_log2, !all_see);
      pv_accumulate(s, vs[stage], o);
    }
  }
  store_out(p, tile, g, G, o, m, l);
}

// Grid (grid_tiles, Hkv); block x takes tiles x, x + grid_tiles, ... counted from the last one, so
// the latest (most keys, for causal prefill) start first.
__global__ void __launch_bounds__(kThreads, 2) bf16_attention_prefill(AttentionPrefillParams p) {
  extern __shared__ __align__(128) uint4 smem[];
  KvStages& ks = *reinterpret_cast<KvStages*>(smem);
  KvStages& vs = *reinterpret_cast<KvStages*>(smem + kStages * kKeys * 8);
  const int n_tiles = *p.num_tiles;
  for (int i = blockIdx.x; i < n_tiles; i += gridDim.x) {
    attend_tile(p, p.tiles[n_tiles - 1 - i], ks, vs);
    __syncthreads();  // the next tile's first loads overwrite stages still being read
  }
}

}  // namespace

int attention_prefill_tile_tokens(int H, int Hkv) { return kRows / (H / Hkv); }
size_t attention_prefill_smem_bytes() { return size_t(2) * kStages * kKeys * 8 * sizeof(uint4); }

cudaError_t run_bf16_attention_prefill(const AttentionPrefillParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  const int smem = int(attention_prefill_smem_bytes());
  cudaError_t e = cudaFuncSetAttribute(bf16_attention_prefill, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  bf16_attention_prefill_tiles<<<1, kTileThreads, 0, s>>>(p, attention_prefill_tile_tokens(p.H, p.Hkv));
  if (e = cudaGetLastError(); e != cudaSuccess) return e;
  bf16_attention_prefill<<<dim3(unsigned(p.grid_tiles), unsigned(p.Hkv)), kThreads, smem, s>>>(p);
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
