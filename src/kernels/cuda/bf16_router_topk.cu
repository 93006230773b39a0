// bf16_router_topk: per token (one warp), the top-K router logits in descending order (ties: the
// lower expert index first, like a stable sort) and the softmax over those K, in double like the
// CPU reference so that ids are bitwise equal and weights agree to the last float bit or so.
#include "kernels/cuda/topk.cuh"

namespace mx::cuda::kern {
namespace {

__global__ void bf16_router_topk(RouterTopkParams p) {
  const int64_t t = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (t >= p.T) return;
  dev::warp_topk_softmax(p.logits, p.logits_f32, t, p.E, p.K, p.ids + t * p.K, p.weights + t * p.K);
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
