// bf16_bf16w_gemm helpers: the bias pre-pass of the cuBLASLt GEMM path (out = bias, or
// out += bias, before a GEMM with beta = 1). The GEMM itself is cuBLASLt, set up in launch_dense.cpp.
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

__global__ void bias_broadcast(void* out, bool out_f32, const __nv_bfloat16* bias, bool accumulate, int64_t T,
                               int64_t N) {
  dev::pdl_wait();  // out may be what the kernel before writes (the residual stream)
  dev::pdl_launch_dependents();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= T * N) return;
  const float b = bias ? __bfloat162float(bias[i % N]) : 0.0f;
  if (out_f32) {
    float& o = static_cast<float*>(out)[i];
    o = accumulate ? o + b : b;
  } else {
    __nv_bfloat16& o = static_cast<__nv_bfloat16*>(out)[i];
    o = __float2bfloat16(accumulate ? __bfloat162float(o) + b : b);
  }
}

}  // namespace

cudaError_t run_bias_broadcast(void* out, bool out_f32, const void* bias, bool accumulate, int64_t T, int64_t N,
                               cudaStream_t s) {
  const int64_t n = T * N;
  if (n == 0) return cudaSuccess;
  return launch_pdl(bias_broadcast, dim3(unsigned((n + 255) / 256)), dim3(256), 0, s, out, out_f32,
                    static_cast<const __nv_bfloat16*>(bias), accumulate, T, N);
}

}  // namespace mx::cuda::kern
