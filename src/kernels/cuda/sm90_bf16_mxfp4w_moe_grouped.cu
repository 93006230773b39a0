// sm90_bf16_mxfp4w_moe_grouped: the grouped MoE GEMMs of bf16_mxfp4w_moe_grouped.cu on Hopper's
// warpgroup tensor cores (sm_90a only; other targets run the mma.sync kernels). Same routing, tile
// list and finalize. The operands are swapped: the weights are the wgmma A operand, decoded from
// MXFP4 straight into registers (each weight once per tile of pairs, never through shared
// memory), and the tile's pairs are B, read by the tensor cores from shared memory; a block is two
// warpgroups of 64 weight rows (output features) x the tile's 64 or 128 pairs. The k order inside
// every 64-wide stage is permuted so that a thread's A values are the codes of whole MXFP4 words
// (moe_grouped_k_slot): x is permuted once per call (sm90_bf16_moe_grouped_permute_x) and gate_up writes
// act in the permuted order that down reads. Layout and pipeline: docs/KERNELS.md, "MoE for many
// tokens".
#include <algorithm>

#include "kernels/cuda/moe_grouped_bf16.cuh"
#include "kernels/cuda/sm90_wgmma.cuh"

namespace mx::cuda::kern {
namespace {

using namespace grouped_bf16;

constexpr int kBlockRows = 128;  // weight rows per block: two warpgroups of 64
constexpr int kThreads = 256;
constexpr int kBK = 64;       // k per stage: two MXFP4 blocks of each weight row
constexpr int kStagesMax = 8; // cp.async ring of pair rows and raw weight bytes: kStages - 2 loading ahead,
                              // 1 being read by the tensor cores, 1 by the decode
constexpr int kWBytes = kBlockRows * 32;  // a stage's raw MXFP4: 128 rows x 2 blocks of 16 bytes

template <int kN>  // pairs per tile: 64 or 128
struct Layout {
  static constexpr int kXBytes = kN * 128;              // kN pair rows of 64 BF16, 128-byte swizzle
  static constexpr int kStageBytes = kXBytes + kWBytes;  // a multiple of 1024: every X tile aligned
  // 128-pair tiles: 5 stages (112 KB), so that two blocks fit an SM (with 128 registers; faster
  // than one block with 8 stages at T = 2048: docs/lab/RUNS_01-10.md, run 10, step 7).
  static constexpr int kStages = kN == 128 ? 5 : kStagesMax;
  static constexpr int kRingBytes = kStages * kStageBytes;
  // + alignment slack + the block's scale bytes (128 rows x G, loaded once per block) + 16 bytes of
  // slack for the unchecked scale reads
  static size_t smem_bytes(int G) { return 1024 + size_t(kRingBytes) + size_t(kBlockRows) * G + 16; }
};

// Position of element o (0..63) of a 64-wide stage in the permuted order. k16 step s of the stage
// reads, in thread (g, t)'s A registers, BF16 pairs of word t of MXFP4 block s/2 as
// decode_word_pairs makes them (elements (i, i + 4)): (2(s%2), +4) in mma A columns 2t, 2t+1 and
// (2(s%2) + 1, +4) in columns 2t+8, 2t+9. So element 32b + 8t + i (block b, word t, i = 4e + 2s1 +
// h) stands at 16(2b + s1) + 8h + 2t + e.
__host__ __device__ __forceinline__ int moe_grouped_k_slot(int o) {
  const int b = o / 32, t = (o % 32) / 8, i = o % 8, e = i / 4, s1 = (i % 4) / 2, h = i % 2;
  return 16 * (2 * b + s1) + 8 * h + 2 * t + e;
}

// One thread per (token, 64-wide stage): xp = x with every stage permuted (a stage may be 32 wide
// at the end of a row; its elements stay among the first 32 slots).
__global__ void sm90_bf16_moe_grouped_permute_x(MoeGroupedParams p) {
  const int stages = (p.D + kBK - 1) / kBK;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.T * stages) return;
  const int64_t t = i / stages;
  const int c0 = int(i % stages) * kBK, n = min(kBK, p.D - c0);
  const uint16_t* src = static_cast<const uint16_t*>(p.x) + t * p.D + c0;
  uint16_t* dst = static_cast<uint16_t*>(p.xp) + t * p.D + c0;
  uint16_t v[kBK];
#pragma unroll
  for (int w = 0; w < kBK / 8; ++w)
    if (8 * w < n) *reinterpret_cast<uint4*>(v + 8 * w) = reinterpret_cast<const uint4*>(src)[w];
  uint16_t o[kBK];
#pragma unroll
  for (int k = 0; k < kBK; ++k) o[moe_grouped_k_slot(k)] = v[k];
#pragma unroll
  for (int w = 0; w < kBK / 8; ++w)
    if (8 * w < n) reinterpret_cast<uint4*>(dst)[w] = *reinterpret_cast<const uint4*>(o + 8 * w);
}

#ifdef MX_HAVE_WGMMA
using Acc = float[8][4];  // a warpgroup's 64 x 64 FP32 tile: n8 tiles x the mma.sync C layout

// d (64 x 64) += a (64 x 16, registers: mma.sync A layout per warp) . b (16 x 64, shared, K-major).
__device__ __forceinline__ void wgmma_rs(Acc& d, const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
      "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
// A registers stay untouched (and alive) until here: the tensor cores read them after the issue.
__device__ __forceinline__ void keep(uint32_t (&a)[4][4]) {
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[s][i])::"memory");
}
// Keeps the compiler from moving reads of the accumulators above the wait.
__device__ __forceinline__ void fence_acc(Acc& d) {
#pragma unroll
  for (int n = 0; n < 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+f"(d[n][i])::"memory");
}
#endif

#ifdef MX_HAVE_WGMMA  // used by the sm_90a code only
// Column j of a row in the permuted k order (the gate_up epilogue writes act in it).
__device__ __forceinline__ int64_t permuted_col(int64_t j) { return j / 64 * 64 + moe_grouped_k_slot(int(j % 64)); }
// Raw weight chunk c = 2·row + block of a stage, stored at c ^ ((c >> 3) & 3): the 8 lane groups of
// a warp read rows 2g (and 2g + 1) of their 16 in 8 different 16-byte bank groups.
__device__ __forceinline__ int w_slot(int c) { return c ^ ((c >> 3) & 3); }
#endif

// Block (128-row slab n0 of the expert's matrix, pair tile). Warpgroup wg, warp w, lane (g, t):
// A rows g and g + 8 are weight rows n0 + 64wg + 16w + 2g and that + 1 (gate 2j and up 2j + 1 of
// gate_up: the SwiGLU pairs meet in one thread); per stage it decodes word t of both MXFP4 blocks
// of its two rows into the A registers of the stage's four k16 steps.
// kNT: 64-pair halves of the tile that hold pairs (a tile of 128 with at most 64 takes kNT = 1:
// the products of the empty half are not issued).
#ifdef MX_HAVE_WGMMA
template <bool kGateUp, int kN, int kNT>
__device__ __forceinline__ void grouped_tile(const MoeGroupedParams& p, int4 tile, uint8_t* smem) {
  using L = Layout<kN>;
  const int e = tile.x, row0 = tile.y, rows = tile.z;
  const int N = kGateUp ? 2 * p.F : p.D;
  const int Kd = kGateUp ? p.D : p.F;
  const int G = Kd / 32, KT = (Kd + kBK - 1) / kBK;
  const int n0 = blockIdx.x * kBlockRows;
  const uint4* wblocks = reinterpret_cast<const uint4*>(kGateUp ? p.gu_blocks : p.dn_blocks) + int64_t(e) * N * G;
  const uint8_t* wscales = (kGateUp ? p.gu_scales : p.dn_scales) + int64_t(e) * N * G;

  const int tid = threadIdx.x, wg = tid / 128, warp = tid % 128 / 32, lane = tid % 32, g = lane / 4, t = lane % 4;

  // Loaders. Pair rows: chunk tid % 8 of rows tid / 8 + 32i, 128-byte swizzle; weights: chunk tid
  // (row tid / 2, block tid % 2 of the stage).
  const int x_chunk = tid % 8;
  constexpr int kXLoads = kNT * 64 * 8 / kThreads;  // rows past kNT halves stay unread
  // Pair rows as 32-bit element offsets from one base (the launcher takes this kernel only where they
  // fit), -1 past the tile's pairs; shared addresses as 32-bit offsets of the stage.
  const __nv_bfloat16* x_base = static_cast<const __nv_bfloat16*>(kGateUp ? p.xp : p.act) + x_chunk * 8;
  int x_off[kXLoads];
  uint32_t x_dst[kXLoads];
#pragma unroll
  for (int i = 0; i < kXLoads; ++i) {
    const int r = tid / 8 + (kThreads / 8) * i;
    x_dst[i] = uint32_t(dev::swz(r, x_chunk)) * 16;
    x_off[i] = r >= rows ? -1 : kGateUp ? p.pair_at[row0 + r] / p.K * p.D : (row0 + r) * p.F;
  }
  const int x_lim = Kd - x_chunk * 8;  // a stage's k offset below this: the chunk is inside the row
  const int wn = n0 + tid / 2, wblk = tid % 2;
  const uint32_t sbase = dev::smem_addr(smem), w_dst = uint32_t(L::kXBytes + w_slot(tid) * 16);
  const uint4* w_src = wblocks + int64_t(wn < N ? wn : 0) * G + wblk;
  auto load_stage = [&](int kt) {
    const uint32_t st = sbase + uint32_t((kt % L::kStages) * L::kStageBytes);
    const int col = kt * kBK;
#pragma unroll
    for (int i = 0; i < kXLoads; ++i) {  // zeros past the tile's pairs and past Kd
      const bool ok = x_off[i] >= 0 && col < x_lim;
      dev::cp_async16(st + x_dst[i], x_base + (ok ? x_off[i] + col : 0), ok);
    }
    const bool ok = wn < N && 2 * kt + wblk < G;
    dev::cp_async16(st + w_dst, ok ? w_src + 2 * kt : wblocks, ok);
  };

  // The block's scale bytes (rows n0.. below N) join stage 0's loads. The thread's weight rows
  // (local to the block); scale 127 past N or G (the zero-filled bytes decode to 0 whatever the scale).
  const int lr0 = 64 * wg + 16 * warp + 2 * g, rows_n = min(kBlockRows, N - n0);
  uint8_t* ss = smem + L::kRingBytes;
  stage_block_scales<kThreads>(wscales + int64_t(n0) * G, rows_n * G, ss);
  // Read without bounds checks: rows past N read row N - 1's bytes and a block past G (odd G) the
  // next row's (or the 16 bytes of slack); their weights are zero-filled, so any scale gives 0.
  const int s_row[2] = {min(lr0, rows_n - 1) * G, min(lr0 + 1, rows_n - 1) * G};
  auto scales_of = [&](int kt, uint32_t (&sc)[4]) {  // [2 row + block]
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h) sc[2 * r + h] = ss[s_row[r] + 2 * kt + h];
  };

  Acc acc[kNT];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[nt][n][i] = 0.0f;

#pragma unroll
  for (int s = 0; s < L::kStages - 2; ++s) {  // one commit group per stage, empty past the last
    if (s < KT) load_stage(s);
    dev::cp_async_commit();
  }
  // Stage kt's products run while stage kt + 1 is decoded: A registers alternate between two sets,
  // and the stage loaded at kt (kt + L::kStages - 2) is the one of kt - 2, whose products both warpgroups waited
  // for (wait<1> at kt - 1) before this barrier.
  // One stage: decode into `cur`, issue its products, then wait for the previous stage's, which
  // frees `prev` (kept alive until then: the tensor cores read A registers after the issue).
  auto stage = [&](int kt, uint32_t (&cur)[4][4], uint32_t (&prev)[4][4]) {
    dev::cp_async_wait<L::kStages - 3>();  // stage kt has landed (for this thread) ...
    dev::fence_proxy_async();           // ... is visible to the tensor cores' reads ...
    __syncthreads();                    // ... for all
    if (kt + L::kStages - 2 < KT) load_stage(kt + L::kStages - 2);
    dev::cp_async_commit();
    uint32_t sc[4];
    scales_of(kt, sc);

    const uint8_t* st = smem + (kt % L::kStages) * L::kStageBytes;
    with_big_scales(max(max(sc[0], sc[1]), max(sc[2], sc[3])) > 128, [&](auto big) {
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t q =
              *reinterpret_cast<const uint32_t*>(st + L::kXBytes + w_slot(2 * (lr0 + r) + h) * 16 + 4 * t);
          uint32_t out[4];
          decode_word_pairs(q, mxfp4_factor1(sc[2 * r + h]), out);
          if constexpr (decltype(big)::value) fix_big(mxfp4_factor2(sc[2 * r + h]), out);
          // steps 2h (pairs 0, 1) and 2h + 1 (pairs 2, 3): registers r (cols 2t..) and 2 + r (2t + 8..)
          cur[2 * h][r] = out[0], cur[2 * h][2 + r] = out[1];
          cur[2 * h + 1][r] = out[2], cur[2 * h + 1][2 + r] = out[3];
        }
    });
    const uint32_t x_addr = dev::smem_addr(st);
    dev::wgmma_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) wgmma_rs(acc[nt], cur[s], dev::desc_sw128(x_addr + nt * 64 * 128) + 2 * s);
    dev::wgmma_commit();
    dev::wgmma_wait<1>();  // stage kt - 1's products: its A set and stage are free
    keep(prev);
  };
  uint32_t a0[4][4] = {}, a1[4][4] = {};
  for (int kt = 0; kt < KT; kt += 2) {
    stage(kt, a0, a1);
    if (kt + 1 < KT) stage(kt + 1, a1, a0);
  }
  dev::wgmma_wait<0>();
  keep(a0);
  keep(a1);
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) fence_acc(acc[nt]);

  // Epilogue: acc[nt][i] holds pairs 64nt + 8i + 2t + {0, 1} (registers {0, 1}) of weight row
  // n0 + lr0 and ({2, 3}) of row n0 + lr0 + 1.
  const int n = n0 + lr0;
  if (n >= N) return;
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int r = 64 * nt + 8 * i + 2 * t + u;
        if (r >= rows) continue;
        const int64_t pos = row0 + r;
        store_pair<kGateUp>(p, e, N, pos, n, acc[nt][i][u], acc[nt][i][2 + u], permuted_col(n / 2));
      }
}
#endif

template <bool kGateUp, int kN>
__global__ void __launch_bounds__(kThreads, kN == 128 ? 2 : 1) sm90_bf16_mxfp4w_moe_grouped(MoeGroupedParams p) {
#ifdef MX_HAVE_WGMMA
  if (int(blockIdx.y) >= *p.num_tiles) return;
  const int4 tile = p.tiles[blockIdx.y];
  extern __shared__ uint8_t raw[];
  const uint32_t base = dev::smem_addr(raw);
  uint8_t* smem = raw + (((base + 1023) & ~1023u) - base);
  if (kN == 128 && tile.z > 64)
    grouped_tile<kGateUp, kN, kN / 64>(p, tile, smem);
  else
    grouped_tile<kGateUp, kN, 1>(p, tile, smem);
#else
  __trap();  // never launched: moe_grouped_wgmma_available() is false without sm_90a code
#endif
}

template <int kN>
cudaError_t launch_gemms(const MoeGroupedParams& p, cudaStream_t s) {
  static_assert(kBlockRows == 128, "launch_grouped_gemms: 128 output rows per block");
  const int64_t permute_threads = p.T * ((p.D + kBK - 1) / kBK);
  sm90_bf16_moe_grouped_permute_x<<<unsigned((permute_threads + 127) / 128), 128, 0, s>>>(p);
  return launch_grouped_gemms(sm90_bf16_mxfp4w_moe_grouped<true, kN>, sm90_bf16_mxfp4w_moe_grouped<false, kN>,
                              kThreads, int(Layout<kN>::smem_bytes(std::max(p.D, p.F) / 32)), p, s);
}

}  // namespace

bool moe_grouped_wgmma_available() {
#ifdef MXSERVE_SM90A
  static const bool ok = runs_sm90a_code(sm90_bf16_mxfp4w_moe_grouped<true, kGroupedTileM>);
  return ok;
#else
  return false;
#endif
}

size_t moe_grouped_wgmma_smem_bytes(int tile_m, int D, int F) {
  const int G = std::max(D, F) / 32;
  return tile_m == kGroupedTallTileM ? Layout<kGroupedTallTileM>::smem_bytes(G) : Layout<kGroupedTileM>::smem_bytes(G);
}

cudaError_t run_sm90_bf16_mxfp4w_moe_grouped_gemms(const MoeGroupedParams& p, cudaStream_t s) {
  if (p.xp == nullptr) return cudaErrorInvalidValue;
  return p.tile_m == kGroupedTallTileM ? launch_gemms<kGroupedTallTileM>(p, s) : launch_gemms<kGroupedTileM>(p, s);
}

}  // namespace mx::cuda::kern
