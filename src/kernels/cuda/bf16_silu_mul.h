// Raw launcher of bf16_silu_mul.cu, the gated activation of a Llama-style MLP (ops::silu_mul; called
// by launch_dense.cpp, which checks the contract). Apart from kernels.h so that the other kernels do
// not rebuild with it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mx::cuda::kern {

// out[t][i] = bf16(silu(gate[t][i]) · up[t][i]) in FP32, gate = gate_up[t][0, I), up = gate_up[t][I, 2I).
// 16-byte loads and stores when I % 8 == 0 and both pointers are 16-byte aligned, 2-byte otherwise.
struct SiluMulParams {
  const void* gate_up;  // (T, 2I) bf16
  void* out;            // (T, I) bf16, not overlapping gate_up
  int64_t T, I;
};
cudaError_t run_bf16_silu_mul(const SiluMulParams& p, cudaStream_t s);

}  // namespace mx::cuda::kern
