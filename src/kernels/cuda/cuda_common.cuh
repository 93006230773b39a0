// Device-side helpers shared by the kernels (.cu files): BF16 unpacking, warp reductions and the
// MXFP4 decode in registers. No fmt/Status here: the .cu files are compiled by nvcc, whose host
// pass rejects fmt; launchers that check contracts and return Status live in the launch_*.cpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "kernels/cuda/kernels.h"

namespace mx::cuda::dev {

__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ float load_bf16(const __nv_bfloat16* p) { return __bfloat162float(*p); }

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Eight BF16 (one 16-byte load) -> eight floats.
__device__ __forceinline__ void unpack_bf16x8(const uint4& v, float* f) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = bf16_lo(w[i]);
    f[2 * i + 1] = bf16_hi(w[i]);
  }
}

// Eight floats -> eight BF16 (round to nearest even), the inverse of unpack_bf16x8.
__device__ __forceinline__ uint4 pack_bf16x8(const float* f) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);  // .x (low half) = f[2i]
    w[i] = *reinterpret_cast<const uint32_t*>(&h);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// MXFP4: four packed bytes (elements 8 consecutive, low nibble first) -> eight values times
// 2^-14, exactly: each E2M1 nibble s.e1e0.m is moved into an FP16 at bits 15 and 11..9, where it
// reads as value * 2^-14 (E2M1's subnormal 0.5 becomes an FP16 subnormal). Output order is
// (e0, e2, e4, e6) in lo[], (e1, e3, e5, e7) in hi[]. The caller multiplies by 2^(scale-127+14).
__device__ __forceinline__ void decode_fp4x8(uint32_t q, float2* lo, float2* hi) {
  const uint32_t w01 = __byte_perm(q, 0u, 0x4140);  // bytes b0, b1 in the two 16-bit halves
  const uint32_t w23 = __byte_perm(q, 0u, 0x4342);
  const uint32_t ws[2] = {w01, w23};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint32_t w = ws[i];
    const uint32_t l = ((w << 12) & 0x80008000u) | ((w << 9) & 0x0e000e00u);  // low nibbles
    const uint32_t h = ((w << 8) & 0x80008000u) | ((w << 5) & 0x0e000e00u);   // high nibbles
    lo[i] = __half22float2(*reinterpret_cast<const __half2*>(&l));
    hi[i] = __half22float2(*reinterpret_cast<const __half2*>(&h));
  }
}

// 2^(e - 127 + 14) for an E8M0 scale byte (undoes decode_fp4x8's 2^-14); e >= 241 gives inf
// like the reference's ldexp overflow.
__device__ __forceinline__ float e8m0_scale_fp16domain(uint32_t e) {
  const uint32_t x = e + 14;  // biased FP32 exponent of 2^(e-127+14)
  return x >= 255 ? __uint_as_float(0x7f800000u) : __uint_as_float(x << 23);
}

// Programmatic dependent launch (sm_90+; no-ops elsewhere and when the kernel was launched without
// the attribute). wait: block until the preceding kernel has finished and its writes are visible;
// everything before it may only read what that kernel does not write (weights, ids from earlier).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel (if launched with the attribute) start once every block has called this.
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

}  // namespace mx::cuda::dev

namespace mx::cuda::kern {

// Launches kernel<<<grid, block, smem, s>>>(args...) as a programmatic dependent of the previous
// work in the stream where the device supports it (sm_90+), a plain launch otherwise.
template <typename... Params, typename... Args>
cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                       Args&&... args) {
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
    major = 0;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = &attr;
  cfg.numAttrs = major >= 9 ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace mx::cuda::kern
