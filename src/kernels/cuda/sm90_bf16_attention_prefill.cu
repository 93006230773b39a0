// sm90_bf16_attention_prefill: the prefill attention of bf16_attention_prefill.cu on Hopper's
// warpgroup tensor cores (wgmma, sm_90a only; other targets run the mma.sync kernel). Same blocks
// (128 rows = a query tile's (token, q head) pairs of one kv head), same tile list, same paged
// K/V ring; two warpgroups of 64 rows per block, two blocks per SM. Per 64-key tile a warpgroup
// issues S = Q K^T (Q and K from shared memory) and, behind it, the previous tile's O += P V (P from
// registers, V from shared memory), so the softmax of one tile runs while the tensor cores finish
// the other's P V. Layout and pipeline: docs/KERNELS.md, "Attention for many tokens".
#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/sm90_wgmma.cuh"

namespace mx::cuda::kern {
namespace {

using namespace attn_prefill;

constexpr int kRows = kPrefillWgmmaRows;  // (token, q head) rows per block
constexpr int kGroups = kRows / 64;       // warpgroups per block, 64 rows each
constexpr int kThreads = kGroups * 128;   // warps of 16 rows: one m16 tile each
constexpr int kBlocksPerSm = kGroups <= 2 ? 2 : 1;  // 128 registers per thread at most
constexpr int kMT = 1;
constexpr int kWarps = kThreads / 32;
constexpr int kStages = 5;                // K/V tiles in the ring: up to 3 loading ahead (see attend_tile)
constexpr int kTileBytes = kKeys * kDh * 2;  // 8 KB: one K or V tile
constexpr int kQBytes = kRows * kDh * 2;     // the block's Q rows
constexpr int kOnesBytes = kTileBytes;       // 8 KB of BF16 ones: columns 64..71 of every V tile
constexpr size_t kSmemBytes = 1024 + kQBytes + size_t(2) * kStages * kTileBytes + kOnesBytes;  // + alignment slack
static_assert(kRows == kWarps * 16 * kMT, "the warps cover the block's rows");

#ifdef MX_HAVE_WGMMA
using dev::desc_sw128, dev::fence_proxy_async, dev::wgmma_commit, dev::wgmma_fence, dev::wgmma_wait;
// Descriptors (sm90_wgmma.cuh): the K-major Q and K tiles step +32 bytes per k16; for the MN-major V tile
// (a k16 step = 16 keys = +2048 bytes) the leading offset is the distance to columns 64..127, where
// the ones region stands in.
// Keeps the compiler from moving reads or writes of an accumulator across the waits above.
__device__ __forceinline__ void fence_operands(Frag<kMT>& d) {
#pragma unroll
  for (int n = 0; n < 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+f"(d[0][n][i])::"memory");
}

#define MX_WGMMA_D                                                                                             \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define MX_WGMMA_D_ARGS(d)                                                                                      \
  "+f"(d[0][0][0]), "+f"(d[0][0][1]), "+f"(d[0][0][2]), "+f"(d[0][0][3]), "+f"(d[0][1][0]), "+f"(d[0][1][1]),   \
      "+f"(d[0][1][2]), "+f"(d[0][1][3]), "+f"(d[0][2][0]), "+f"(d[0][2][1]), "+f"(d[0][2][2]), "+f"(d[0][2][3]), \
      "+f"(d[0][3][0]), "+f"(d[0][3][1]), "+f"(d[0][3][2]), "+f"(d[0][3][3]), "+f"(d[0][4][0]), "+f"(d[0][4][1]), \
      "+f"(d[0][4][2]), "+f"(d[0][4][3]), "+f"(d[0][5][0]), "+f"(d[0][5][1]), "+f"(d[0][5][2]), "+f"(d[0][5][3]), \
      "+f"(d[0][6][0]), "+f"(d[0][6][1]), "+f"(d[0][6][2]), "+f"(d[0][6][3]), "+f"(d[0][7][0]), "+f"(d[0][7][1]), \
      "+f"(d[0][7][2]), "+f"(d[0][7][3])

// d (64 x 64 f32, this warpgroup) = or += a (64 x 16, shared, K-major) . b (16 x 64, shared, K-major).
__device__ __forceinline__ void wgmma_ss(Frag<kMT>& d, uint64_t a, uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " MX_WGMMA_D ", %32, %33, p, 1, 1, 0, 0;\n}\n"
      : MX_WGMMA_D_ARGS(d)
      : "l"(a), "l"(b), "r"(int(accumulate)));
}
// [d | e] += a (64 x 16, registers: the mma.sync A layout per warp) . b (16 x 72, shared, MN-major):
// d gets columns 0..63, e (C regs of one n8 tile) columns 64..71.
__device__ __forceinline__ void wgmma_rs_mn72(Frag<kMT>& d, float (&e)[4], const uint32_t (&a)[4], uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n72k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, "
               "%10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "
               "%30, %31, %32, %33, %34, %35}, {%36, %37, %38, %39}, %40, p, 1, 1, 1;\n}\n"
               : MX_WGMMA_D_ARGS(d), "+f"(e[0]), "+f"(e[1]), "+f"(e[2]), "+f"(e[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
#undef MX_WGMMA_D
#undef MX_WGMMA_D_ARGS

// The block's Q rows (row = token·G + head of the tile) into shared memory, swizzled like K.
__device__ __forceinline__ void load_q(const AttentionPrefillParams& p, int2 tile, int g, int G, uint4* qs) {
  const int64_t width = int64_t(p.H + 2 * p.Hkv) * kDh;
  const int chunk = threadIdx.x % 8;
#pragma unroll
  for (int i = 0; i < kRows * 8 / kThreads; ++i) {
    const int row = threadIdx.x / 8 + i * (kThreads / 8), ti = row / G;
    const bool ok = ti < tile.y;
    const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.qkv) +
                             (ok ? (tile.x + ti) * width + (g * G + row % G) * kDh : 0);
    dev::cp_async16(qs + swz(row, chunk), reinterpret_cast<const uint4*>(q) + chunk, ok);
  }
}

// The warpgroup's [O | l] += P [V | 1] of one tile: P (BF16 A fragments of keys 16kk..) times the V
// tile of descriptor v (MN-major; a k step is 16 keys = 2048 bytes) with a column block of ones:
// the row sums of P come out of the tensor cores (l: each lane holds its rows' whole sums).
__device__ __forceinline__ void pv_issue(Frag<kMT>& o, float (&l)[4], const uint32_t (&pa)[4][4], uint64_t v) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) wgmma_rs_mn72(o, l, pa[kk], v + kk * (2048 / 16));
  wgmma_commit();
}
__device__ __forceinline__ void fence_operands(float (&l)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) asm volatile("" : "+f"(l[i])::"memory");
}

struct Smem {
  uint4* q;   // kRows rows of 128 bytes
  uint4* k;   // kStages tiles of kKeys rows
  uint4* v;
  uint4* ones;  // kOnesBytes of BF16 1.0
};

// One (query tile, kv head). The ring: at key tile kt (after the barrier) tiles kt - 1 (its V, for
// the P V still to issue), kt, and up to kt + kStages - 2 are resident or loading; the stage of kt - 2
// is free, because every warpgroup waited for its P V of kt - 2 before this barrier.
template <bool kAligned, bool kFp8>
__device__ __forceinline__ void attend_tile(const AttentionPrefillParams& p, int2 tile, const Smem& sm) {
  __shared__ int row_lo[kRows], row_hi[kRows];
  const int g = blockIdx.y, G = p.H / p.Hkv, wg = threadIdx.x / 128;
  RowState<kMT> st;
  const int2 range = init_rows<kWarps>(p, tile, g, G, st, row_lo, row_hi);
  const int lo = range.x, hi = range.y;

  const int32_t* table = p.block_tables + int64_t(p.seq_index[tile.x]) * p.max_blocks;
  const KvScales scales(p);
  const float scale_log2 = p.scale * kLog2e * scales.k;
  const int first = lo / kKeys, last = hi / kKeys;
  KvLoader<kThreads, kAligned, kFp8> kv(int(p.block_size), p.Hkv, g);
  load_q(p, tile, g, G, sm.q);  // joins the first tile's commit group
#pragma unroll
  for (int s = 0; s < kStages - 2; ++s) {  // one commit group per tile, empty past the last
    kv.fetch(table, (first + s) * kKeys, lo, hi);
    if (first + s <= last) {
      kv.load(p, (first + s) * kKeys, lo, hi, sm.k + s * kKeys * 8, sm.v + s * kKeys * 8);
      kv.land(sm.k + s * kKeys * 8, sm.v + s * kKeys * 8);
    }
    dev::cp_async_commit();
  }
  kv.fetch(table, (first + kStages - 2) * kKeys, lo, hi);

  // Descriptors of the warpgroup's Q rows and of stage 0's K and V; a stage or k step adds its
  // byte offset / 16 to the start-address field (no carry: shared addresses are < 2^18).
  // V's leading offset points at the ones (a stage's start + s·8 KB, its offset − s·8 KB).
  const uint32_t v_addr = dev::smem_addr(sm.v);
  const uint64_t q_desc = desc_sw128(dev::smem_addr(sm.q + wg * 64 * 8)), k_desc = desc_sw128(dev::smem_addr(sm.k)),
                 v_desc = desc_sw128(v_addr, dev::smem_addr(sm.ones) - v_addr);
  constexpr uint64_t kStageV = kTileBytes / 16 - (uint64_t(kTileBytes / 16) << 16);
  // Every warpgroup runs every key tile of the block's range (masked where its rows see none of it:
  // at most one tile per side differs between the two) and every P V, the first with P = 0: wgmma
  // on paths ptxas cannot prove uniform would be serialized.
  Frag<kMT> o = {}, s;
  float ol[4] = {};              // columns 64..71 of [O | l]: the rows' sums of P
  uint32_t pa[4][4] = {};        // P of the previous tile, whose P V is issued behind the next S
  uint64_t prev_v = v_desc;      // that tile's V (stage 0 for the P = 0 of the first iteration)
  for (int kt = first; kt <= last; ++kt) {
    const int stage = (kt - first) % kStages, k0 = kt * kKeys;
    dev::cp_async_wait<kStages - 3>();  // tile kt (and Q) landed for this thread ...
    fence_proxy_async();                // ... visible to wgmma ...
    __syncthreads();                    // ... for all threads; tile kt - 2's stage is free
    const int ahead = kt + kStages - 2, ahead_stage = (stage + kStages - 2) % kStages;
    if (ahead <= last)
      kv.load(p, ahead * kKeys, lo, hi, sm.k + ahead_stage * kKeys * 8, sm.v + ahead_stage * kKeys * 8);
    dev::cp_async_commit();
    kv.fetch(table, (ahead + 1) * kKeys, lo, hi);
    wgmma_fence();
    const uint64_t k_stage = k_desc + stage * (kTileBytes / 16);
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) wgmma_ss(s, q_desc + 2 * ks, k_stage + 2 * ks, ks > 0);  // +32 bytes per k step
    wgmma_commit();
    pv_issue(o, ol, pa, prev_v);
    wgmma_wait<1>();  // S done; the previous tile's P V may still run
    fence_operands(s);
    float alpha[2 * kMT];
    const bool moved = st.sees_all(k0) ? softmax_max<false>(s, st, alpha, row_lo, row_hi, k0, scale_log2)
                                       : softmax_max<true>(s, st, alpha, row_lo, row_hi, k0, scale_log2);
    softmax_exp<false>(s, st, alpha, scale_log2);
    wgmma_wait<0>();  // the previous P V has read pa
    fence_operands(o);
    fence_operands(ol);
    if (moved) {  // skipped when no row's max moved (alpha = 1 exactly)
      rescale(o, alpha);
      ol[0] *= alpha[0], ol[1] *= alpha[0], ol[2] *= alpha[1], ol[3] *= alpha[1];
    }
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) p_fragment(s, 0, kk, pa[kk]);
    prev_v = v_desc + stage * kStageV;
    // FP8: the ahead tile's codes, widened (the stage of kt - 2 stays free until the next barrier).
    if (ahead <= last) kv.land(sm.k + ahead_stage * kKeys * 8, sm.v + ahead_stage * kKeys * 8);
  }
  wgmma_fence();
  pv_issue(o, ol, pa, prev_v);
  wgmma_wait<0>();
  fence_operands(o);
  fence_operands(ol);
  st.l[0] = ol[0], st.l[1] = ol[2];  // rows g and g + 8
  store_out<kMT, true>(p, tile, g, G, o, st, scales.v);
}
#endif  // MX_HAVE_WGMMA

// Grid (grid_tiles, Hkv); block x takes tiles x, x + grid_tiles, ... counted from the last one.
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) sm90_bf16_attention_prefill(AttentionPrefillParams p) {
#ifdef MX_HAVE_WGMMA
  extern __shared__ uint8_t raw[];
  const uint32_t base = dev::smem_addr(raw), base1k = (base + 1023) & ~1023u;
  uint4* q = reinterpret_cast<uint4*>(raw + (base1k - base));
  const Smem sm{q, q + kQBytes / 16, q + (kQBytes + kStages * kTileBytes) / 16,
                q + (kQBytes + 2 * kStages * kTileBytes) / 16};
  for (int i = threadIdx.x; i < kOnesBytes / 16; i += kThreads)  // BF16 1.0
    sm.ones[i] = make_uint4(0x3f803f80u, 0x3f803f80u, 0x3f803f80u, 0x3f803f80u);
  // (made visible to wgmma by the fence and barrier before the first tile's products)
  const int n_tiles = *p.num_tiles;
  const bool aligned = kKeys % p.block_size == 0, fp8 = p.kv_scales != nullptr;
  for (int i = blockIdx.x; i < n_tiles; i += gridDim.x) {
    const int2 tile = p.tiles[n_tiles - 1 - i];
    if (fp8)
      aligned ? attend_tile<true, true>(p, tile, sm) : attend_tile<false, true>(p, tile, sm);
    else
      aligned ? attend_tile<true, false>(p, tile, sm) : attend_tile<false, false>(p, tile, sm);
    __syncthreads();  // the next tile's first loads overwrite Q and stages still being read
  }
#else
  __trap();  // never launched: attention_prefill_wgmma_available() is false without sm_90a code
#endif
}

}  // namespace

bool attention_prefill_wgmma_available() {
#ifdef MXSERVE_SM90A
  static const bool ok = runs_sm90a_code(sm90_bf16_attention_prefill);
  return ok;
#else
  return false;
#endif
}

size_t attention_prefill_wgmma_smem_bytes() { return kSmemBytes; }

cudaError_t run_sm90_bf16_attention_prefill(const AttentionPrefillParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  cudaError_t e = cudaFuncSetAttribute(sm90_bf16_attention_prefill, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       int(kSmemBytes));
  if (e != cudaSuccess) return e;
  if (e = run_attention_prefill_tiles(p, kRows, s); e != cudaSuccess) return e;
  sm90_bf16_attention_prefill<<<dim3(unsigned(p.grid_tiles), unsigned(p.Hkv)), kThreads, kSmemBytes, s>>>(p);
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
