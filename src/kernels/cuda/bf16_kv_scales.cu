// bf16_kv_scales: the FP8 KV-cache scales of one layer from one call's qkv before its RoPE
// (ops::kv_scales): K from the largest norm of a k head's rotation pair (x_i, x_{i+Dh/2}), which
// bounds every rotated element at every position, V from max |v|. Runs once per layer in an
// engine's lifetime (the first prefill), so one block walks the whole call.
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

constexpr int kThreads = 1024;

__global__ void __launch_bounds__(kThreads) bf16_kv_scales(KvScalesParams p) {
  const int half = p.Dh / 2, kv = p.Hkv * p.Dh;
  const int64_t width = int64_t(p.H + 2 * p.Hkv) * p.Dh;
  const int64_t pairs = int64_t(p.Hkv) * half, per_token = pairs + kv;
  float k_max = 0.0f, v_max = 0.0f;
  for (int64_t i = threadIdx.x; i < p.T * per_token; i += kThreads) {
    const int64_t t = i / per_token, j = i % per_token;
    const __nv_bfloat16* row = static_cast<const __nv_bfloat16*>(p.qkv) + t * width + int64_t(p.H) * p.Dh;
    if (j < pairs) {
      const int64_t h = j / half, e = j % half;
      const float x1 = __bfloat162float(row[h * p.Dh + e]), x2 = __bfloat162float(row[h * p.Dh + e + half]);
      k_max = fmaxf(k_max, sqrtf(x1 * x1 + x2 * x2));
    } else {
      v_max = fmaxf(v_max, fabsf(__bfloat162float(row[kv + (j - pairs)])));
    }
  }
  __shared__ float ks[kThreads / 32], vs[kThreads / 32];
  k_max = dev::warp_max(k_max);
  v_max = dev::warp_max(v_max);
  if (threadIdx.x % 32 == 0) ks[threadIdx.x / 32] = k_max, vs[threadIdx.x / 32] = v_max;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kThreads / 32; ++w) k_max = fmaxf(k_max, ks[w]), v_max = fmaxf(v_max, vs[w]);
  // As the CPU's kv_scales: (headroom · concentration) · amax / 448, or 1 for a zero maximum.
  const float k_amax = p.concentration * k_max;
  p.scales[0] = k_amax > 0.0f ? p.headroom * k_amax / p.fp8_max : 1.0f;
  p.scales[1] = v_max > 0.0f ? p.headroom * v_max / p.fp8_max : 1.0f;
}

}  // namespace

cudaError_t run_bf16_kv_scales(const KvScalesParams& p, cudaStream_t s) {
  bf16_kv_scales<<<1, kThreads, 0, s>>>(p);
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
