// Hopper warpgroup MMA (wgmma, sm_90a) helpers shared by the kernels that use it: the shared-memory
// matrix descriptor for 128-byte swizzled rows, the fence / commit / wait instructions, the proxy
// fence between cp.async writes and wgmma reads, and the host check that the device runs a kernel's
// sm_90a code. MX_HAVE_WGMMA is defined where the code is compiled for sm_90a; the kernels compile
// an empty body (and are never launched) elsewhere.
#pragma once

#include "kernels/cuda/cuda_common.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MX_HAVE_WGMMA 1
#endif

namespace mx::cuda::dev {

#ifdef MX_HAVE_WGMMA
// Shared-memory matrix descriptor: start address, leading byte offset, 8-row groups 1024 bytes
// apart, 128-byte swizzle (rows of 128 bytes swizzled as swz(), 1024-byte aligned base). For a
// K-major operand a k16 step is +32 bytes (+2 in the start field) and the leading offset is unused.
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr, uint32_t lbo = 16) {
  return uint64_t((addr & 0x3ffffu) >> 4) | (uint64_t((lbo & 0x3ffffu) >> 4) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// cp.async writes shared memory through the generic proxy; wgmma reads it through the async proxy.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
#endif

}  // namespace mx::cuda::dev

namespace mx::cuda::kern {

// Whether the device runs `kernel` from the binary's sm_90a code (the one with wgmma), not from
// another architecture's code; the callers cache the answer.
template <typename... Params>
bool runs_sm90a_code(void (*kernel)(Params...)) {
  cudaFuncAttributes a{};
  return cudaFuncGetAttributes(&a, kernel) == cudaSuccess && a.binaryVersion == 90;
}

}  // namespace mx::cuda::kern
