// Host-side helpers of the CUDA launchers (launch_*.cpp, compiled as C++ so that MX_CHECK/fmt
// work): the scratch each launch needs, launch-status conversion, alignment checks, the
// contracts several kernels share (KV cache layout, MXFP4 experts). Each kernel's contract is one
// `<kernel>_contract_violation` function returning the reason it fails ("" when the kernel can
// run), used by the launch (one MX_CHECK naming the kernel) and by the op's `*_supported()`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/context.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/kernels.h"

namespace mx::cuda {

// The scratch each kernel family's launch takes from Backend::workspace for the largest calls of
// `s`, defined beside each launch (the engine reserves their maximum: Backend::reserve).
size_t linear_gemm_scratch_bytes(const ops::CallShapes& s);
size_t attention_scratch_bytes(const Backend& b, const ops::CallShapes& s);
size_t moe_scratch_bytes(const ops::CallShapes& s);
size_t moe_grouped_scratch_bytes(const ops::CallShapes& s);
size_t sample_scratch_bytes(const Backend& b, const ops::CallShapes& s);

inline Status kernel_status(const char* kernel, cudaError_t err) {
  MX_CHECK(err == cudaSuccess, "{}: launch failed: {}", kernel, cudaGetErrorString(err));
  return ok_status();
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// A cache layer the kernels read and write: bf16, or FP8 E4M3 with its (2) f32 scales on the
// device; the scales pointer for the kernels' params, null for bf16.
inline bool kv_dtype_ok(const ops::KvLayer& c) {
  if (c.k.dtype != c.v.dtype) return false;
  if (c.k.dtype == DType::BF16) return true;
  return c.k.dtype == DType::F8_E4M3 && c.scales.dtype == DType::F32 && c.scales.numel() == 2 &&
         c.scales.device == Device::CUDA;
}
inline const float* kv_scales_of(const ops::KvLayer& c) { return c.fp8() ? c.scales.ptr<const float>() : nullptr; }

// The paged-cache layout the kernels that read or write a cache layer share (attention, the RoPE +
// cache write, the GEMV's qkv epilogue), with the reason it fails (empty when it holds).
inline std::string kv_cache_contract_violation(const ops::KvLayer& c, const ops::TokenBatch& b) {
  if (!kv_dtype_ok(c))
    return fmt::format("the KV cache must be bf16, or f8_e4m3 with (2) f32 scales on the device (got {}, {})",
                       dtype_name(c.k.dtype), dtype_name(c.v.dtype));
  if (c.v.dim(0) != c.k.dim(0) || c.v.dim(1) != c.k.dim(1) || c.v.dim(2) != c.k.dim(2) || c.v.dim(3) != c.k.dim(3))
    return fmt::format("k cache {} and v cache {} differ", c.k.shape_str(), c.v.shape_str());
  if (c.k.dim(1) <= 0 || b.block_tables.dim(1) <= 0)
    return fmt::format("empty block size or block table (block size {}, table {})", c.k.dim(1),
                       b.block_tables.shape_str());
  return {};
}

// The contract the MoE kernels (bf16_mxfp4w_moe_gemv, bf16_mxfp4w_moe_grouped) share on a call's
// MXFP4 experts, ids, weights and SwiGLU constants, with the reason it fails (empty when it holds).
// Defined in launch_moe_experts.cpp.
std::string mxfp4_experts_contract_violation(const ops::MoeArgs& a);

}  // namespace mx::cuda
