// bf16_mxfp4w_moe_thin: the grouped MoE GEMMs for decode batches, where the experts average a few
// (token, slot) pairs each (T·K ≤ 16·E: launch_moe_grouped.cpp). Same routing, scratch and finalize
// as bf16_mxfp4w_moe_grouped.cu; tiles of up to 16 pairs of one expert x 128 output rows. The step is
// a weight stream (every active expert's MXFP4 bytes read once), so the kernel is built to spend as
// few instructions per weight byte as it can (issue-bound before: docs/lab/RUNS_21-30.md, run 21):
// 128-wide k stages (one MXFP4 block per lane and row, one 16-byte shared load per row and stage),
// a 3-operation decode per BF16 pair (decode_word_pairs), the A rows past the tile's pairs zeroed
// once and never loaded, the m16 half of rows 8..15 skipped when the tile has at most 8 pairs,
// scales read from a block-wide copy without bounds checks (blocks past K are zero-filled, so any
// scale gives 0; weight rows past N are not loaded and their outputs not stored).
#include "kernels/cuda/moe_grouped_bf16.cuh"

namespace mx::cuda::kern {
namespace {

using namespace grouped_bf16;

constexpr int kBN = 128;  // output rows per block: 4 warps x 32 (4 n8 tiles)
constexpr int kBM = kGroupedShortTileM;  // pairs per tile
constexpr int kBK = 128;  // k per stage: 4 MXFP4 blocks, 64 bytes per weight row
constexpr int kNT = 4;    // n8 tiles per warp
constexpr int kThreads = 128;
constexpr int kAChunks = kBM * kBK * 2 / 16;  // 256: 16 rows x 16 chunks of 8 BF16
constexpr int kBChunks = kBN * kBK / 2 / 16;  // 512: 128 rows x 4 chunks (one MXFP4 block each)
constexpr int kStageChunks = kAChunks + kBChunks;
// 3 x 12 KB of cp.async ring + the block's scales (11.5 KB at gpt-oss sizes): 4 blocks per SM. 4 or
// 5 stages (3 blocks per SM) measured no faster (docs/lab/RUNS_21-30.md, run 21).
constexpr int kStages = 3;
constexpr int kRingBytes = kStages * kStageChunks * 16;
static_assert(kBM == 16 && kAChunks == 2 * kThreads && kBChunks == 4 * kThreads, "loaders below");

// A row r keeps its 16 chunks (k 8j..8j+7 of the stage) at r·16 + phys(r, j): lane (g, c) reads
// chunk 4c + w of rows g, g + 8 for word w, and this XOR puts the 8 lanes of each quarter warp (2
// rows x 4 values of c) in 8 different bank groups.
__device__ __forceinline__ int a_phys(int r, int j) { return r * 16 + (j ^ ((j >> 3) << 1) ^ (r & 1)); }

// d += a . b, BF16 m16n8k16, FP32 accumulate; not volatile, so that ptxas may interleave the mmas
// with the decode of the next words.
__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The A pairs that match: a chunk of 8 BF16 (x0 x1 | x2 x3 | x4 x5 | x6 x7) -> (x0, x4), (x1, x5),
// (x2, x6), (x3, x7).
__device__ __forceinline__ void pair_halves(const uint4& v, uint32_t (&out)[4]) {
  out[0] = __byte_perm(v.x, v.z, 0x5410);
  out[1] = __byte_perm(v.x, v.z, 0x7632);
  out[2] = __byte_perm(v.y, v.w, 0x5410);
  out[3] = __byte_perm(v.y, v.w, 0x7632);
}

// 16 bytes global -> shared (zero-filled when !ok), asking L2 to fetch the surrounding 256 bytes
// with the line: the weight row's next stages (faster at T = 64: docs/lab/RUNS_21-30.md, run 21).
__device__ __forceinline__ void cp_async16_l2wide(uint32_t dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0));
}

// Block (n-tile, pair tile). Warp w owns output rows n0 + 32w .. + 31 (n8 tile ni: rows 8ni..) x
// all 16 pair rows. Per stage, lane (g, c) decodes MXFP4 block 4kt + c of its rows 32w + 8ni + g
// (4 words: k 32c + 8w' .. of the stage) and multiplies word w' with A chunk 4c + w' of pair rows g
// and g + 8: the k order inside each mma is permuted identically on both sides (as in
// bf16_mxfp4w_moe_grouped.cu).
template <bool kGateUp>
__global__ void __launch_bounds__(kThreads, 4) bf16_mxfp4w_moe_thin_gemm(MoeGroupedParams p) {
  // gate_up needs the route's tiles. down (launched while gate_up's last blocks run) may read them
  // before its wait: the route kernel was complete before any gate_up block passed its own.
  if constexpr (kGateUp) {
    dev::pdl_wait();
    dev::pdl_launch_dependents();
  }
  if (int(blockIdx.y) >= *p.num_tiles) return;
  const GroupedTile tile = tile_of<kGateUp>(p);
  const int e = tile.e, row0 = tile.row0, rows = tile.rows, N = tile.N, Kd = tile.Kd, G = tile.G;
  const int KT = (G + 3) / 4;
  const int n0 = blockIdx.x * kBN;
  const int rows_n = min(kBN, N - n0);
  const uint4* wblocks = reinterpret_cast<const uint4*>(kGateUp ? p.gu_blocks : p.dn_blocks) + int64_t(e) * N * G;
  const uint8_t* wscales = (kGateUp ? p.gu_scales : p.dn_scales) + int64_t(e) * N * G;

  extern __shared__ uint4 smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, c = lane % 4;

  // A rows at and past `rows` stay zero in every stage: zero them once, never load them.
  for (int i = tid; i < kStages * kAChunks; i += kThreads) {
    const int r = (i % kAChunks) / 16;
    if (r >= rows) smem[(i / kAChunks) * kStageChunks + i % kAChunks] = make_uint4(0, 0, 0, 0);
  }
  // Loaders, on 32-bit shared addresses computed once. A: chunk (tid + 128i) % 16 of pair row
  // (tid + 128i) / 16; B: chunk tid % 4 of weight rows tid / 4 + 32i.
  const uint32_t sbase = dev::smem_addr(smem);
  // A rows as 32-bit element offsets from one base (the launcher takes this kernel only where they fit).
  const __nv_bfloat16* a_base = static_cast<const __nv_bfloat16*>(kGateUp ? p.x : p.act);
  int a_off[2];
  uint32_t a_dst[2];
  int a_lim[2];  // the stage's k offset below this: the chunk is inside the row
  bool a_row_ok[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = tid + kThreads * i, r = idx / 16, j = idx % 16;
    a_row_ok[i] = r < rows;
    a_dst[i] = uint32_t(a_phys(r, j)) * 16;
    a_lim[i] = Kd - j * 8;
    const int rr = a_row_ok[i] ? r : 0;
    a_off[i] = (kGateUp ? p.pair_at[row0 + rr] / p.K * p.D : (row0 + rr) * p.F) + j * 8;
  }
  const int b_chunk = tid % 4, b_lim = G - b_chunk;  // block 4kt + b_chunk exists while 4kt < b_lim
  const uint4* b_src = wblocks + int64_t(n0 + tid / 4) * G + b_chunk;  // row tid / 4; row + 32i at + 32 G i
  const int64_t b_step = int64_t(32) * G;
  bool b_row_ok[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) b_row_ok[i] = tid / 4 + 32 * i < rows_n;
  const uint32_t b_dst = uint32_t(kAChunks + tid) * 16;
  auto load_a = [&](int kt, int slot) {
    const uint32_t st = sbase + uint32_t(slot * kStageChunks * 16);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      if (!a_row_ok[i]) continue;
      const bool ok = kt * kBK < a_lim[i];
      // a disabled copy still names a valid address: its row's start (a_off - 8j = a_off + a_lim - Kd)
      dev::cp_async16(st + a_dst[i], a_base + a_off[i] + (ok ? kt * kBK : a_lim[i] - Kd), ok);
    }
  };
  auto load_b = [&](int kt, int slot) {
    const uint32_t st = sbase + uint32_t(slot * kStageChunks * 16);
    const bool blk_ok = 4 * kt < b_lim;  // blocks past K are zero-filled
    const uint4* src = blk_ok ? b_src + 4 * kt : wblocks;
#pragma unroll
    for (int i = 0; i < 4; ++i)  // rows past N are never loaded: their outputs are not stored
      if (b_row_ok[i]) cp_async16_l2wide(st + b_dst + uint32_t(kThreads * 16 * i), blk_ok ? src + b_step * i : src, blk_ok);
  };
  // The block's scale bytes, rows n0.. x G (+ 16 bytes of slack: lanes past G in the last stage
  // read a byte or two beyond the last row; their weights are zero-filled, so any scale gives 0).
  uint8_t* ss = reinterpret_cast<uint8_t*>(smem) + kRingBytes;
  stage_block_scales<kThreads>(wscales + int64_t(n0) * G, rows_n * G, ss);
  int s_off[kNT];
#pragma unroll
  for (int ni = 0; ni < kNT; ++ni) s_off[ni] = min(32 * warp + 8 * ni + g, rows_n - 1) * G + c;

  float acc[kNT][4] = {};
  const bool two_m = rows > 8;  // pair rows 8..15 exist: the m16 tile's lower half is not all zero

  // The first stages' weights (and the scales above) are requested before down waits for gate_up's
  // act rows: they stream while gate_up's last blocks finish. The first commit group holds them.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s)
    if (s < KT) load_b(s, s);
  if constexpr (!kGateUp) {
    dev::pdl_wait();
    dev::pdl_launch_dependents();
  }
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < KT) load_a(s, s);
    dev::cp_async_commit();
  }
  for (int kt = 0, slot = 0; kt < KT; ++kt, slot = slot == kStages - 1 ? 0 : slot + 1) {
    dev::cp_async_wait<kStages - 2>();
    __syncthreads();
    if (kt + kStages - 1 < KT) {
      const int next = slot == 0 ? kStages - 1 : slot - 1;
      load_a(kt + kStages - 1, next);
      load_b(kt + kStages - 1, next);
    }
    dev::cp_async_commit();

    const uint4* st = smem + slot * kStageChunks;
    uint32_t m1[kNT], sc_max = 0;
    uint4 braw[kNT];
#pragma unroll
    for (int ni = 0; ni < kNT; ++ni) {
      const uint32_t sc = ss[s_off[ni] + 4 * kt];
      sc_max = max(sc_max, sc);
      m1[ni] = mxfp4_factor1(sc);
      braw[ni] = st[kAChunks + (32 * warp + 8 * ni + g) * 4 + c];
    }
    with_big_scales(sc_max > 128, [&](auto big) {  // the stage's products
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        // k of the stage 32c + 8w + (0..7): mma step 2w takes elements (0, 4 | 1, 5), step 2w + 1 (2, 6 | 3, 7)
        uint32_t lo[4], hi[4] = {0, 0, 0, 0};
        pair_halves(st[a_phys(g, 4 * c + w)], lo);
        if (two_m) pair_halves(st[a_phys(g + 8, 4 * c + w)], hi);
#pragma unroll
        for (int ni = 0; ni < kNT; ++ni) {
          const uint32_t q = w == 0 ? braw[ni].x : w == 1 ? braw[ni].y : w == 2 ? braw[ni].z : braw[ni].w;
          uint32_t b[4];
          decode_word_pairs(q, m1[ni], b);
          if constexpr (decltype(big)::value) fix_big(mxfp4_factor2(ss[s_off[ni] + 4 * kt]), b);
          mma_bf16(acc[ni], lo[0], hi[0], lo[1], hi[1], b[0], b[1]);
          mma_bf16(acc[ni], lo[2], hi[2], lo[3], hi[3], b[2], b[3]);
        }
      }
    });
  }

  // Epilogue: acc[ni] holds pair rows g (0, 1) and g + 8 (2, 3), weight rows 2c, 2c + 1 of n8 tile ni.
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = half * 8 + g;
    if (r >= rows) continue;
#pragma unroll
    for (int ni = 0; ni < kNT; ++ni) {
      const int n = n0 + 32 * warp + 8 * ni + 2 * c;
      if (n >= N) continue;
      store_pair<kGateUp>(p, e, N, row0 + r, n, acc[ni][2 * half], acc[ni][2 * half + 1], n / 2);
    }
  }
}

}  // namespace

size_t moe_thin_smem_bytes(int D, int F) { return size_t(kRingBytes) + size_t(kBN) * ((D > F ? D : F) / 32) + 16; }

cudaError_t run_bf16_mxfp4w_moe_thin_gemms(const MoeGroupedParams& p, cudaStream_t s) {
  return launch_grouped_gemms(bf16_mxfp4w_moe_thin_gemm<true>, bf16_mxfp4w_moe_thin_gemm<false>, kThreads,
                              int(moe_thin_smem_bytes(p.D, p.F)), p, s);
}

}  // namespace mx::cuda::kern
