// bf16_router_topk: per token (one warp), the top-K router logits in descending order (ties: the
// lower expert index first, like a stable sort) and the softmax over those K, in double like the
// CPU reference so that ids are bitwise equal and weights agree to the last float bit or so.
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

constexpr int kPerLane = kTopkMaxExperts / 32;

__global__ void bf16_router_topk(RouterTopkParams p) {
  const int64_t t = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (t >= p.T) return;
  float v[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + 32 * i;
    v[i] = e >= p.E ? -INFINITY
           : p.logits_f32 ? static_cast<const float*>(p.logits)[t * p.E + e]
                          : __bfloat162float(static_cast<const __nv_bfloat16*>(p.logits)[t * p.E + e]);
  }
  float top_v[kTopkMaxK];
  int top_e[kTopkMaxK];
  uint32_t taken = 0;  // bit i: v[i] already chosen
  for (int k = 0; k < p.K; ++k) {
    float best = -INFINITY;
    int best_e = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < p.E && !(taken >> i & 1u) && (v[i] > best || best_e == 0x7fffffff)) best = v[i], best_e = e;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {  // argmax, lower index wins ties
      const float ov = __shfl_xor_sync(0xffffffffu, best, o);
      const int oe = __shfl_xor_sync(0xffffffffu, best_e, o);
      if (oe != 0x7fffffff && (best_e == 0x7fffffff || ov > best || (ov == best && oe < best_e))) best = ov, best_e = oe;
    }
    if (best_e % 32 == lane) taken |= 1u << (best_e / 32);
#pragma unroll
    for (int j = 0; j < kTopkMaxK; ++j)
      if (j == k) top_v[j] = best, top_e[j] = best_e;
  }
  if (lane != 0) return;
  double ex[kTopkMaxK], sum = 0.0;
#pragma unroll
  for (int k = 0; k < kTopkMaxK; ++k)
    if (k < p.K) sum += ex[k] = exp(double(top_v[k]) - double(top_v[0]));
#pragma unroll
  for (int k = 0; k < kTopkMaxK; ++k)
    if (k < p.K) {
      p.ids[t * p.K + k] = top_e[k];
      p.weights[t * p.K + k] = float(ex[k] / sum);
    }
}

}  // namespace

cudaError_t run_bf16_router_topk(const RouterTopkParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  if (p.E > kTopkMaxExperts || p.K > kTopkMaxK) return cudaErrorInvalidValue;
  constexpr int kWarps = 4;
  bf16_router_topk<<<unsigned((p.T + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(p);
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
