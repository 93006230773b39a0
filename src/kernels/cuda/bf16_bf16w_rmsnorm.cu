// bf16_bf16w_rmsnorm: y = bf16((x * rsqrt(mean(x^2) + eps)) * w), FP32 inside, one block per
// token; the output may alias x (each thread rewrites only what it read, after the reduction).
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) bf16_bf16w_rmsnorm(const __nv_bfloat16* x, const void* weight,
                                                               bool weight_f32, __nv_bfloat16* out, int64_t D,
                                                               float eps) {
  const __nv_bfloat16* xr = x + int64_t(blockIdx.x) * D;
  __nv_bfloat16* orow = out + int64_t(blockIdx.x) * D;
  float ss = 0.0f;
  for (int64_t d = threadIdx.x; d < D; d += kThreads) {
    const float v = __bfloat162float(xr[d]);
    ss = fmaf(v, v, ss);
  }
  __shared__ float partial[kThreads / 32];
  ss = dev::warp_sum(ss);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
  const float r = 1.0f / sqrtf(total / float(D) + eps);
  for (int64_t d = threadIdx.x; d < D; d += kThreads) {
    const float w = weight_f32 ? static_cast<const float*>(weight)[d]
                               : __bfloat162float(static_cast<const __nv_bfloat16*>(weight)[d]);
    orow[d] = __float2bfloat16((__bfloat162float(xr[d]) * r) * w);
  }
}

}  // namespace

cudaError_t run_bf16_bf16w_rmsnorm(const RmsNormParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  bf16_bf16w_rmsnorm<<<unsigned(p.T), kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(p.x), p.weight,
                                                        p.weight_f32, static_cast<__nv_bfloat16*>(p.out), p.D,
                                                        p.eps);
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
