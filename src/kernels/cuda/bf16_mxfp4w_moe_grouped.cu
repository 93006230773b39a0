// bf16_mxfp4w_moe_grouped: the MoE experts for many tokens (prefill), no host synchronisation.
// A one-block counting sort groups the T·K (token, slot) pairs by expert and lists GEMM tiles of
// up to 64 pairs of one expert; two grouped GEMMs (BF16 mma.sync, FP32 accumulate) read each
// MXFP4 weight tile once per tile of pairs and decode it to BF16 in shared memory; gate_up fuses
// bias + clamped SwiGLU, down fuses bias; finalize sums each token's K rows in slot order into
// the residual. Runs on sm_80 and later (cp.async, ldmatrix, mma.sync m16n8k16). The FP8
// activation mode (expand + quantize, FP8 GEMMs) is e4m3_mxfp4w_moe_grouped.cu, between the same
// routing and finalize.
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

constexpr int kBM = kGroupedTileM;  // rows (pairs) per tile
constexpr int kBN = 128;            // output features per block
constexpr int kBK = 64;             // reduction elements per stage: two MXFP4 blocks per weight row
constexpr int kLds = kBK + 8;       // shared row pitch in bf16 (144 bytes: conflict-free ldmatrix)
constexpr int kThreads = 256;       // 8 warps, 2 (M) x 4 (N), 32 x 32 outputs each
constexpr int kStageElems = (kBM + kBN) * kLds;
constexpr int kRouteThreads = 1024;
static_assert(kBM == 64 && kThreads == 2 * kBN && kBK == 64, "loaders below assume these shapes");

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  __nv_bfloat162 r = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<uint32_t*>(&r);
}

// ---- MXFP4 -> BF16 ---------------------------------------------------------------------------
// One 32-element MXFP4 block (16 bytes, E8M0 scale) -> 16 BF16 pairs in element order, exactly.
// Each E2M1 code s.e1e0.m is moved to BF16 bits 15 and 8..6, where it reads as value * 2^-126
// (0.5 becomes a BF16 subnormal); multiplying by 2^(scale - 1) (and, for scales above 128, once
// more) is a power-of-two scaling, hence exact, and gives value * 2^(scale - 127).
__device__ __forceinline__ void decode_block_bf16(const uint4& raw, uint32_t scale, uint32_t (&out)[16]) {
  const uint32_t f1 = scale <= 128 ? scale + 126 : 254u;  // exponent field of 2^(scale-1), or 2^127
  const uint32_t m1 = (f1 << 7) | (f1 << 23);
  const uint32_t f2 = scale - 1;                           // 2^(scale-128), used when scale > 128
  const uint32_t m2 = (f2 << 7) | (f2 << 23);
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t q = words[i], qs = q >> 4;
    // byte b of q holds elements 2b (low nibble) and 2b+1 (high nibble): low nibble of byte b of
    // q into bits 0..3, low nibble of byte b of q>>4 (= the high nibble) into bits 16..19.
    const uint32_t sel[4] = {0x4400u, 0x5511u, 0x6622u, 0x7733u};
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const uint32_t t = __byte_perm(q, qs, sel[b]);
      const uint32_t u = t << 6;
      uint32_t r = (u & 0x01c001c0u) | ((u << 6) & 0x80008000u);
      r = bf16x2_mul(r, m1);
      if (scale > 128) r = bf16x2_mul(r, m2);
      out[4 * i + b] = r;
    }
  }
}

// ---- routing ---------------------------------------------------------------------------------
// One block: per-expert counts, offsets and the tile list, then each pair's sorted position. The
// order of pairs inside an expert depends on atomics, but every GEMM row is computed from its own
// inputs only, so the results do not.
__global__ void __launch_bounds__(kRouteThreads) bf16_mxfp4w_moe_grouped_route(MoeGroupedParams p) {
  __shared__ int count[kGroupedMaxExperts];
  __shared__ int base[kGroupedMaxExperts];
  __shared__ int first_tile[kGroupedMaxExperts];
  const int P = int(p.T) * p.K;
  for (int e = threadIdx.x; e < p.E; e += blockDim.x) count[e] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < P; i += blockDim.x) {
    const int e = p.ids[i];
    if (e >= 0 && e < p.E) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int pos = 0, tile = 0;
    for (int e = 0; e < p.E; ++e) {
      base[e] = pos;
      first_tile[e] = tile;
      pos += count[e];
      tile += (count[e] + kBM - 1) / kBM;
    }
    *p.num_tiles = tile;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < p.E; e += blockDim.x) {
    const int n = count[e];
    for (int m = 0; m * kBM < n; ++m)
      p.tiles[first_tile[e] + m] = make_int4(e, base[e] + m * kBM, min(kBM, n - m * kBM), 0);
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
// Block (n-tile, pair tile): out rows = the tile's pairs, out columns n0..n0+127 of the expert's
// matrix (gate_up: 2F interleaved gate/up rows; down: D rows). A rows are gathered (gate_up: x of
// each pair's token; down: act in sorted order) by cp.async; B is loaded to registers one stage
// ahead, decoded and stored as BF16; two shared stages.
template <bool kGateUp>
__global__ void __launch_bounds__(kThreads, 2) bf16_mxfp4w_moe_grouped_gemm(MoeGroupedParams p) {
  if (int(blockIdx.y) >= *p.num_tiles) return;
  const int4 tile = p.tiles[blockIdx.y];
  const int e = tile.x, row0 = tile.y, rows = tile.z;
  const int N = kGateUp ? 2 * p.F : p.D;
  const int Kd = kGateUp ? p.D : p.F;
  const int G = Kd / 32;
  const int n0 = blockIdx.x * kBN;
  const uint8_t* wblocks = (kGateUp ? p.gu_blocks : p.dn_blocks) + int64_t(e) * N * G * 16;
  const uint8_t* wscales = (kGateUp ? p.gu_scales : p.dn_scales) + int64_t(e) * N * G;

  extern __shared__ uint4 smem_u4[];
  __nv_bfloat16* smem = reinterpret_cast<__nv_bfloat16*>(smem_u4);
  const int tid = threadIdx.x;

  // A: 64 rows x 64 elements per stage = 512 chunks of 16 bytes, two per thread.
  const __nv_bfloat16* a_src[2];
  int a_off[2], a_col[2];
  bool a_ok[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int c = tid + i * kThreads, r = c / 8;
    a_col[i] = (c % 8) * 8;
    a_off[i] = r * kLds + a_col[i];
    a_ok[i] = r < rows;
    const int rr = a_ok[i] ? r : 0;
    if constexpr (kGateUp) {
      const int token = p.pair_at[row0 + rr] / p.K;
      a_src[i] = static_cast<const __nv_bfloat16*>(p.x) + int64_t(token) * p.D;
    } else {
      a_src[i] = static_cast<const __nv_bfloat16*>(p.act) + int64_t(row0 + rr) * p.F;
    }
  }
  // B: weight row n0 + tid/2, MXFP4 block 2·kt + tid%2 of the stage.
  const int b_row = tid >> 1, b_half = tid & 1;
  const bool b_row_ok = n0 + b_row < N;
  const uint4* b_src = reinterpret_cast<const uint4*>(wblocks) + int64_t(b_row_ok ? n0 + b_row : 0) * G;
  const uint8_t* s_src = wscales + int64_t(b_row_ok ? n0 + b_row : 0) * G;

  auto load_a = [&](int stage, int kt) {
    __nv_bfloat16* As = smem + stage * kStageElems;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int col = kt * kBK + a_col[i];
      const bool ok = a_ok[i] && col < Kd;
      dev::cp_async16(As + a_off[i], ok ? a_src[i] + col : a_src[i], ok);
    }
  };
  auto load_b = [&](int kt, uint4& raw, uint32_t& sc) {
    const int g = 2 * kt + b_half;
    const bool ok = b_row_ok && g < G;
    raw = ok ? __ldg(b_src + g) : make_uint4(0, 0, 0, 0);
    sc = ok ? uint32_t(__ldg(s_src + g)) : 127u;
  };
  auto store_b = [&](int stage, const uint4& raw, uint32_t sc) {
    uint32_t v[16];
    decode_block_bf16(raw, sc, v);
    uint4* dst = reinterpret_cast<uint4*>(smem + stage * kStageElems + (kBM + b_row) * kLds + b_half * 32);
#pragma unroll
    for (int i = 0; i < 4; ++i) dst[i] = make_uint4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
  };

  const int warp = tid / 32, lane = tid % 32, wm = warp / 4, wn = warp % 4;
  const bool mf_ok[2] = {wm * 32 < rows, wm * 32 + 16 < rows};  // warp-uniform: skip empty row groups
  float acc[2][4][4] = {};
  auto compute = [&](int stage) {
    const __nv_bfloat16* As = smem + stage * kStageElems;
    const __nv_bfloat16* Bs = As + kBM * kLds;
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) {
      uint32_t a[2][4], b[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
        if (mf_ok[mi]) dev::ldmatrix_x4(a[mi], As + (wm * 32 + mi * 16 + lane % 16) * kLds + ks * 16 + (lane / 16) * 8);
#pragma unroll
      for (int nj = 0; nj < 2; ++nj)
        dev::ldmatrix_x4(b[nj], Bs + (wn * 32 + nj * 16 + (lane / 16) * 8 + lane % 8) * kLds + ks * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        if (!mf_ok[mi]) continue;
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
          dev::mma_bf16_16816(acc[mi][ni], a[mi], b[ni / 2][2 * (ni % 2)], b[ni / 2][2 * (ni % 2) + 1]);
      }
    }
  };

  const int KT = (G + 1) / 2;
  uint4 raw;
  uint32_t sc;
  load_a(0, 0);
  dev::cp_async_commit();
  load_b(0, raw, sc);
  store_b(0, raw, sc);
  dev::cp_async_wait_all();
  __syncthreads();
  for (int kt = 0; kt < KT; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < KT;
    if (more) {  // stage cur^1 was last read before the previous iteration's barrier
      load_a(cur ^ 1, kt + 1);
      dev::cp_async_commit();
      load_b(kt + 1, raw, sc);
    }
    compute(cur);
    if (more) store_b(cur ^ 1, raw, sc);
    dev::cp_async_wait_all();
    __syncthreads();
  }

  // Epilogue: fragment (mi, ni) holds rows g, g+8 and columns 2c, 2c+1 of its 16x8 tile; the
  // column pair is (gate 2j, up 2j+1) in gate_up.
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = wm * 32 + mi * 16 + half * 8 + g;
      if (r >= rows) continue;
      const int64_t pos = row0 + r;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int n = n0 + wn * 32 + ni * 8 + 2 * c;
        if (n >= N) continue;
        const float v0 = acc[mi][ni][2 * half], v1 = acc[mi][ni][2 * half + 1];
        if constexpr (kGateUp) {
          const __nv_bfloat16* bias = static_cast<const __nv_bfloat16*>(p.gu_bias) + int64_t(e) * N;
          float gate = v0 + __bfloat162float(bias[n]);
          float up = v1 + __bfloat162float(bias[n + 1]);
          gate = fminf(gate, p.limit);               // gate: upper clamp only
          up = fminf(fmaxf(up, -p.limit), p.limit);  // up: both sides
          const float out = gate / (1.0f + expf(-p.alpha * gate)) * (up + 1.0f);  // g·σ(αg)·(u+1)
          static_cast<__nv_bfloat16*>(p.act)[pos * p.F + n / 2] = __float2bfloat16(out);
        } else {
          const __nv_bfloat16* bias = static_cast<const __nv_bfloat16*>(p.dn_bias) + int64_t(e) * N;
          *reinterpret_cast<float2*>(p.y + pos * p.D + n) =
              make_float2(v0 + __bfloat162float(bias[n]), v1 + __bfloat162float(bias[n + 1]));
        }
      }
    }
}

// ---- finalize --------------------------------------------------------------------------------
// Block per token: residual += Σ_k w_k · y[pos(t, k)] over k = 0..K-1 in order (deterministic),
// one BF16 rounding.
__global__ void bf16_mxfp4w_moe_grouped_finalize(MoeGroupedParams p) {
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

int moe_grouped_max_tiles(int64_t T, int K, int E) {
  const int64_t P = T * K;
  return int((P + kBM - 1) / kBM + (P < E ? P : E));
}

size_t moe_grouped_smem_bytes() { return size_t(2) * kStageElems * sizeof(__nv_bfloat16); }

cudaError_t run_bf16_mxfp4w_moe_grouped(const MoeGroupedParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  bf16_mxfp4w_moe_grouped_route<<<1, kRouteThreads, 0, s>>>(p);
  if (p.fp8) {
    const cudaError_t err = run_e4m3_mxfp4w_moe_grouped_gemms(p, s);
    if (err != cudaSuccess) return err;
  } else {
    const int smem = int(moe_grouped_smem_bytes());
    cudaError_t err = cudaFuncSetAttribute(bf16_mxfp4w_moe_grouped_gemm<true>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err == cudaSuccess)
      err = cudaFuncSetAttribute(bf16_mxfp4w_moe_grouped_gemm<false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 smem);
    if (err != cudaSuccess) return err;
    const dim3 grid_gu(unsigned((2 * p.F + kBN - 1) / kBN), unsigned(p.max_tiles));
    bf16_mxfp4w_moe_grouped_gemm<true><<<grid_gu, kThreads, smem, s>>>(p);
    const dim3 grid_dn(unsigned((p.D + kBN - 1) / kBN), unsigned(p.max_tiles));
    bf16_mxfp4w_moe_grouped_gemm<false><<<grid_dn, kThreads, smem, s>>>(p);
  }
  const int threads = (p.D / 8 + 31) / 32 * 32;
  bf16_mxfp4w_moe_grouped_finalize<<<unsigned(p.T), threads < 512 ? threads : 512, 0, s>>>(p);
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
