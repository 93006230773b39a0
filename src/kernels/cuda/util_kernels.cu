// Utility kernels: fill_random (grid-stride, same hash as the CPU backend), f32_argmax (one block
// per row, lowest index on ties), add_i32.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/util_kernels.h"
#include "kernels/random_hash.h"

namespace mx::cuda::kern {
namespace {

__global__ void fill_random_kernel(void* out, FillKind kind, int64_t n, uint64_t seed, float scale, float offset,
                                   int lo, int hi) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t h = random_hash(seed, uint64_t(i));
    if (kind == FillKind::U8) {
      static_cast<uint8_t*>(out)[i] = uint8_t(lo + int(h % uint64_t(hi - lo + 1)));
    } else {
      const float v = offset + scale * hash_to_signed_unit(h);
      if (kind == FillKind::BF16) static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(v);
      else static_cast<float*>(out)[i] = v;
    }
  }
}

constexpr int kArgmaxThreads = 1024;

__global__ void __launch_bounds__(kArgmaxThreads) f32_argmax_kernel(const float* logits, int32_t* ids, int64_t V) {
  const float* row = logits + blockIdx.x * V;
  float best = -INFINITY;
  int32_t best_i = INT32_MAX;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    const float x = row[v];
    if (x > best || (x == best && int32_t(v) < best_i)) best = x, best_i = int32_t(v);
  }
  for (int off = 16; off > 0; off >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, off);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, best_i, off);
    if (ob > best || (ob == best && oi < best_i)) best = ob, best_i = oi;
  }
  __shared__ float sb[32];
  __shared__ int32_t si[32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) sb[warp] = best, si[warp] = best_i;
  __syncthreads();
  if (warp == 0) {
    best = lane < blockDim.x / 32 ? sb[lane] : -INFINITY;
    best_i = lane < blockDim.x / 32 ? si[lane] : INT32_MAX;
    for (int off = 16; off > 0; off >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, off);
      const int32_t oi = __shfl_xor_sync(0xffffffffu, best_i, off);
      if (ob > best || (ob == best && oi < best_i)) best = ob, best_i = oi;
    }
    if (lane == 0) ids[blockIdx.x] = best_i == INT32_MAX ? 0 : best_i;
  }
}

__global__ void add_i32_kernel(int32_t* x, int64_t n, int32_t value) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) x[i] += value;
}

}  // namespace

cudaError_t run_fill_random(void* out, FillKind kind, int64_t n, uint64_t seed, float scale, float offset, int lo,
                            int hi, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 132 * 32);
  fill_random_kernel<<<unsigned(blocks), 256, 0, s>>>(out, kind, n, seed, scale, offset, lo, hi);
  return cudaGetLastError();
}

cudaError_t run_f32_argmax(const float* logits, int32_t* ids, int64_t R, int64_t V, cudaStream_t s) {
  if (R == 0) return cudaSuccess;
  f32_argmax_kernel<<<unsigned(R), kArgmaxThreads, 0, s>>>(logits, ids, V);
  return cudaGetLastError();
}

cudaError_t run_add_i32(int32_t* x, int64_t n, int32_t value, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  add_i32_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(x, n, value);
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
