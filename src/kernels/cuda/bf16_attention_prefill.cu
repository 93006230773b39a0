// bf16_attention_prefill: attention with sinks (and an optional sliding window) for many tokens per
// call over the paged BF16 KV cache, FlashAttention-2 style. A one-block kernel cuts the call into
// query tiles (consecutive tokens of one sequence); a block owns (tile, kv head) with 128 rows = the
// tile's tokens x the kv head's q heads, so each K/V tile in shared memory serves all of them.
// S = Q K^T and O += P V run on BF16 tensor cores (mma.sync m16n8k16, FP32 accumulate), with an
// FP32 online softmax in log2 units seeded with the sink; key tiles no row can see are never read.
#include "kernels/cuda/attention_prefill.cuh"

namespace mx::cuda::kern {
namespace {

using namespace attn_prefill;

constexpr int kRows = kPrefillRows;   // (token, q head) rows per block
constexpr int kWarps = 4;             // 32 rows each: two m16 tiles
constexpr int kThreads = kWarps * 32;
constexpr int kMT = 2;                // m16 tiles per warp
constexpr int kStages = 4;            // K/V tiles in flight (cp.async ring): 64 KB of shared memory
constexpr int kTileThreads = 1024;    // the tile-list kernel
static_assert(kRows == kWarps * 16 * kMT, "the warps cover the block's rows");

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

// s = Q . K^T for the warp's 32 rows and the tile's 64 keys (raw dot products).
__device__ __forceinline__ void qk_scores(const uint32_t (&qf)[2][4][4], const uint4* ks, Frag<kMT>& s) {
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

// o += P . V: the probabilities in s as BF16 A fragments; V is read with transposing ldmatrix.
__device__ __forceinline__ void pv_accumulate(const Frag<kMT>& s, const uint4* vs, Frag<kMT>& o) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {  // keys 16kk..16kk+15
    uint32_t a[2][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) p_fragment(s, mt, kk, a[mt]);
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

__device__ __forceinline__ void load_q(const AttentionPrefillParams& p, int2 tile, int g, int G, uint32_t (&qf)[2][4][4]) {
  const int c = threadIdx.x % 4;
  const int64_t width = int64_t(p.H + 2 * p.Hkv) * kDh;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int mt = r / 2, h = r % 2;
    const Row w = tile_row<kMT>(r, tile, g, G);
    const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.qkv) + w.token * width + w.head * kDh;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {  // A regs: (row, k 2c), (row + 8, k 2c), (row, k 2c + 8), (row + 8, k 2c + 8)
      qf[mt][ks][h] = w.token < 0 ? 0u : *reinterpret_cast<const uint32_t*>(q + 16 * ks + 2 * c);
      qf[mt][ks][h + 2] = w.token < 0 ? 0u : *reinterpret_cast<const uint32_t*>(q + 16 * ks + 8 + 2 * c);
    }
  }
}

using KvStages = uint4[kStages][kKeys * 8];  // the ring of K (or V) tiles

// One (query tile, kv head): loops over the key tiles that any of its rows can see, kStages - 1
// tiles loading (cp.async) while the current one is multiplied.
template <bool kAligned, bool kFp8>
__device__ __forceinline__ void attend_tile(const AttentionPrefillParams& p, int2 tile, KvStages& ks, KvStages& vs) {
  __shared__ int row_lo[kRows], row_hi[kRows];
  const int g = blockIdx.y, G = p.H / p.Hkv;
  RowState<kMT> st;
  const int2 range = init_rows<kWarps>(p, tile, g, G, st, row_lo, row_hi);
  const int lo = range.x, hi = range.y;

  uint32_t qf[2][4][4];
  load_q(p, tile, g, G, qf);
  Frag<kMT> o = {};
  const int32_t* table = p.block_tables + int64_t(p.seq_index[tile.x]) * p.max_blocks;
  const KvScales scales(p);
  const float scale_log2 = p.scale * kLog2e * scales.k;
  const int first = lo / kKeys, last = hi / kKeys;
  KvLoader<kThreads, kAligned, kFp8> kv(int(p.block_size), p.Hkv, g);
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {  // one commit group per tile, empty past the last
    kv.fetch(table, (first + s) * kKeys, lo, hi);
    if (first + s <= last) {
      kv.load(p, (first + s) * kKeys, lo, hi, ks[s], vs[s]);
      kv.land(ks[s], vs[s]);
    }
    dev::cp_async_commit();
  }
  kv.fetch(table, (first + kStages - 1) * kKeys, lo, hi);
  for (int kt = first; kt <= last; ++kt) {
    const int stage = (kt - first) % kStages, k0 = kt * kKeys;
    dev::cp_async_wait<kStages - 2>();  // tile kt has landed (for this thread) ...
    __syncthreads();                    // ... for all threads; the stage read at kt - 1 is free
    const int ahead = kt + kStages - 1, ahead_stage = (stage + kStages - 1) % kStages;
    if (ahead <= last) kv.load(p, ahead * kKeys, lo, hi, ks[ahead_stage], vs[ahead_stage]);
    dev::cp_async_commit();
    kv.fetch(table, (ahead + 1) * kKeys, lo, hi);
    if (st.sees(k0)) {  // the warp skips key tiles none of its rows sees
      Frag<kMT> s;
      float alpha[2 * kMT];
      qk_scores(qf, ks[stage], s);
      const bool moved = st.sees_all(k0) ? softmax_max<false>(s, st, alpha, row_lo, row_hi, k0, scale_log2)
                                         : softmax_max<true>(s, st, alpha, row_lo, row_hi, k0, scale_log2);
      softmax_exp<true>(s, st, alpha, scale_log2);
      if (moved) rescale(o, alpha);
      pv_accumulate(s, vs[stage], o);
    }
    if (ahead <= last) kv.land(ks[ahead_stage], vs[ahead_stage]);  // FP8 (the stage read at kt - 1 is free)
  }
  store_out(p, tile, g, G, o, st, scales.v);
}

// Grid (grid_tiles, Hkv); block x takes tiles x, x + grid_tiles, ... counted from the last one, so
// the latest (most keys, for causal prefill) start first.
__global__ void __launch_bounds__(kThreads, 2) bf16_attention_prefill(AttentionPrefillParams p) {
  extern __shared__ __align__(128) uint4 smem[];
  KvStages& ks = *reinterpret_cast<KvStages*>(smem);
  KvStages& vs = *reinterpret_cast<KvStages*>(smem + kStages * kKeys * 8);
  const int n_tiles = *p.num_tiles;
  const bool aligned = kKeys % p.block_size == 0, fp8 = p.kv_scales != nullptr;
  for (int i = blockIdx.x; i < n_tiles; i += gridDim.x) {
    const int2 tile = p.tiles[n_tiles - 1 - i];
    if (fp8)
      aligned ? attend_tile<true, true>(p, tile, ks, vs) : attend_tile<false, true>(p, tile, ks, vs);
    else
      aligned ? attend_tile<true, false>(p, tile, ks, vs) : attend_tile<false, false>(p, tile, ks, vs);
    __syncthreads();  // the next tile's first loads overwrite stages still being read
  }
}

}  // namespace

int attention_prefill_tile_tokens(int H, int Hkv, int rows) { return rows / (H / Hkv); }
size_t attention_prefill_smem_bytes() { return size_t(2) * kStages * kKeys * 8 * sizeof(uint4); }

cudaError_t run_attention_prefill_tiles(const AttentionPrefillParams& p, int rows, cudaStream_t s) {
  bf16_attention_prefill_tiles<<<1, kTileThreads, 0, s>>>(p, attention_prefill_tile_tokens(p.H, p.Hkv, rows));
  return cudaGetLastError();
}

cudaError_t run_bf16_attention_prefill(const AttentionPrefillParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  const int smem = int(attention_prefill_smem_bytes());
  cudaError_t e = cudaFuncSetAttribute(bf16_attention_prefill, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  if (e = run_attention_prefill_tiles(p, kRows, s); e != cudaSuccess) return e;
  bf16_attention_prefill<<<dim3(unsigned(p.grid_tiles), unsigned(p.Hkv)), kThreads, smem, s>>>(p);
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
