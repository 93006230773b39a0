// Raw launchers of bf16_all_reduce.cu, the tensor-parallel collectives over peer memory (called by
// cuda/collective.cpp). Apart from kernels.h so that the other kernels do not rebuild with them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mx::cuda::kern {

// bf16_all_reduce.cu: the tensor-parallel collectives over peer memory (cuda/collective.cpp).
constexpr int kTpMaxRanks = 8;
constexpr int kTpMaxBlocks = 64;  // blocks of a collective at most (one counter and flag row each)
struct TpBarrier {
  uint32_t* counters;              // (kTpMaxBlocks) this rank's, bumped by block b only
  uint32_t* flags[kTpMaxRanks];    // rank r's (kTpMaxBlocks, kTpMaxRanks): flag (b, src) written by src
  int rank, ranks;
};
struct TpAllReduceParams {
  void* x;                              // (n) bf16, x += Σ_r partials[r]
  const void* partials[kTpMaxRanks];    // (n) bf16 each, rank order
  int64_t n;
  void* clear;                          // (clear_n) bf16 of this rank zeroed after the barrier, or null
  int64_t clear_n;
  TpBarrier barrier;
};
struct TpGatherParams {
  float* full;                          // (R, starts[ranks]) on rank 0, else null
  const void* locals[kTpMaxRanks];      // (R, starts[r+1] - starts[r]) f32 each
  int64_t starts[kTpMaxRanks + 1];
  int64_t R;
  TpBarrier barrier;
};
struct TpBroadcastParams {
  int32_t* dst;        // this rank's bound buffer
  const int32_t* src;  // rank 0's
  int64_t n;
  TpBarrier barrier;
};
cudaError_t run_bf16_all_reduce_add(const TpAllReduceParams& p, cudaStream_t s);
cudaError_t run_f32_gather_logits(const TpGatherParams& p, cudaStream_t s);
cudaError_t run_i32_broadcast(const TpBroadcastParams& p, cudaStream_t s);

}  // namespace mx::cuda::kern
