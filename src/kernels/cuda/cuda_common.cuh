// Device-side helpers shared by the kernels (.cu files): BF16 unpacking, warp reductions, the
// tensor-core PTX wrappers (cp.async, ldmatrix, mma.sync) and PDL. No fmt/Status here: the .cu
// files are compiled by nvcc, whose host pass rejects fmt; launchers that check contracts and
// return Status live in the launch_*.cpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
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

// ---- attention helpers (decode and prefill kernels) ---------------------------------------------
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float fast_exp2(float x) {  // ex2.approx: 2^-22 relative, exp2(-inf) = 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// A tile of 128-byte rows (K, V or Q) in shared memory: row r keeps its 8 chunks of 16 bytes at
// r*8 + (chunk ^ (r % 8)), so the 8 rows one ldmatrix matrix reads fall in 8 different bank groups;
// at a 1024-byte aligned base it is exactly the 128-byte swizzle that wgmma descriptors describe.
__device__ __forceinline__ int swz(int row, int chunk) { return row * 8 + (chunk ^ (row & 7)); }

// ---- tensor-core PTX wrappers (sm_80+: cp.async, ldmatrix, mma.sync m16n8k16) -------------------
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared at a 32-bit shared address, zero-filled when !ok (src must still be a
// valid address). Callers that issue many copies compute the addresses once.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0));
}
// The same at a generic pointer into shared memory.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool ok) { cp_async16(smem_addr(dst), src, ok); }
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
// Waits until at most `n` of this thread's most recent cp.async groups are still in flight.
template <int n>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(n) : "memory");
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
// The same, each matrix transposed (a row-major k x n tile in shared memory -> B fragments).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// c (16x8 f32) += a (16x16 bf16, row) . b (16x8 bf16, col).
__device__ __forceinline__ void mma_bf16_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// d (16x8 f32) += a (16x16 f16, row) . b (16x8 f16, col). Not volatile: no side effects, so the
// compiler may interleave independent mmas with other work.
__device__ __forceinline__ void mma_f16_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                              uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
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

// ---- FP8 E4M3 KV cache (--kv-cache-dtype fp8) -------------------------------------------------
// The code stored for value v with inv_scale = 1 / scale (__frcp_rn: as the CPU's 1.0f / scale):
// v · inv_scale rounded to nearest even, saturating at ±448, as core/dtype f32_to_fp8_e4m3.
__device__ __forceinline__ uint8_t kv_fp8_code(float v, float inv_scale) {
  return __nv_cvt_float_to_fp8(v * inv_scale, __NV_SATFINITE, __NV_E4M3);
}
// Two E4M3 codes (low byte first) -> a BF16 pair, exactly (every E4M3 value is a BF16 value).
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2(uint16_t codes) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(codes, __NV_E4M3);
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
  return *reinterpret_cast<const uint32_t*>(&b);
}
// 8 E4M3 codes -> 8 FP16 values (16 bytes), in order: one cvt per pair, exact.
__device__ __forceinline__ uint4 e4m3x8_to_f16x8(uint2 c) {
  auto cvt = [](uint32_t two) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(two), __NV_E4M3);
    return uint32_t(h.x) | (uint32_t(h.y) << 16);
  };
  return make_uint4(cvt(c.x & 0xffffu), cvt(c.x >> 16), cvt(c.y & 0xffffu), cvt(c.y >> 16));
}
// 8 E4M3 codes -> 8 BF16 values (16 bytes), in order.
__device__ __forceinline__ uint4 e4m3x8_to_bf16x8(uint2 c) {
  return make_uint4(e4m3x2_to_bf16x2(uint16_t(c.x)), e4m3x2_to_bf16x2(uint16_t(c.x >> 16)),
                    e4m3x2_to_bf16x2(uint16_t(c.y)), e4m3x2_to_bf16x2(uint16_t(c.y >> 16)));
}

// Asks L2 for the line holding p (no register, no wait): for values a kernel reads only at its end.
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// ---- MXFP4 decode (the MoE GEMVs' mma operands, the dense MXFP4 GEMV and router) ---------------
// One MXFP4 word (8 E2M1 codes, element 0 in the low nibble) -> FP16 pairs (e0,e4) (e2,e6) from
// `even`, (e1,e5) (e3,e7) from `odd` via prmt 0x2404 / 0x3414. Each code s.e1e0.m is first moved to
// s000.e1e0m0 in a byte, the high byte of an FP16 whose value is E2M1 * 2^-14 (0.5 -> subnormal).
struct Fp4Word {
  uint32_t even, odd;
  __device__ __forceinline__ explicit Fp4Word(uint32_t q)
      : even(((q & 0x07070707u) << 1) | ((q & 0x08080808u) << 4)),
        odd(((q >> 3) & 0x0e0e0e0eu) | (q & 0x80808080u)) {}
};

// The 8 weights of MXFP4 word q as FP32 E2M1 * 2^-14, in element order (multiply the dot by the
// block's 2^(s-127) and by 2^14).
__device__ __forceinline__ void mxfp4_word_to_f32(uint32_t q, float (&f)[8]) {
  const Fp4Word w(q);
  const uint32_t p04 = __byte_perm(w.even, 0u, 0x2404), p26 = __byte_perm(w.even, 0u, 0x3414);
  const uint32_t p15 = __byte_perm(w.odd, 0u, 0x2404), p37 = __byte_perm(w.odd, 0u, 0x3414);
  const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&p04));
  const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&p26));
  const float2 c = __half22float2(*reinterpret_cast<const __half2*>(&p15));
  const float2 d = __half22float2(*reinterpret_cast<const __half2*>(&p37));
  f[0] = a.x;
  f[4] = a.y;
  f[2] = b.x;
  f[6] = b.y;
  f[1] = c.x;
  f[5] = c.y;
  f[3] = d.x;
  f[7] = d.y;
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

// The two GEMMs of a grouped MoE path (bf16_mxfp4w_moe_grouped*.cu, e4m3_mxfp4w_moe_grouped.cu), each
// block 128 output rows of one pair tile: gate_up over (⌈2F/128⌉, max tiles), then down over
// (⌈D/128⌉, max tiles), with `smem` bytes of opt-in shared memory.
// What a block of those GEMMs works on: pair tile blockIdx.y (expert e, its pairs at sorted positions
// row0 .. row0 + rows - 1) against the expert's N x Kd matrix of G = Kd / 32 MXFP4 blocks a row
// (gate_up: 2F x D, down: D x F).
struct GroupedTile {
  int e, row0, rows, N, Kd, G;
};
template <bool kGateUp>
__device__ __forceinline__ GroupedTile tile_of(const MoeGroupedParams& p) {
  const int4 t = p.tiles[blockIdx.y];
  const int Kd = kGateUp ? p.D : p.F;
  return {t.x, t.y, t.z, kGateUp ? 2 * p.F : p.D, Kd, Kd / 32};
}

inline cudaError_t launch_grouped_gemms(void (*gate_up)(MoeGroupedParams), void (*down)(MoeGroupedParams),
                                        int threads, int smem, const MoeGroupedParams& p, cudaStream_t s) {
  constexpr int kRows = 128;
  cudaError_t err = cudaFuncSetAttribute(gate_up, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err == cudaSuccess) err = cudaFuncSetAttribute(down, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  // Both as programmatic dependents: each kernel waits (griddepcontrol.wait) before it reads what
  // the kernel before it writes, so a launch overlaps the tail of the one before.
  err = launch_pdl(gate_up, dim3(unsigned((2 * p.F + kRows - 1) / kRows), unsigned(p.max_tiles)), dim3(threads),
                   size_t(smem), s, p);
  if (err != cudaSuccess) return err;
  return launch_pdl(down, dim3(unsigned((p.D + kRows - 1) / kRows), unsigned(p.max_tiles)), dim3(threads),
                    size_t(smem), s, p);
}

}  // namespace mx::cuda::kern
