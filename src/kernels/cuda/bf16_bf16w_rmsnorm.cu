// bf16_bf16w_rmsnorm: y = bf16((x * rsqrt(mean(x^2) + eps)) * w), FP32 inside, one block per
// token; the output may alias x (each thread rewrites only what it read, after the reduction).
// Rows of up to kThreads * kMaxWords 16-byte words (bf16 weight, 16-byte aligned rows) keep their
// words in registers between the reduction and the scaling: one load round trip per row instead of
// a chain of 2-byte loads.
// Launched as a programmatic dependent (it waits before its first read). With a bias, block t
// also writes row t of the following GEMM's bias pre-pass (one launch less per cuBLASLt linear
// with an input norm).
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxWords = 8;  // words of 8 values per thread: rows of up to 8192 values

__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[kThreads / 32];
  v = dev::warp_sum(v);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
  return total;
}

// Row blockIdx.x of p.bias_out = p.bias: 8 values per 16-byte load where the rows allow it.
__device__ __forceinline__ void broadcast_bias_row(const RmsNormParams& p) {
  if (!p.bias) return;
  const int64_t n = p.bias_n, t = blockIdx.x;
  const auto* b = static_cast<const __nv_bfloat16*>(p.bias);
  const uintptr_t row = reinterpret_cast<uintptr_t>(p.bias_out) + uintptr_t(t * n * (p.bias_out_f32 ? 4 : 2));
  if (n % 8 == 0 && reinterpret_cast<uintptr_t>(b) % 16 == 0 && row % 16 == 0) {
    for (int64_t c = threadIdx.x; c < n / 8; c += kThreads) {
      const uint4 v = reinterpret_cast<const uint4*>(b)[c];
      if (p.bias_out_f32) {
        float f[8];
        dev::unpack_bf16x8(v, f);
        reinterpret_cast<float4*>(row)[2 * c] = make_float4(f[0], f[1], f[2], f[3]);
        reinterpret_cast<float4*>(row)[2 * c + 1] = make_float4(f[4], f[5], f[6], f[7]);
      } else {
        reinterpret_cast<uint4*>(row)[c] = v;
      }
    }
    return;
  }
  for (int64_t c = threadIdx.x; c < n; c += kThreads) {
    if (p.bias_out_f32)
      reinterpret_cast<float*>(row)[c] = __bfloat162float(b[c]);
    else
      reinterpret_cast<__nv_bfloat16*>(row)[c] = b[c];
  }
}

__global__ void __launch_bounds__(kThreads) bf16_bf16w_rmsnorm_rows(const RmsNormParams p) {
  const uint4* x = static_cast<const uint4*>(p.x);
  const uint4* weight = static_cast<const uint4*>(p.weight);
  uint4* out = static_cast<uint4*>(p.out);
  const int words = int(p.D / 8);
  const float eps = p.eps;
  dev::pdl_wait();
  dev::pdl_launch_dependents();
  const uint4* xr = x + int64_t(blockIdx.x) * words;
  uint4 v[kMaxWords];
#pragma unroll
  for (int i = 0; i < kMaxWords; ++i) {
    const int w = int(threadIdx.x) + i * kThreads;
    v[i] = w < words ? xr[w] : make_uint4(0, 0, 0, 0);
  }
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxWords; ++i) {
    float f[8];
    dev::unpack_bf16x8(v[i], f);
#pragma unroll
    for (int j = 0; j < 8; ++j) ss = fmaf(f[j], f[j], ss);
  }
  const float r = 1.0f / sqrtf(block_sum(ss) / float(8 * words) + eps);
  uint4* orow = out + int64_t(blockIdx.x) * words;
#pragma unroll
  for (int i = 0; i < kMaxWords; ++i) {
    const int w = int(threadIdx.x) + i * kThreads;
    if (w >= words) break;
    float f[8], g[8];
    dev::unpack_bf16x8(v[i], f);
    dev::unpack_bf16x8(weight[w], g);
#pragma unroll
    for (int j = 0; j < 8; ++j) f[j] = (f[j] * r) * g[j];
    orow[w] = dev::pack_bf16x8(f);
  }
  broadcast_bias_row(p);
}

// Any width, bf16 or f32 weight: one value per thread and step.
__global__ void __launch_bounds__(kThreads) bf16_bf16w_rmsnorm(const RmsNormParams p) {
  const auto* x = static_cast<const __nv_bfloat16*>(p.x);
  const void* weight = p.weight;
  const bool weight_f32 = p.weight_f32;
  auto* out = static_cast<__nv_bfloat16*>(p.out);
  const int64_t D = p.D;
  const float eps = p.eps;
  dev::pdl_wait();
  dev::pdl_launch_dependents();
  const __nv_bfloat16* xr = x + int64_t(blockIdx.x) * D;
  __nv_bfloat16* orow = out + int64_t(blockIdx.x) * D;
  float ss = 0.0f;
  for (int64_t d = threadIdx.x; d < D; d += kThreads) {
    const float v = __bfloat162float(xr[d]);
    ss = fmaf(v, v, ss);
  }
  const float r = 1.0f / sqrtf(block_sum(ss) / float(D) + eps);
  for (int64_t d = threadIdx.x; d < D; d += kThreads) {
    const float w = weight_f32 ? static_cast<const float*>(weight)[d]
                               : __bfloat162float(static_cast<const __nv_bfloat16*>(weight)[d]);
    orow[d] = __float2bfloat16((__bfloat162float(xr[d]) * r) * w);
  }
  broadcast_bias_row(p);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

cudaError_t run_bf16_bf16w_rmsnorm(const RmsNormParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  const bool rows = !p.weight_f32 && p.D % 8 == 0 && p.D / 8 <= int64_t(kThreads) * kMaxWords && aligned16(p.x) &&
                    aligned16(p.weight) && aligned16(p.out);
  return launch_pdl(rows ? bf16_bf16w_rmsnorm_rows : bf16_bf16w_rmsnorm, dim3(unsigned(p.T)), dim3(kThreads), 0, s, p);
}

}  // namespace mx::cuda::kern
