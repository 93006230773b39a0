// Device memory, copies and events for the CUDA backend (the stream and scratch: backend.h).
// Host code only, so it is compiled as C++: fmt (MX_CHECK) does not compile under nvcc.
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/launch_util.h"

namespace mx::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

Result<void*> device_malloc(size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
  MX_CHECK(err == cudaSuccess, "cudaMalloc of {} bytes failed: {}", bytes, cudaGetErrorString(err));
  return p;
}

void device_free(void* p) { cudaFree(p); }

Status memcpy_any(void* dst, const void* src, size_t bytes) {
  const cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
  MX_CHECK(err == cudaSuccess, "cudaMemcpy of {} bytes failed: {}", bytes, cudaGetErrorString(err));
  return ok_status();
}

Status memcpy_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height) {
  const cudaError_t err = cudaMemcpy2D(dst, dpitch, src, spitch, width, height, cudaMemcpyDefault);
  MX_CHECK(err == cudaSuccess, "cudaMemcpy2D of {} rows x {} bytes failed: {}", height, width, cudaGetErrorString(err));
  return ok_status();
}

Status memcpy_2d_async(const Backend& b, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                       size_t height) {
  const cudaError_t err = cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDefault, b.stream());
  MX_CHECK(err == cudaSuccess, "cudaMemcpy2DAsync of {} rows x {} bytes failed: {}", height, width,
           cudaGetErrorString(err));
  return ok_status();
}

Status memcpy_async(const Backend& b, void* dst, const void* src, size_t bytes) {
  const cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, b.stream());
  MX_CHECK(err == cudaSuccess, "cudaMemcpyAsync of {} bytes failed: {}", bytes, cudaGetErrorString(err));
  return ok_status();
}

Result<void*> host_malloc_pinned(size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaMallocHost(&p, bytes ? bytes : 1);
  MX_CHECK(err == cudaSuccess, "cudaMallocHost of {} bytes failed: {}", bytes, cudaGetErrorString(err));
  return p;
}

void host_free_pinned(void* p) { cudaFreeHost(p); }

Result<void*> event_create() {
  cudaEvent_t e = nullptr;
  const cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  MX_CHECK(err == cudaSuccess, "cudaEventCreate failed: {}", cudaGetErrorString(err));
  return static_cast<void*>(e);
}

Status event_record_on_stream(const Backend& b, void* event) {
  const cudaError_t err = cudaEventRecord(static_cast<cudaEvent_t>(event), b.stream());
  MX_CHECK(err == cudaSuccess, "cudaEventRecord failed: {}", cudaGetErrorString(err));
  return ok_status();
}

Status event_synchronize(void* event) {
  const cudaError_t err = cudaEventSynchronize(static_cast<cudaEvent_t>(event));
  MX_CHECK(err == cudaSuccess, "CUDA error: {}", cudaGetErrorString(err));
  return ok_status();
}

void event_destroy(void* event) { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }

Status synchronize(const Backend& b) {
  const cudaError_t err = cudaStreamSynchronize(b.stream());
  MX_CHECK(err == cudaSuccess, "CUDA error: {}", cudaGetErrorString(err));
  return ok_status();
}

}  // namespace mx::cuda
