// bf16_gather_rows: out[i] = table[rows[i]] for BF16 rows, one block per output row, 16-byte
// copies when the width allows. Serves embed (table = embedding) and gather_rows (table = x).
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

template <typename V>  // V: uint4 (8 bf16) or uint16_t (1 bf16)
__global__ void bf16_gather_rows(const V* table, const int32_t* rows, V* out, int64_t n_rows, int64_t width_v) {
  const int64_t i = blockIdx.x;
  const int32_t r = rows[i];
  V* dst = out + i * width_v;
  if (r < 0 || r >= n_rows) {  // outside the table: a zero row
    for (int64_t c = threadIdx.x; c < width_v; c += blockDim.x) dst[c] = V{};
    return;
  }
  const V* src = table + int64_t(r) * width_v;
  for (int64_t c = threadIdx.x; c < width_v; c += blockDim.x) dst[c] = src[c];
}

}  // namespace

cudaError_t run_bf16_gather_rows(const GatherRowsParams& p, cudaStream_t s) {
  if (p.R == 0) return cudaSuccess;
  const bool vec = p.width % 8 == 0 && reinterpret_cast<uintptr_t>(p.table) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(p.out) % 16 == 0;
  if (vec)
    bf16_gather_rows<<<unsigned(p.R), 128, 0, s>>>(static_cast<const uint4*>(p.table), p.rows,
                                                  static_cast<uint4*>(p.out), p.n_rows, p.width / 8);
  else
    bf16_gather_rows<<<unsigned(p.R), 256, 0, s>>>(static_cast<const uint16_t*>(p.table), p.rows,
                                                  static_cast<uint16_t*>(p.out), p.n_rows, p.width);
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
