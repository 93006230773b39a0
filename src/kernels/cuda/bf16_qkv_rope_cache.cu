// bf16_qkv_rope_cache: rotates the q and k heads of each token in place (RoPE, half-split, cos/sin
// of float(pos) * inv_freq times the YaRN concentration, accurate sinf/cosf) and writes the
// rotated k and the v heads into the paged cache (BF16, or E4M3 codes of value / scale with
// kv_scales). Block (token, group of kWarps heads), a warp per head: every lane's loads of its
// head are in flight together (one block per token walked the token's heads in a chain of
// dependent 2-byte loads). The block's cos/sin and the token's cache slot come from data written
// before the step (positions, block tables), so they are computed before waiting for the qkv rows.
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxHalf = 128;  // head_dim <= 256
constexpr int kPairsPerLane = kMaxHalf / 32;

__global__ void __launch_bounds__(kThreads) bf16_qkv_rope_cache(RopeCacheParams p) {
  const int64_t t = blockIdx.x;
  const int half = p.Dh / 2, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int h = blockIdx.y * kWarps + warp;  // q heads, then k heads, then v heads
  const int pos = p.positions[t];
  __shared__ float cs[kMaxHalf], sn[kMaxHalf];
  for (int i = threadIdx.x; i < half; i += kThreads) {
    const float angle = float(pos) * p.inv_freq[i];  // fp32 product, like the reference
    float s, c;
    sincosf(angle, &s, &c);
    cs[i] = c * p.concentration;
    sn[i] = s * p.concentration;
  }
  int64_t slot = 0;  // (block, offset, 0, 0) of the token in the cache
  if (h >= p.H && h < p.H + 2 * p.Hkv) {
    const int32_t block = p.block_tables[int64_t(p.seq_index[t]) * p.max_blocks + pos / p.block_size];
    slot = (int64_t(block) * p.block_size + pos % p.block_size) * p.Hkv * p.Dh;
  }
  __syncthreads();
  dev::pdl_wait();  // the qkv rows come from the GEMM before
  dev::pdl_launch_dependents();
  if (h >= p.H + 2 * p.Hkv) return;

  __nv_bfloat16* x = static_cast<__nv_bfloat16*>(p.qkv) + t * int64_t(p.H + 2 * p.Hkv) * p.Dh + int64_t(h) * p.Dh;
  const bool fp8 = p.kv_scales != nullptr;
  auto put = [&](void* cache, int64_t i, __nv_bfloat16 v, float inv) {
    if (fp8)
      static_cast<uint8_t*>(cache)[slot + i] = dev::kv_fp8_code(__bfloat162float(v), inv);
    else
      static_cast<__nv_bfloat16*>(cache)[slot + i] = v;
  };
  if (h >= p.H + p.Hkv) {  // a v head: copied into the cache as it is
    const float inv_v = fp8 ? __frcp_rn(p.kv_scales[1]) : 0.0f;
    const int64_t at = int64_t(h - p.H - p.Hkv) * p.Dh;
    for (int j = lane; j < p.Dh; j += 32) put(p.v_cache, at + j, x[j], inv_v);
    return;
  }
  // A q or k head: rotation pairs (i, i + half), i = lane + 32 u, all loads first.
  float x1[kPairsPerLane], x2[kPairsPerLane];
#pragma unroll
  for (int u = 0; u < kPairsPerLane; ++u) {
    const int i = lane + 32 * u;
    x1[u] = i < half ? __bfloat162float(x[i]) : 0.0f;
    x2[u] = i < half ? __bfloat162float(x[i + half]) : 0.0f;
  }
  const bool is_k = h >= p.H;
  const float inv_k = fp8 && is_k ? __frcp_rn(p.kv_scales[0]) : 0.0f;
  const int64_t at = int64_t(h - p.H) * p.Dh;
#pragma unroll
  for (int u = 0; u < kPairsPerLane; ++u) {
    const int i = lane + 32 * u;
    if (i >= half) break;
    const __nv_bfloat16 y1 = __float2bfloat16(x1[u] * cs[i] - x2[u] * sn[i]);
    const __nv_bfloat16 y2 = __float2bfloat16(x2[u] * cs[i] + x1[u] * sn[i]);
    x[i] = y1;
    x[i + half] = y2;
    if (is_k) {
      put(p.k_cache, at + i, y1, inv_k);
      put(p.k_cache, at + i + half, y2, inv_k);
    }
  }
}

}  // namespace

cudaError_t run_bf16_qkv_rope_cache(const RopeCacheParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  if (p.Dh / 2 > kMaxHalf) return cudaErrorInvalidValue;
  const int heads = p.H + 2 * p.Hkv;
  return launch_pdl(bf16_qkv_rope_cache, dim3(unsigned(p.T), unsigned((heads + kWarps - 1) / kWarps)), dim3(kThreads),
                    0, s, p);
}

}  // namespace mx::cuda::kern
