// bf16_qkv_rope_cache: rotates the q and k heads of each token in place (RoPE, half-split, cos/sin
// of float(pos) * inv_freq times the YaRN concentration, accurate sinf/cosf) and writes the
// rotated k and the v heads into the paged cache (BF16, or E4M3 codes of value / scale with
// kv_scales). One block per token.
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxHalf = 128;  // head_dim <= 256

__global__ void __launch_bounds__(kThreads) bf16_qkv_rope_cache(RopeCacheParams p) {
  const int64_t t = blockIdx.x;
  const int half = p.Dh / 2;
  const int pos = p.positions[t];
  __shared__ float cs[kMaxHalf], sn[kMaxHalf];
  for (int i = threadIdx.x; i < half; i += kThreads) {
    const float angle = float(pos) * p.inv_freq[i];  // fp32 product, like the reference
    float s, c;
    sincosf(angle, &s, &c);
    cs[i] = c * p.concentration;
    sn[i] = s * p.concentration;
  }
  __syncthreads();

  __nv_bfloat16* row = static_cast<__nv_bfloat16*>(p.qkv) + t * int64_t(p.H + 2 * p.Hkv) * p.Dh;
  const int32_t block = p.block_tables[int64_t(p.seq_index[t]) * p.max_blocks + pos / p.block_size];
  const int64_t slot = (int64_t(block) * p.block_size + pos % p.block_size) * p.Hkv * p.Dh;  // (block, offset, 0, 0)
  const bool fp8 = p.kv_scales != nullptr;
  const float inv_k = fp8 ? __frcp_rn(p.kv_scales[0]) : 0.0f, inv_v = fp8 ? __frcp_rn(p.kv_scales[1]) : 0.0f;
  auto put = [&](void* cache, int64_t i, __nv_bfloat16 x, float inv) {
    if (fp8)
      static_cast<uint8_t*>(cache)[slot + i] = dev::kv_fp8_code(__bfloat162float(x), inv);
    else
      static_cast<__nv_bfloat16*>(cache)[slot + i] = x;
  };

  // Rotation pairs (i, i + half) of the H q heads and Hkv k heads.
  for (int j = threadIdx.x; j < (p.H + p.Hkv) * half; j += kThreads) {
    const int h = j / half, i = j % half;
    __nv_bfloat16* x = row + h * p.Dh;
    const float x1 = __bfloat162float(x[i]), x2 = __bfloat162float(x[i + half]);
    const __nv_bfloat16 y1 = __float2bfloat16(x1 * cs[i] - x2 * sn[i]);
    const __nv_bfloat16 y2 = __float2bfloat16(x2 * cs[i] + x1 * sn[i]);
    x[i] = y1;
    x[i + half] = y2;
    if (h >= p.H) {
      put(p.k_cache, (h - p.H) * p.Dh + i, y1, inv_k);
      put(p.k_cache, (h - p.H) * p.Dh + i + half, y2, inv_k);
    }
  }
  const __nv_bfloat16* v = row + (p.H + p.Hkv) * p.Dh;
  for (int j = threadIdx.x; j < p.Hkv * p.Dh; j += kThreads) put(p.v_cache, j, v[j], inv_v);
}

}  // namespace

cudaError_t run_bf16_qkv_rope_cache(const RopeCacheParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  if (p.Dh / 2 > kMaxHalf) return cudaErrorInvalidValue;
  bf16_qkv_rope_cache<<<unsigned(p.T), kThreads, 0, s>>>(p);
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
