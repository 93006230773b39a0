// bf16_mxfp4w_moe_grouped: the MoE experts for many tokens (prefill), no host synchronisation.
// A one-block counting sort groups the T·K (token, slot) pairs by expert and lists GEMM tiles of
// up to 16, 64 or 128 pairs of one expert; two grouped GEMMs (BF16 mma.sync, FP32 accumulate) read
// each MXFP4 weight tile once per tile of pairs and decode it in registers straight into the mma
// B fragments; gate_up fuses bias + clamped SwiGLU, down fuses bias; finalize sums each token's K
// rows in slot order into the residual. Runs on sm_80 and later (cp.async, mma.sync m16n8k16). The FP8
// activation mode (expand + quantize, FP8 GEMMs) is e4m3_mxfp4w_moe_grouped.cu, between the same
// routing and finalize, and so are the GEMMs of the 16-pair tiles (bf16_mxfp4w_moe_thin.cu).
#include "kernels/cuda/moe_grouped_bf16.cuh"

namespace mx::cuda::kern {
namespace {

using namespace grouped_bf16;

constexpr int kBN = 128;           // output features per block
constexpr int kBK = 64;            // reduction elements per stage: two MXFP4 blocks per weight row
constexpr int kBChunks = kBN * 2;  // B stage: kBN weight rows x their 32 MXFP4 bytes of the stage
constexpr int kRouteThreads = 1024;

// The GEMM's shapes: a warp owns all kBM = 16·kMT rows of the tile x 8·kNT columns (kMT m16 x
// kNT n8 mma tiles), kBN / (8·kNT) warps per block. kMT = 4: 64-row tiles, 4 warps of 64 x 32, 3
// blocks per SM; kMT = 8: 128-row tiles, 8 warps of 128 x 16, 2 blocks per SM (each weight decoded
// once per 128 pairs instead of 64, twice the A reads from shared memory per mma). The 16-row tiles
// of decode batches are bf16_mxfp4w_moe_thin.cu. kStages: the cp.async ring of A and raw B stages.
template <int kMT_>
struct Shape {
  static constexpr int kMT = kMT_, kBM = 16 * kMT, kNT = kMT == 8 ? 2 : 4, kStages = 4;
  static constexpr int kWarps = kBN / (8 * kNT), kThreads = 32 * kWarps;
  static constexpr int kMinBlocks = kMT == 4 ? 3 : 2;
  // A stage: kBM rows x 8 chunks of 16 bytes (8 BF16), chunk index XOR the row's parity.
  static constexpr int kAChunks = kBM * 8, kStageChunks = kAChunks + kBChunks;
  static constexpr int kALoads = kAChunks / kThreads, kBLoads = kBChunks / kThreads;  // per thread and stage
  static constexpr int kRingBytes = kStages * kStageChunks * int(sizeof(uint4));
  // the ring, then the block's scale bytes (kBN rows x G)
  static size_t smem_bytes(int G) { return size_t(kRingBytes) + size_t(kBN) * G; }
  static_assert((kMT == 4 || kMT == 8) && kALoads * kThreads == kAChunks && kBLoads * kThreads == kBChunks);
};
static_assert(kGroupedTileM == 64 && kGroupedTallTileM == 128 && kGroupedShortTileM == 16, "the GEMM shapes below");

// ---- routing ---------------------------------------------------------------------------------
// One block: per-expert counts, offsets and the tile list, then each pair's sorted position. The
// order of pairs inside an expert depends on atomics, but every GEMM row is computed from its own
// inputs only, so the results do not. The offsets are a scan by warp 0, 32 experts per round (one
// thread walking the experts took about a third of the kernel's time at a 64-token decode step:
// docs/lab/RUNS_21-30.md, run 30).
__global__ void __launch_bounds__(kRouteThreads) bf16_mxfp4w_moe_grouped_route(MoeGroupedParams p) {
  __shared__ int count[kGroupedMaxExperts];
  __shared__ int base[kGroupedMaxExperts];
  __shared__ int first_tile[kGroupedMaxExperts];
  dev::pdl_wait();  // the ids come from the top-k before
  dev::pdl_launch_dependents();
  const int P = int(p.T) * p.K;
  for (int e = threadIdx.x; e < p.E; e += blockDim.x) count[e] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < P; i += blockDim.x) {
    const int e = p.ids[i];
    if (e >= 0 && e < p.E) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int pos = 0, tile = 0;  // before this round's experts
    for (int e0 = 0; e0 < p.E; e0 += 32) {
      const int e = e0 + lane;
      const int n = e < p.E ? count[e] : 0, nt = (n + p.tile_m - 1) / p.tile_m;
      int cn = n, ct = nt;  // inclusive scans over the round
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int un = __shfl_up_sync(0xffffffffu, cn, o), ut = __shfl_up_sync(0xffffffffu, ct, o);
        if (lane >= o) cn += un, ct += ut;
      }
      if (e < p.E) {
        base[e] = pos + cn - n;
        first_tile[e] = tile + ct - nt;
      }
      pos += __shfl_sync(0xffffffffu, cn, 31);
      tile += __shfl_sync(0xffffffffu, ct, 31);
    }
    if (lane == 0) *p.num_tiles = tile;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < p.E; e += blockDim.x) {
    const int n = count[e];
    for (int m = 0; m * p.tile_m < n; ++m)
      p.tiles[first_tile[e] + m] = make_int4(e, base[e] + m * p.tile_m, min(p.tile_m, n - m * p.tile_m), 0);
    count[e] = 0;  // now the placement cursor
  }
  __syncthreads();
  for (int i = threadIdx.x; i < P; i += blockDim.x) {
    const int e = p.ids[i];
    int pos = -1;
    if (e >= 0 && e < p.E) {
      pos = base[e] + atomicAdd(&count[e], 1);
      p.pair_at[pos] = i;
    }
    p.pos_of_pair[i] = pos;
  }
}

// ---- grouped GEMM ----------------------------------------------------------------------------
// Block (n-tile, pair tile): out rows = the tile's pairs (up to L::kBM), out columns n0..n0+127 of
// the expert's matrix (gate_up: 2F interleaved gate/up rows; down: D rows). Per 64-wide k stage, A
// rows are gathered (gate_up: x of each pair's token; down: act in sorted order) and the 128 weight
// rows' raw MXFP4 bytes copied, both by cp.async into a L::kStages ring. Warp w owns all the tile's
// rows x columns 8·kNT·w.., so each weight is decoded once per tile, straight into mma B
// fragments: lane (g = lane/4, c = lane%4) reads bytes 8c..8c+7 of its rows' stage (k
// 16c..16c+15). The mma's k order is permuted to match: fragment k (2c + e, 2c + 8 + e) of step t
// is k 16c + 4t + (e, 2 + e), so the lane's A values of steps 2h, 2h+1 are one 16-byte chunk
// (2c + h) of its row.
template <bool kGateUp, typename L>
__global__ void __launch_bounds__(L::kThreads, L::kMinBlocks) bf16_mxfp4w_moe_grouped_gemm(MoeGroupedParams p) {
  constexpr int kMT = L::kMT, kNT = L::kNT, kWarpCols = 8 * kNT;
  dev::pdl_wait();  // the route's tiles, and gate_up's act rows for down
  dev::pdl_launch_dependents();
  if (int(blockIdx.y) >= *p.num_tiles) return;
  const GroupedTile tile = tile_of<kGateUp>(p);
  const int e = tile.e, row0 = tile.row0, rows = tile.rows, N = tile.N, Kd = tile.Kd, G = tile.G;
  const int KT = (G + 1) / 2;
  const int n0 = blockIdx.x * kBN;
  const uint4* wblocks = reinterpret_cast<const uint4*>(kGateUp ? p.gu_blocks : p.dn_blocks) + int64_t(e) * N * G;
  const uint8_t* wscales = (kGateUp ? p.gu_scales : p.dn_scales) + int64_t(e) * N * G;

  extern __shared__ uint4 smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, c = lane % 4;

  // Loaders. A: chunk tid % 8 of rows tid/8 + (threads/8)·i; B: chunk tid % 2 of weight rows
  // tid/2 + (threads/2)·i.
  const int a_chunk = tid % 8, b_half = tid % 2;
  const __nv_bfloat16* a_src[L::kALoads];
  int a_dst[L::kALoads];
  bool a_ok[L::kALoads];
#pragma unroll
  for (int i = 0; i < L::kALoads; ++i) {
    const int r = tid / 8 + (L::kThreads / 8) * i;
    a_ok[i] = r < rows;
    a_dst[i] = r * 8 + (a_chunk ^ (r & 1));
    const int rr = a_ok[i] ? r : 0;
    if constexpr (kGateUp) {
      a_src[i] = static_cast<const __nv_bfloat16*>(p.x) + int64_t(p.pair_at[row0 + rr] / p.K) * p.D;
    } else {
      a_src[i] = static_cast<const __nv_bfloat16*>(p.act) + int64_t(row0 + rr) * p.F;
    }
  }
  int b_row[L::kBLoads];  // weight row offsets in 16-byte blocks (N·G < 2^31: checked by the launcher), -1 past N
#pragma unroll
  for (int i = 0; i < L::kBLoads; ++i) {
    const int n = n0 + tid / 2 + (L::kThreads / 2) * i;
    b_row[i] = n < N ? n * G : -1;
  }
  auto load_stage = [&](int kt) {
    uint4* st = smem + (kt % L::kStages) * L::kStageChunks;
#pragma unroll
    for (int i = 0; i < L::kALoads; ++i) {  // zeros past the tile's rows and past Kd
      const int col = kt * kBK + a_chunk * 8;
      const bool ok = a_ok[i] && col < Kd;
      dev::cp_async16(st + a_dst[i], ok ? a_src[i] + col : a_src[i], ok);
    }
#pragma unroll
    for (int i = 0; i < L::kBLoads; ++i) {
      const int blk = 2 * kt + b_half;
      const bool ok = b_row[i] >= 0 && blk < G;
      dev::cp_async16(st + L::kAChunks + tid + L::kThreads * i, wblocks + (ok ? b_row[i] + blk : 0), ok);
    }
  };
  // The lane's scales: rows kWarpCols·warp + 8·ni + g, block 2kt + c/2 of stage kt (127 past the rows or
  // blocks: the zero-filled bytes decode to 0), from the block's scale bytes (joining stage 0's loads).
  const int rows_n = min(kBN, N - n0);
  uint8_t* ss = reinterpret_cast<uint8_t*>(smem) + L::kRingBytes;
  stage_block_scales<L::kThreads>(wscales + int64_t(n0) * G, rows_n * G, ss);
  auto scales_of = [&](int kt, uint32_t (&sc)[kNT]) {
#pragma unroll
    for (int ni = 0; ni < kNT; ++ni) {
      const int r = kWarpCols * warp + 8 * ni + g;
      sc[ni] = r < rows_n && 2 * kt + c / 2 < G ? uint32_t(ss[r * G + 2 * kt + c / 2]) : 127u;
    }
  };

  float acc[kMT][kNT][4] = {};
  auto compute = [&](int kt, const uint32_t (&sc)[kNT]) {
    const uint4* st = smem + (kt % L::kStages) * L::kStageChunks;
    const uint2* bs = reinterpret_cast<const uint2*>(st + L::kAChunks);
    uint2 braw[kNT];
    uint32_t m1[kNT];
    bool big = false;
#pragma unroll
    for (int ni = 0; ni < kNT; ++ni) {
      braw[ni] = bs[(kWarpCols * warp + 8 * ni + g) * 4 + c];
      m1[ni] = mxfp4_factor1(sc[ni]);
      big = big || sc[ni] > 128;
    }
    big = __any_sync(0xffffffffu, big);
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // k steps 2h, 2h+1: the lane's A chunk 2c + h, B word h
      uint32_t b[kNT][4];
#pragma unroll
      for (int ni = 0; ni < kNT; ++ni) decode_word_bf16(h ? braw[ni].y : braw[ni].x, m1[ni], b[ni]);
      if (big)
#pragma unroll
        for (int ni = 0; ni < kNT; ++ni) fix_big(mxfp4_factor2(sc[ni]), b[ni]);
#pragma unroll
      for (int mi = 0; mi < kMT; ++mi) {
        if (16 * mi >= rows) break;  // warp-uniform: m16 tiles past the tile's rows
        const int r = 16 * mi + g;  // rows r and r + 8 have the same parity
        const uint4 lo = st[r * 8 + ((2 * c + h) ^ (r & 1))], hi = st[(r + 8) * 8 + ((2 * c + h) ^ (r & 1))];
        const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y}, a1[4] = {lo.z, hi.z, lo.w, hi.w};  // steps 2h, 2h+1
#pragma unroll
        for (int ni = 0; ni < kNT; ++ni) {
          dev::mma_bf16_16816(acc[mi][ni], a0, b[ni][0], b[ni][1]);
          dev::mma_bf16_16816(acc[mi][ni], a1, b[ni][2], b[ni][3]);
        }
      }
    }
  };

#pragma unroll
  for (int s = 0; s < L::kStages - 1; ++s) {  // one commit group per stage, empty past the last
    if (s < KT) load_stage(s);
    dev::cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    dev::cp_async_wait<L::kStages - 2>();  // stage kt has landed (for this thread) ...
    __syncthreads();                    // ... for all; the slot read at kt - 1 is free
    if (kt + L::kStages - 1 < KT) load_stage(kt + L::kStages - 1);
    dev::cp_async_commit();
    uint32_t sc[kNT];
    scales_of(kt, sc);
    compute(kt, sc);
  }

  // Epilogue: fragment (mi, ni) holds rows g, g+8 and columns 2c, 2c+1 of its 16x8 tile; the
  // column pair is (gate 2j, up 2j+1) in gate_up.
#pragma unroll
  for (int mi = 0; mi < kMT; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = mi * 16 + half * 8 + g;
      if (r >= rows) continue;
      const int64_t pos = row0 + r;
#pragma unroll
      for (int ni = 0; ni < kNT; ++ni) {
        const int n = n0 + warp * kWarpCols + ni * 8 + 2 * c;
        if (n >= N) continue;
        store_pair<kGateUp>(p, e, N, pos, n, acc[mi][ni][2 * half], acc[mi][ni][2 * half + 1], n / 2);
      }
    }
}

// ---- finalize --------------------------------------------------------------------------------
// Block per token: residual += Σ_k w_k · y[pos(t, k)] over k = 0..K-1 in order (deterministic),
// one BF16 rounding.
__global__ void bf16_mxfp4w_moe_grouped_finalize(MoeGroupedParams p) {
  dev::pdl_wait();  // y from down
  dev::pdl_launch_dependents();
  const int64_t t = blockIdx.x;
  int pos[kMoeMaxK];
  float w[kMoeMaxK];
#pragma unroll
  for (int k = 0; k < kMoeMaxK; ++k) {
    pos[k] = k < p.K ? p.pos_of_pair[t * p.K + k] : -1;
    w[k] = k < p.K ? p.weights[t * p.K + k] : 0.0f;
  }
  __nv_bfloat16* res = static_cast<__nv_bfloat16*>(p.residual) + t * p.D;
  for (int d = 8 * threadIdx.x; d < p.D; d += 8 * blockDim.x) {
    float sum[8] = {};
#pragma unroll
    for (int k = 0; k < kMoeMaxK; ++k) {
      if (pos[k] < 0) continue;
      const float4* yr = reinterpret_cast<const float4*>(p.y + int64_t(pos[k]) * p.D + d);
      const float4 a = yr[0], b = yr[1];
      const float yv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) sum[i] += w[k] * yv[i];
    }
    float r[8];
    uint4 rv = *reinterpret_cast<const uint4*>(res + d);
    dev::unpack_bf16x8(rv, r);
    __nv_bfloat162 o[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) o[i] = __floats2bfloat162_rn(r[2 * i] + sum[2 * i], r[2 * i + 1] + sum[2 * i + 1]);
    *reinterpret_cast<uint4*>(res + d) = *reinterpret_cast<const uint4*>(o);
  }
}

}  // namespace

int moe_grouped_max_tiles(int64_t T, int K, int E, int tile_m) {
  const int64_t P = T * K;
  return int((P + tile_m - 1) / tile_m + (P < E ? P : E));
}

size_t moe_grouped_smem_bytes(int tile_m, int D, int F) {
  const int G = (D > F ? D : F) / 32;
  return tile_m == kGroupedTallTileM    ? Shape<8>::smem_bytes(G)
         : tile_m == kGroupedShortTileM ? moe_thin_smem_bytes(D, F)
                                        : Shape<4>::smem_bytes(G);
}

namespace {
template <typename L>
cudaError_t launch_gemms(const MoeGroupedParams& p, cudaStream_t s) {
  static_assert(kBN == 128, "launch_grouped_gemms: 128 output rows per block");
  return launch_grouped_gemms(bf16_mxfp4w_moe_grouped_gemm<true, L>, bf16_mxfp4w_moe_grouped_gemm<false, L>,
                              L::kThreads, int(L::smem_bytes((p.D > p.F ? p.D : p.F) / 32)), p, s);
}
}  // namespace

cudaError_t run_bf16_mxfp4w_moe_grouped(const MoeGroupedParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  using heuristics::MoeGroupedGemm;
  const bool tile_ok = p.gemm == MoeGroupedGemm::kThin ? p.tile_m == kGroupedShortTileM
                       : p.gemm == MoeGroupedGemm::kFp8 ? p.tile_m == kGroupedTileM
                                                        : p.tile_m == kGroupedTileM || p.tile_m == kGroupedTallTileM;
  if (!tile_ok || (p.gemm == MoeGroupedGemm::kWgmma) != (p.xp != nullptr)) return cudaErrorInvalidValue;
  if (const cudaError_t e = launch_pdl(bf16_mxfp4w_moe_grouped_route, dim3(1), dim3(kRouteThreads), 0, s, p);
      e != cudaSuccess)
    return e;
  cudaError_t err = cudaErrorInvalidValue;
  switch (p.gemm) {
    case MoeGroupedGemm::kThin: err = run_bf16_mxfp4w_moe_thin_gemms(p, s); break;
    case MoeGroupedGemm::kMmaSync:
      err = p.tile_m == kGroupedTallTileM ? launch_gemms<Shape<8>>(p, s) : launch_gemms<Shape<4>>(p, s);
      break;
    case MoeGroupedGemm::kWgmma: err = run_sm90_bf16_mxfp4w_moe_grouped_gemms(p, s); break;
    case MoeGroupedGemm::kFp8: err = run_e4m3_mxfp4w_moe_grouped_gemms(p, s); break;
  }
  if (err != cudaSuccess) return err;
  const int threads = (p.D / 8 + 31) / 32 * 32;
  return launch_pdl(bf16_mxfp4w_moe_grouped_finalize, dim3(unsigned(p.T)), dim3(threads < 512 ? threads : 512), 0, s, p);
}

}  // namespace mx::cuda::kern
