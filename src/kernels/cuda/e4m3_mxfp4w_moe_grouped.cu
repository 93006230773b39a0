// e4m3_mxfp4w_moe_grouped: the FP8 activation mode of the many-token MoE (--moe-activation fp8).
// After the routing of bf16_mxfp4w_moe_grouped.cu, the expand kernel copies each (token, slot)
// pair's x row to its expert-sorted position and quantizes it on the way (FP8 E4M3, one E8M0
// scale per 32 values, the rule of core/dtype.h mx_e4m3_scale); there is no other quantization
// pass. The grouped GEMMs decode MXFP4 to E4M3 exactly (every E2M1 value is an E4M3 value), run
// mma.sync m16n8k32 E4M3 x E4M3 with FP32 accumulation, one 32-wide K block per mma, and apply
// the two blocks' scales to each partial sum. gate_up quantizes its SwiGLU output for down in
// its epilogue. Needs sm_89 or later (FP8 mma and cvt); the launcher checks.
#include <cuda_fp8.h>

#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

constexpr int kBM = kGroupedTileM;  // rows (pairs) per tile
constexpr int kBN = 128;            // output features per block
constexpr int kBK = 128;            // reduction elements (bytes) per stage: four 32-blocks
constexpr int kKB = kBK / 32;       // scale blocks per stage
constexpr int kLdb = kBK + 16;      // shared row pitch in bytes (144: conflict-free ldmatrix)
constexpr int kThreads = 256;       // 8 warps, 2 (M) x 4 (N), 32 x 32 outputs each
constexpr int kStageBytes = (kBM + kBN) * kLdb + (kBM + kBN) * kKB;  // A, B, then their scales
static_assert(kBM == 64 && kThreads == 2 * kBN && kBK == 128, "loaders below assume these shapes");

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define MX_E4M3_MMA 1
#endif

// c (16x8 f32) = a (16x32 e4m3, row) . b (32x8 e4m3, col), c starting from zero.
__device__ __forceinline__ void mma_e4m3_16832(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#ifdef MX_E4M3_MMA
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %10, %10, %10};\n"
      : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.0f));
#else
  c[0] = c[1] = c[2] = c[3] = 0.0f;
#endif
}

// 2^(s - 127) as a float (s = 0 gives 0; no scale of a real block is that small).
__device__ __forceinline__ float e8m0_f32(uint32_t s) { return __uint_as_float(s << 23); }

// 8 E2M1 codes (element i = nibble i of q) -> 8 E4M3 bytes in element order, exactly: the
// magnitude (bits 0..2) indexes a byte table with prmt, the sign (bit 3) moves to bit 7.
__device__ __forceinline__ uint2 e2m1x8_to_e4m3(uint32_t q) {
  // E4M3 of 0, 0.5, 1, 1.5 | 2, 3, 4, 6
  constexpr uint32_t kLo = 0x3c383000u, kHi = 0x4c484440u;
  const uint32_t lo = __byte_perm(kLo, kHi, q & 0x7777u);
  const uint32_t hi = __byte_perm(kLo, kHi, (q >> 16) & 0x7777u);
  // sign of element i at bit 4i+3 -> byte i bit 7: select byte 1 (0x80) or 0 of 0x8000.
  const uint32_t sl = __byte_perm(0x8000u, 0u, (q >> 3) & 0x1111u);
  const uint32_t sh = __byte_perm(0x8000u, 0u, (q >> 19) & 0x1111u);
  return make_uint2(lo | sl, hi | sh);
}

// Quantizes 32 floats (amax given) to E4M3 codes in element order; returns the scale byte.
__device__ __forceinline__ uint32_t quantize32(const float (&v)[32], float amax, uint4& lo, uint4& hi) {
  const uint32_t u = __float_as_uint(amax) & 0x7fffffffu;
  int s = int(u >> 23) - 8 + ((u & 0x7fffffu) > 0x600000u ? 1 : 0);
  s = s < 0 ? 0 : s > 253 ? 253 : s;
  const float inv = __uint_as_float(uint32_t(254 - s) << 23);  // 2^(127 - s)
  uint32_t w[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t a = __nv_cvt_float2_to_fp8x2(make_float2(v[4 * i] * inv, v[4 * i + 1] * inv), __NV_SATFINITE,
                                                 __NV_E4M3);
    const uint32_t b = __nv_cvt_float2_to_fp8x2(make_float2(v[4 * i + 2] * inv, v[4 * i + 3] * inv),
                                                 __NV_SATFINITE, __NV_E4M3);
    w[i] = a | (b << 16);
  }
  lo = make_uint4(w[0], w[1], w[2], w[3]);
  hi = make_uint4(w[4], w[5], w[6], w[7]);
  return uint32_t(s);
}

// ---- expand ----------------------------------------------------------------------------------
// Thread per (pair, 32-block): x[token] block -> xq[pos] codes + xs[pos] scale.
__global__ void bf16_moe_expand_e4m3(MoeGroupedParams p) {
  const int G = p.D / 32;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= p.T * p.K * G) return;
  const int64_t pair = idx / G;
  const int blk = int(idx % G);
  const int pos = p.pos_of_pair[pair];
  if (pos < 0) return;
  const uint4* src = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.x) +
                                                    (pair / p.K) * p.D + blk * 32);
  float v[32], amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float f[8];
    dev::unpack_bf16x8(__ldg(src + i), f);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[8 * i + j] = f[j], amax = fmaxf(amax, fabsf(f[j]));
  }
  uint4 lo, hi;
  const uint32_t s = quantize32(v, amax, lo, hi);
  uint4* dst = reinterpret_cast<uint4*>(p.xq + int64_t(pos) * p.D + blk * 32);
  dst[0] = lo;
  dst[1] = hi;
  p.xs[int64_t(pos) * G + blk] = uint8_t(s);
}

// ---- grouped GEMM ----------------------------------------------------------------------------
// Block (n-tile, pair tile) as in the BF16 kernel, but A (pairs in sorted order, E4M3) is read
// contiguously, and a stage holds 128 K elements: A 64 x 128 bytes by cp.async, B 128 x 128
// decoded E4M3 bytes (raw MXFP4 loaded to registers one stage ahead), and both sides' scales.
template <bool kGateUp>
__global__ void __launch_bounds__(kThreads, 2) e4m3_mxfp4w_moe_grouped_gemm(MoeGroupedParams p) {
  dev::pdl_wait();  // the expanded activations (and gate_up's act rows for down)
  dev::pdl_launch_dependents();
  if (int(blockIdx.y) >= *p.num_tiles) return;
  const GroupedTile tile = tile_of<kGateUp>(p);
  const int e = tile.e, row0 = tile.row0, rows = tile.rows, N = tile.N, Kd = tile.Kd, G = tile.G;
  const int n0 = blockIdx.x * kBN;
  const uint8_t* wblocks = (kGateUp ? p.gu_blocks : p.dn_blocks) + int64_t(e) * N * G * 16;
  const uint8_t* wscales = (kGateUp ? p.gu_scales : p.dn_scales) + int64_t(e) * N * G;
  const uint8_t* aq = kGateUp ? p.xq : p.actq;
  const uint8_t* as = kGateUp ? p.xs : p.act_scales;

  extern __shared__ uint4 smem_u4[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_u4);
  const int tid = threadIdx.x;

  // A: 64 rows x 128 bytes per stage = 512 chunks of 16 bytes, two per thread.
  int a_off[2], a_col[2];
  const uint8_t* a_src[2];
  bool a_ok[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int c = tid + i * kThreads, r = c / 8;
    a_col[i] = (c % 8) * 16;
    a_off[i] = r * kLdb + a_col[i];
    a_ok[i] = r < rows;
    a_src[i] = aq + int64_t(row0 + (a_ok[i] ? r : 0)) * Kd;
  }
  // A scales: row tid/4, block tid%4 of the stage. B: weight row n0 + tid/2, blocks 2·(tid%2),
  // 2·(tid%2)+1 of the stage.
  const int as_row = tid / 4, as_blk = tid % 4;
  const uint8_t* as_src = as + int64_t(row0 + (as_row < rows ? as_row : 0)) * G;
  const int b_row = tid >> 1, b_half = tid & 1;
  const bool b_row_ok = n0 + b_row < N;
  const uint4* b_src = reinterpret_cast<const uint4*>(wblocks) + int64_t(b_row_ok ? n0 + b_row : 0) * G;
  const uint8_t* s_src = wscales + int64_t(b_row_ok ? n0 + b_row : 0) * G;

  struct Raw {
    uint4 q[2];
    uint32_t sb[2], sa;
  };
  auto load_a = [&](int stage, int kt) {
    uint8_t* As = smem + stage * kStageBytes;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int col = kt * kBK + a_col[i];
      const bool ok = a_ok[i] && col < Kd;
      dev::cp_async16(As + a_off[i], ok ? a_src[i] + col : a_src[i], ok);
    }
  };
  auto load_raw = [&](int kt, Raw& r) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int g = kt * kKB + 2 * b_half + i;
      const bool ok = b_row_ok && g < G;
      r.q[i] = ok ? __ldg(b_src + g) : make_uint4(0, 0, 0, 0);
      r.sb[i] = ok ? uint32_t(__ldg(s_src + g)) : 127u;
    }
    const int g = kt * kKB + as_blk;
    r.sa = as_row < rows && g < G ? uint32_t(as_src[g]) : 127u;
  };
  auto store_raw = [&](int stage, const Raw& r) {
    uint8_t* base = smem + stage * kStageBytes;
    uint4* dst = reinterpret_cast<uint4*>(base + (kBM + b_row) * kLdb + b_half * 64);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const uint2 a = e2m1x8_to_e4m3(r.q[i].x), b = e2m1x8_to_e4m3(r.q[i].y);
      const uint2 c = e2m1x8_to_e4m3(r.q[i].z), d = e2m1x8_to_e4m3(r.q[i].w);
      dst[2 * i] = make_uint4(a.x, a.y, b.x, b.y);
      dst[2 * i + 1] = make_uint4(c.x, c.y, d.x, d.y);
    }
    uint8_t* scales = base + (kBM + kBN) * kLdb;  // [kBM][kKB] A scales, then [kBN][kKB] B scales
    scales[as_row * kKB + as_blk] = uint8_t(r.sa);
    scales[kBM * kKB + b_row * kKB + 2 * b_half] = uint8_t(r.sb[0]);
    scales[kBM * kKB + b_row * kKB + 2 * b_half + 1] = uint8_t(r.sb[1]);
  };

  const int warp = tid / 32, lane = tid % 32, wm = warp / 4, wn = warp % 4;
  const int g8 = lane / 4, c4 = lane % 4;
  const bool mf_ok[2] = {wm * 32 < rows, wm * 32 + 16 < rows};  // warp-uniform: skip empty row groups
  float acc[2][4][4] = {};
  auto compute = [&](int stage) {
    const uint8_t* As = smem + stage * kStageBytes;
    const uint8_t* Bs = As + kBM * kLdb;
    // One word per row: the row's four block scales of the stage, block ks in byte ks.
    const uint32_t* Sw = reinterpret_cast<const uint32_t*>(As + (kBM + kBN) * kLdb);
    uint32_t sa[2][2], sb[4][2];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) sa[mi][h] = Sw[wm * 32 + mi * 16 + h * 8 + g8];
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int j = 0; j < 2; ++j) sb[ni][j] = Sw[kBM + wn * 32 + ni * 8 + 2 * c4 + j];
#pragma unroll
    for (int ks = 0; ks < kKB; ++ks) {
      uint32_t a[2][4], b[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
        if (mf_ok[mi]) dev::ldmatrix_x4(a[mi], As + (wm * 32 + mi * 16 + lane % 16) * kLdb + ks * 32 + (lane / 16) * 16);
#pragma unroll
      for (int nj = 0; nj < 2; ++nj)
        dev::ldmatrix_x4(b[nj], Bs + (wn * 32 + nj * 16 + (lane / 16) * 8 + lane % 8) * kLdb + ks * 32 +
                                    ((lane / 8) % 2) * 16);
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        if (!mf_ok[mi]) continue;
        const float fa0 = e8m0_f32((sa[mi][0] >> (8 * ks)) & 0xffu);
        const float fa1 = e8m0_f32((sa[mi][1] >> (8 * ks)) & 0xffu);
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          const float fb0 = e8m0_f32((sb[ni][0] >> (8 * ks)) & 0xffu);
          const float fb1 = e8m0_f32((sb[ni][1] >> (8 * ks)) & 0xffu);
          float t[4];
          mma_e4m3_16832(t, a[mi], b[ni / 2][2 * (ni % 2)], b[ni / 2][2 * (ni % 2) + 1]);
          acc[mi][ni][0] = fmaf(t[0] * fa0, fb0, acc[mi][ni][0]);
          acc[mi][ni][1] = fmaf(t[1] * fa0, fb1, acc[mi][ni][1]);
          acc[mi][ni][2] = fmaf(t[2] * fa1, fb0, acc[mi][ni][2]);
          acc[mi][ni][3] = fmaf(t[3] * fa1, fb1, acc[mi][ni][3]);
        }
      }
    }
  };

  const int KT = (G + kKB - 1) / kKB;
  Raw raw;
  load_a(0, 0);
  dev::cp_async_commit();
  load_raw(0, raw);
  store_raw(0, raw);
  dev::cp_async_wait_all();
  __syncthreads();
  for (int kt = 0; kt < KT; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < KT;
    if (more) {  // stage cur^1 was last read before the previous iteration's barrier
      load_a(cur ^ 1, kt + 1);
      dev::cp_async_commit();
      load_raw(kt + 1, raw);
    }
    compute(cur);
    if (more) store_raw(cur ^ 1, raw);
    dev::cp_async_wait_all();
    __syncthreads();
  }

  // Epilogue: fragment (mi, ni) holds rows g8, g8+8 and columns 2c4, 2c4+1 of its 16x8 tile.
  if constexpr (kGateUp) {
    // SwiGLU outputs of the block (64 rows x 64 act columns) through shared memory, then one
    // thread per (row, 32 columns) quantizes them for down.
    float* ep = reinterpret_cast<float*>(smem);  // [kBM][kBN/2 + 1]; the stages are dead here
    constexpr int kEp = kBN / 2 + 1;
    const __nv_bfloat16* bias = static_cast<const __nv_bfloat16*>(p.gu_bias) + int64_t(e) * N;
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = wm * 32 + mi * 16 + half * 8 + g8;
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          const int nl = wn * 32 + ni * 8 + 2 * c4, n = n0 + nl;
          if (n >= N) continue;
          float gate = acc[mi][ni][2 * half] + __bfloat162float(bias[n]);
          float up = acc[mi][ni][2 * half + 1] + __bfloat162float(bias[n + 1]);
          gate = fminf(gate, p.limit);               // gate: upper clamp only
          up = fminf(fmaxf(up, -p.limit), p.limit);  // up: both sides
          ep[r * kEp + nl / 2] = gate / (1.0f + expf(-p.alpha * gate)) * (up + 1.0f);  // g·σ(αg)·(u+1)
        }
      }
    __syncthreads();
    if (tid < kBM * 2) {
      const int r = tid / 2, j0 = (tid % 2) * 32, col = n0 / 2 + j0;  // act column of the block
      if (r < rows && col < p.F) {
        float v[32], amax = 0.0f;
#pragma unroll
        for (int i = 0; i < 32; ++i) v[i] = ep[r * kEp + j0 + i], amax = fmaxf(amax, fabsf(v[i]));
        uint4 lo, hi;
        const uint32_t s = quantize32(v, amax, lo, hi);
        const int64_t pos = row0 + r;
        uint4* dst = reinterpret_cast<uint4*>(p.actq + pos * p.F + col);
        dst[0] = lo;
        dst[1] = hi;
        p.act_scales[pos * (p.F / 32) + col / 32] = uint8_t(s);
      }
    }
  } else {
    const __nv_bfloat16* bias = static_cast<const __nv_bfloat16*>(p.dn_bias) + int64_t(e) * N;
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = wm * 32 + mi * 16 + half * 8 + g8;
        if (r >= rows) continue;
        const int64_t pos = row0 + r;
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          const int n = n0 + wn * 32 + ni * 8 + 2 * c4;
          if (n >= N) continue;
          *reinterpret_cast<float2*>(p.y + pos * p.D + n) =
              make_float2(acc[mi][ni][2 * half] + __bfloat162float(bias[n]),
                          acc[mi][ni][2 * half + 1] + __bfloat162float(bias[n + 1]));
        }
      }
  }
}

}  // namespace

size_t moe_grouped_e4m3_smem_bytes() { return size_t(2) * kStageBytes; }

cudaError_t run_e4m3_mxfp4w_moe_grouped_gemms(const MoeGroupedParams& p, cudaStream_t s) {
  // The binary's code for this device must have the FP8 mma (not an sm_80 build on a newer GPU).
  cudaFuncAttributes attr{};
  cudaError_t err = cudaFuncGetAttributes(&attr, e4m3_mxfp4w_moe_grouped_gemm<true>);
  if (err != cudaSuccess) return err;
  if (attr.binaryVersion < 89) return cudaErrorInvalidDeviceFunction;
  static_assert(kBN == 128, "launch_grouped_gemms: 128 output rows per block");
  const int64_t threads = p.T * p.K * (p.D / 32);
  bf16_moe_expand_e4m3<<<unsigned((threads + 255) / 256), 256, 0, s>>>(p);
  return launch_grouped_gemms(e4m3_mxfp4w_moe_grouped_gemm<true>, e4m3_mxfp4w_moe_grouped_gemm<false>, kThreads,
                              int(moe_grouped_e4m3_smem_bytes()), p, s);
}

}  // namespace mx::cuda::kern
