// cuda::Backend (backend.h): an ops::Context's stream, scratch, cuBLASLt handle and device
// properties. Host code only, compiled as C++ (fmt, MX_CHECK).
#include "kernels/cuda/backend.h"

#include <cublasLt.h>

#include <algorithm>

#include "kernels/cuda/launch_util.h"

namespace mx::cuda {

Result<std::unique_ptr<Backend>> Backend::create() {
  std::unique_ptr<Backend> b(new Backend());
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaGetDeviceProperties(&b->props_, dev);
  MX_CHECK(err == cudaSuccess, "CUDA context: no usable device ({})", cudaGetErrorString(err));
  return b;
}

Backend::~Backend() {
  if (scratch_) cudaFree(scratch_);
  if (lt_) cublasLtDestroy(static_cast<cublasLtHandle_t>(lt_));
}

Status Backend::reserve(size_t bytes) {
  if (bytes <= scratch_bytes_) return ok_status();
  MX_CHECK(!captured_,
           "the CUDA scratch must grow to {} bytes after a graph was captured over it ({} reserved): reserve it "
           "when the engine is made",
           bytes, scratch_bytes_);
  if (scratch_) cudaFree(scratch_);  // synchronises the device first
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  const size_t grown = (bytes + (1u << 20) - 1) & ~size_t((1u << 20) - 1);
  const cudaError_t err = cudaMalloc(&scratch_, grown);
  MX_CHECK(err == cudaSuccess, "cudaMalloc of a {}-byte scratch workspace failed: {}", grown, cudaGetErrorString(err));
  scratch_bytes_ = grown;
  return ok_status();
}

Result<void*> Backend::workspace(size_t bytes, const char* kernel) const {
  MX_CHECK(bytes <= scratch_bytes_,
           "{}: needs {} bytes of scratch, the context reserved {} (ops::Context::reserve_scratch, sized from the "
           "engine's largest call)",
           kernel, bytes, scratch_bytes_);
  return scratch_;
}

Result<void*> Backend::lt_handle() {
  if (!lt_) {
    cublasLtHandle_t h = nullptr;
    const cublasStatus_t st = cublasLtCreate(&h);
    MX_CHECK(st == CUBLAS_STATUS_SUCCESS, "cublasLtCreate failed: {}", int(st));
    lt_ = h;
  }
  return lt_;
}

size_t scratch_bytes_for(const Backend& b, const ops::CallShapes& s) {
  return std::max({linear_gemm_scratch_bytes(s), attention_scratch_bytes(b, s), moe_scratch_bytes(s),
                   moe_grouped_scratch_bytes(s), sample_scratch_bytes(b, s)});
}

}  // namespace mx::cuda
