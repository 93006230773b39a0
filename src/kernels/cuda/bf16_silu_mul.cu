// bf16_silu_mul: out = bf16(silu(gate) · up) over the two halves of each gate_up row (ops::silu_mul),
// FP32 inside, one BF16 rounding. Memory-bound: a thread per 8 outputs (two 16-byte loads, one
// 16-byte store) when the row allows it, else a thread per output.
#include "kernels/cuda/bf16_silu_mul.h"
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

constexpr int kThreads = 256;

// silu(g)·u in FP32; for g < -88 exp(-g) is inf and the result a signed zero (no NaN).
__device__ __forceinline__ float silu_mul1(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// Vector i of the (T, I/8) output: row t = i / Iv reads gate vector c and up vector Iv + c of its
// (T, 2·Iv) gate_up row.
__global__ void __launch_bounds__(kThreads) bf16_silu_mul_x8(const uint4* __restrict__ gate_up,
                                                             uint4* __restrict__ out, int64_t n, int64_t Iv) {
  const int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  if (i >= n) return;
  const int64_t t = i / Iv, c = i - t * Iv;
  const uint4* row = gate_up + t * 2 * Iv;
  float g[8], u[8];
  dev::unpack_bf16x8(__ldg(row + c), g);
  dev::unpack_bf16x8(__ldg(row + Iv + c), u);
#pragma unroll
  for (int k = 0; k < 8; ++k) g[k] = silu_mul1(g[k], u[k]);
  out[i] = dev::pack_bf16x8(g);
}

__global__ void __launch_bounds__(kThreads) bf16_silu_mul_x1(const __nv_bfloat16* __restrict__ gate_up,
                                                             __nv_bfloat16* __restrict__ out, int64_t n, int64_t I) {
  const int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  if (i >= n) return;
  const int64_t t = i / I, c = i - t * I;
  const __nv_bfloat16* row = gate_up + t * 2 * I;
  out[i] = __float2bfloat16_rn(silu_mul1(__bfloat162float(row[c]), __bfloat162float(row[I + c])));
}

}  // namespace

cudaError_t run_bf16_silu_mul(const SiluMulParams& p, cudaStream_t s) {
  if (p.T == 0 || p.I == 0) return cudaSuccess;
  const bool vec = p.I % 8 == 0 && reinterpret_cast<uintptr_t>(p.gate_up) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(p.out) % 16 == 0;
  const int64_t n = vec ? p.T * (p.I / 8) : p.T * p.I;  // threads, one output vector or element each
  const unsigned blocks = unsigned((n + kThreads - 1) / kThreads);
  if (vec)
    bf16_silu_mul_x8<<<blocks, kThreads, 0, s>>>(static_cast<const uint4*>(p.gate_up), static_cast<uint4*>(p.out),
                                                  n, p.I / 8);
  else
    bf16_silu_mul_x1<<<blocks, kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(p.gate_up),
                                                  static_cast<__nv_bfloat16*>(p.out), n, p.I);
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
