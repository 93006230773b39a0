// mxfp4_rows_to_bf16: MXFP4 rows (16-byte blocks of 32 E2M1 codes, one E8M0 scale each) -> BF16
// rows, exactly (every E2M1 value times a power of two is a BF16 value unless it leaves BF16's
// range). Serves the --mxfp4-layers paths that need BF16 rows: embed (a gather by token id) and the
// many-token linear (a chunk of weight rows for cuBLASLt). One thread per block: a 16-byte load and
// four 16-byte stores.
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

__global__ void mxfp4_rows_to_bf16(const uint4* __restrict__ blocks, const uint8_t* __restrict__ scales,
                                   const int32_t* __restrict__ rows, int64_t first, int64_t n_rows, int64_t R,
                                   int64_t G, uint4* __restrict__ out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= R * G) return;
  const int64_t r = i / G, g = i % G;
  const int64_t src = rows ? int64_t(rows[r]) : first + r;
  uint4* dst = out + (r * G + g) * 4;
  if (src < 0 || src >= n_rows) {  // outside the table (embed of a bad id): a zero row
#pragma unroll
    for (int j = 0; j < 4; ++j) dst[j] = make_uint4(0, 0, 0, 0);
    return;
  }
  const uint4 b = blocks[src * G + g];
  const float scale = __uint_as_float(uint32_t(scales[src * G + g]) << 23);  // 2^(s-127), s >= 1
  const uint32_t words[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float f[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const uint32_t code = (words[j] >> (4 * e)) & 0xfu;
      // |code| = e1 e0 m: 0.5 * m for e = 0, else 2^(e-1) * (1 + m/2).
      const uint32_t m = code & 7u, ex = m >> 1;
      const float mag = ex == 0 ? 0.5f * float(m & 1u) : __uint_as_float((126u + ex) << 23 | (m & 1u) << 22);
      f[e] = (code & 8u ? -mag : mag) * scale;
    }
    dst[j] = dev::pack_bf16x8(f);
  }
}

}  // namespace

cudaError_t run_mxfp4_rows_to_bf16(const Mxfp4RowsParams& p, cudaStream_t s) {
  const int64_t G = p.width / 32, n = p.R * G;
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  mxfp4_rows_to_bf16<<<unsigned((n + kThreads - 1) / kThreads), kThreads, 0, s>>>(
      static_cast<const uint4*>(p.blocks), static_cast<const uint8_t*>(p.scales), p.rows, p.first, p.n_rows, p.R, G,
      static_cast<uint4*>(p.out));
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
