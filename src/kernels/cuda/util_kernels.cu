// Utility kernels: fill_random (grid-stride, same hash as the CPU backend), add_i32, and the engine
// step's prologue (take_prev_tokens, apply_table_updates: counts read on the device, graph-safe).
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/util_kernels.h"
#include "kernels/random_hash.h"

namespace mx::cuda::kern {
namespace {

__global__ void fill_random(void* out, FillKind kind, int64_t n, uint64_t seed, float scale, float offset,
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

__global__ void i32_add(int32_t* x, int64_t n, int32_t value) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) x[i] += value;
}

__global__ void i32_take_prev_tokens(int32_t* tokens, const int32_t* from, const int32_t* prev, int64_t T,
                                        int64_t P) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < T && from[i] >= 0 && from[i] < P) tokens[i] = prev[from[i]];
}

__global__ void i32_apply_table_updates(int32_t* tables, int64_t rows, int64_t width, const int32_t* updates,
                                           int64_t U, const int32_t* count) {
  const int64_t u = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (u >= U || u >= count[0]) return;
  const int32_t row = updates[3 * u], index = updates[3 * u + 1];
  if (row >= 0 && row < rows && index >= 0 && index < width) tables[int64_t(row) * width + index] = updates[3 * u + 2];
}

}  // namespace

cudaError_t run_fill_random(void* out, FillKind kind, int64_t n, uint64_t seed, float scale, float offset, int lo,
                            int hi, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 132 * 32);
  fill_random<<<unsigned(blocks), 256, 0, s>>>(out, kind, n, seed, scale, offset, lo, hi);
  return cudaGetLastError();
}

cudaError_t run_take_prev_tokens(int32_t* tokens, const int32_t* from, const int32_t* prev, int64_t T, int64_t P,
                                 cudaStream_t s) {
  if (T == 0) return cudaSuccess;
  i32_take_prev_tokens<<<unsigned((T + 255) / 256), 256, 0, s>>>(tokens, from, prev, T, P);
  return cudaGetLastError();
}

cudaError_t run_apply_table_updates(int32_t* tables, int64_t rows, int64_t width, const int32_t* updates, int64_t U,
                                    const int32_t* count, cudaStream_t s) {
  if (U == 0) return cudaSuccess;
  i32_apply_table_updates<<<unsigned((U + 255) / 256), 256, 0, s>>>(tables, rows, width, updates, U, count);
  return cudaGetLastError();
}

cudaError_t run_add_i32(int32_t* x, int64_t n, int32_t value, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  i32_add<<<unsigned((n + 255) / 256), 256, 0, s>>>(x, n, value);
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
