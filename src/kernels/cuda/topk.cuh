// Warp-level top-k + softmax over the k, shared by bf16_router_topk and the fused MoE router
// (bf16_bf16w_norm_router_topk): the same code, so both give the same ids and weights bitwise.
#pragma once

#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::dev {

inline constexpr int kTopkPerLane = kern::kTopkMaxExperts / 32;

// One token's E <= kTopkMaxExperts logits held by a warp (lane l holds expert l + 32 i in v[i]):
// the K <= kTopkMaxK largest in descending order (ties: the lower expert index first, like a
// stable sort), K rounds of warp argmax, and the softmax over those K in double like the CPU
// reference. Lane 0 writes ids[0..K) and weights[0..K). Every lane of the warp must call it.
__device__ __forceinline__ void warp_topk_softmax(const float (&v)[kTopkPerLane], int E, int K, int32_t* ids,
                                                  float* weights) {
  const int lane = threadIdx.x % 32;
  float top_v[kern::kTopkMaxK];
  int top_e[kern::kTopkMaxK];
  uint32_t taken = 0;  // bit i: v[i] already chosen
  for (int k = 0; k < K; ++k) {
    float best = -INFINITY;
    int best_e = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < kTopkPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < E && !(taken >> i & 1u) && (v[i] > best || best_e == 0x7fffffff)) best = v[i], best_e = e;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {  // argmax, lower index wins ties
      const float ov = __shfl_xor_sync(0xffffffffu, best, o);
      const int oe = __shfl_xor_sync(0xffffffffu, best_e, o);
      if (oe != 0x7fffffff && (best_e == 0x7fffffff || ov > best || (ov == best && oe < best_e))) best = ov, best_e = oe;
    }
    if (best_e % 32 == lane) taken |= 1u << (best_e / 32);
#pragma unroll
    for (int j = 0; j < kern::kTopkMaxK; ++j)
      if (j == k) top_v[j] = best, top_e[j] = best_e;
  }
  if (lane != 0) return;
  double ex[kern::kTopkMaxK], sum = 0.0;
#pragma unroll
  for (int k = 0; k < kern::kTopkMaxK; ++k)
    if (k < K) sum += ex[k] = exp(double(top_v[k]) - double(top_v[0]));
#pragma unroll
  for (int k = 0; k < kern::kTopkMaxK; ++k)
    if (k < K) {
      ids[k] = top_e[k];
      weights[k] = float(ex[k] / sum);
    }
}

}  // namespace mx::cuda::dev
