// bf16_mxfp4w_gemv: the decode GEMV of bf16_bf16w_gemv.cu for dense weights stored in MXFP4
// (--mxfp4-layers): out (T, N) (=|+=) x' (T, Kin) . W (N, Kin)^T + bias for T <= kGemvMaxTokens,
// with the same fused input RMSNorm and qkv epilogue (gemv_common.cuh). W is (N, Kin/32) blocks of
// 16 bytes (32 E2M1 codes) with one E8M0 scale byte each, 4.25 bits per weight instead of 16.
//
// A warp owns kRows output rows; each lane takes one 16-byte block per row at a time, kUnroll
// blocks per row in flight (128 blocks: a whole gpt-oss row, Kin <= 4096, in one round trip).
// Each 32-bit word of a block (8 codes) is decoded in registers to FP16 E2M1 * 2^-14 (the MoE
// GEMVs' byte placement, cuda_common.cuh mxfp4_word_to_f32), widened to FP32 and multiplied with the
// 8 matching inputs of every token; a block's partial sums are scaled by its 2^(s-127) once.
// FP32 accumulation, one rounding at the store, as the BF16 GEMV. ~3.7 instructions per weight at
// T = 1 (+1.6 per further token): decode batches of 2 and more tokens take the tensor-core twin,
// bf16_mxfp4w_gemv_mma.cu (the choice is launch_dense.cpp's).
#include "kernels/cuda/gemv_common.cuh"

namespace mx::cuda::kern {
namespace {

using namespace gemv;

constexpr int kUnroll = 4;  // 16-byte blocks per row in flight per lane

template <int T, InNorm kNorm, Epilogue kEpi>
__global__ void __launch_bounds__(kThreads)
    bf16_mxfp4w_gemv(const uint4* __restrict__ x, const uint4* __restrict__ blocks, const uint8_t* __restrict__ scales,
                     const __nv_bfloat16* __restrict__ bias, const uint4* __restrict__ norm_w, float eps, void* out,
                     bool out_f32, bool accumulate, int64_t N, int64_t G, const RopeCacheParams rope) {
  extern __shared__ uint4 smem[];  // with kNorm: x' (T, kv), then the norm weight (kv)
  const int64_t kv = 4 * G;         // 16-byte words of x per token
  const int lane = threadIdx.x % 32;
  const int64_t pair = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  int64_t rows[kRows];
  const int rot_i = rows_of_pair<kEpi>(pair, rope, rows);
  const bool active = rows[0] < N;  // with kNorm every warp takes part in staging
  if (kNorm == InNorm::No && !active) return;
  int64_t wrow[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) wrow[r] = rows[r] < N ? rows[r] : (active ? rows[0] : 0);

  // Weights stream from the start (they do not depend on the previous kernel), x after pdl_wait.
  uint4 wv[kUnroll][kRows];
  uint32_t sv[kUnroll][kRows];
  auto load_w = [&](int64_t g0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int64_t g = g0 + 32 * u;
        wv[u][r] = g < G ? __ldcs(blocks + wrow[r] * G + g) : make_uint4(0, 0, 0, 0);
        sv[u][r] = g < G ? __ldcs(scales + wrow[r] * G + g) : 0u;
      }
  };
  if (active) load_w(lane);
  const uint4* xsrc = input_after_wait<T, kNorm>(x, norm_w, smem, kv, eps);
  if (!active) return;
  float acc[T][kRows] = {};
  for (int64_t g0 = lane; g0 < G; g0 += 32 * kUnroll) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t g = g0 + 32 * u;
      if (g >= G) break;
      float part[T][kRows] = {};
      const uint32_t wq[kRows][4] = {{wv[u][0].x, wv[u][0].y, wv[u][0].z, wv[u][0].w},
                                     {wv[u][1].x, wv[u][1].y, wv[u][1].z, wv[u][1].w}};
#pragma unroll
      for (int j = 0; j < 4; ++j) {  // word j of the block: inputs 32g + 8j .. + 7
        float wf[kRows][8];
#pragma unroll
        for (int r = 0; r < kRows; ++r) dev::mxfp4_word_to_f32(wq[r][j], wf[r]);
#pragma unroll
        for (int t = 0; t < T; ++t) {
          const uint4 xw = kNorm == InNorm::RmsNorm ? xsrc[t * kv + 4 * g + j] : __ldg(xsrc + t * kv + 4 * g + j);
          float xf[8];
          dev::unpack_bf16x8(xw, xf);
#pragma unroll
          for (int r = 0; r < kRows; ++r)
#pragma unroll
            for (int i = 0; i < 8; ++i) part[t][r] = fmaf(xf[i], wf[r][i], part[t][r]);
        }
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float scale = __uint_as_float(sv[u][r] << 23);  // 2^(s-127); s >= 1 (quantize_mxfp4_block)
#pragma unroll
        for (int t = 0; t < T; ++t) acc[t][r] = fmaf(part[t][r], scale, acc[t][r]);
      }
    }
    if (g0 + 32 * kUnroll < G) load_w(g0 + 32 * kUnroll);
  }
#pragma unroll
  for (int t = 0; t < T; ++t) {
    float y[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r)  // 2^14 undoes the FP16 placement of the codes
      y[r] = dev::warp_sum(acc[t][r]) * 16384.0f + (bias && rows[r] < N ? __bfloat162float(bias[rows[r]]) : 0.0f);
    if (lane == 0) store_token<kEpi>(rope, t, rows, rot_i, y, out, out_f32, accumulate, N);
  }
}

template <int T, InNorm kNorm, Epilogue kEpi>
cudaError_t launch(const GemvParams& p, cudaStream_t s) {
  const int64_t warps = (p.N + kRows - 1) / kRows;
  const size_t smem = gemv_smem_bytes(p.T, p.Kin, p.norm_weight != nullptr);
  return launch_pdl(bf16_mxfp4w_gemv<T, kNorm, kEpi>, dim3(unsigned((warps + kWarps - 1) / kWarps)), dim3(kThreads),
                    smem, s, static_cast<const uint4*>(p.x), static_cast<const uint4*>(p.w),
                    static_cast<const uint8_t*>(p.w_scales), static_cast<const __nv_bfloat16*>(p.bias),
                    static_cast<const uint4*>(p.norm_weight), p.norm_eps, p.out, p.out_f32, p.accumulate, p.N,
                    p.Kin / 32, p.rope);
}

}  // namespace

// Requires Kin % 32 == 0, 16-byte aligned x, w (and norm weight), w_scales set, gemv_smem_bytes <=
// kGemvMaxSmem; the qkv epilogue as run_bf16_bf16w_gemv (checked by the launcher).
cudaError_t run_bf16_mxfp4w_gemv(const GemvParams& p, cudaStream_t s) {
  if (!p.w_scales || p.Kin % 32 != 0 || bad_rope_cache(p, 2)) return cudaErrorInvalidValue;
  return launch_instance<kGemvMaxTokens>(
      p, [&]<int T, InNorm kNorm, Epilogue kEpi>() { return launch<T, kNorm, kEpi>(p, s); });
}

}  // namespace mx::cuda::kern
