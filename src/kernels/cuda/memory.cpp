// Device memory, copies, the engine stream and the ops' scratch workspace for the CUDA backend.
// Host code only, so it is compiled as C++: fmt (MX_CHECK) does not compile under nvcc.
#include <cuda_runtime.h>

#include <atomic>
#include <string>

#include "kernels/cuda/launch_util.h"

namespace mx::cuda {
namespace {
// Per thread: a tensor-parallel rank's thread drives its own GPU (kernels/collective.h).
thread_local cudaStream_t g_stream = nullptr;
}

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

Status memcpy_2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height) {
  const cudaError_t err = cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDefault, g_stream);
  MX_CHECK(err == cudaSuccess, "cudaMemcpy2DAsync of {} rows x {} bytes failed: {}", height, width,
           cudaGetErrorString(err));
  return ok_status();
}

Status memcpy_async(void* dst, const void* src, size_t bytes) {
  const cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, g_stream);
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

Status event_record_on_stream(void* event) {
  const cudaError_t err = cudaEventRecord(static_cast<cudaEvent_t>(event), g_stream);
  MX_CHECK(err == cudaSuccess, "cudaEventRecord failed: {}", cudaGetErrorString(err));
  return ok_status();
}

Status event_synchronize(void* event) {
  const cudaError_t err = cudaEventSynchronize(static_cast<cudaEvent_t>(event));
  MX_CHECK(err == cudaSuccess, "CUDA error: {}", cudaGetErrorString(err));
  return ok_status();
}

void event_destroy(void* event) { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }

Status synchronize() {
  const cudaError_t err = cudaStreamSynchronize(g_stream);
  MX_CHECK(err == cudaSuccess, "CUDA error: {}", cudaGetErrorString(err));
  return ok_status();
}

void* current_stream() { return g_stream; }
void set_current_stream(void* stream) { g_stream = static_cast<cudaStream_t>(stream); }

}  // namespace mx::cuda

namespace mx::cuda {
namespace {
// Per thread, like the stream: each tensor-parallel rank's thread has its own GPU and scratch, and
// an engine's loop thread its own (freed when the thread ends). Generations are unique across
// threads, so a graph captured over one thread's scratch is never taken for another's.
std::atomic<uint64_t> g_generations{0};
struct Scratch {
  void* data = nullptr;
  size_t bytes = 0;
  uint64_t generation = 0;
  ~Scratch() {
    if (data) cudaFree(data);
  }
};
thread_local Scratch g_scratch;
}  // namespace

uint64_t workspace_generation() { return g_scratch.generation; }

// Grow-only scratch for the ops (see launch_util.h); cudaFree synchronises the device first.
Result<void*> workspace(size_t bytes) {
  Scratch& w = g_scratch;
  if (bytes <= w.bytes) return w.data;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaStreamIsCapturing(g_stream, &capture);
  if (capture != cudaStreamCaptureStatusNone)
    return MX_ERROR("CUDA workspace must grow to {} bytes during graph capture: run one eager step first", bytes);
  if (w.data) cudaFree(w.data);
  w.data = nullptr;
  w.bytes = 0;
  const size_t grown = (bytes + (1u << 20) - 1) & ~size_t((1u << 20) - 1);
  const cudaError_t err = cudaMalloc(&w.data, grown);
  MX_CHECK(err == cudaSuccess, "cudaMalloc of a {}-byte workspace failed: {}", grown, cudaGetErrorString(err));
  w.bytes = grown;
  w.generation = ++g_generations;
  return w.data;
}

}  // namespace mx::cuda

namespace mx::cuda {
namespace {
const cudaDeviceProp& device_props() {
  thread_local const cudaDeviceProp props = [] {  // the thread's GPU (one per tensor-parallel rank)
    cudaDeviceProp p{};
    int dev = 0;
    cudaGetDevice(&dev);
    cudaGetDeviceProperties(&p, dev);
    return p;
  }();
  return props;
}
}  // namespace

int sm_count() { return device_props().multiProcessorCount; }
size_t max_smem_per_block() { return device_props().sharedMemPerBlockOptin; }
int compute_capability() { return 10 * device_props().major + device_props().minor; }

}  // namespace mx::cuda
