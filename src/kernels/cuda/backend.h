// cuda::Backend: the CUDA half of an ops::Context (kernels/context.h): the stream its ops queue
// on, the scratch workspace, the cuBLASLt handle and the properties of its GPU. Host code only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "core/status.h"

namespace mx::cuda {

class Backend {
 public:
  // On the calling thread's current GPU, queuing on its legacy default stream.
  static Result<std::unique_ptr<Backend>> create();
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  cudaStream_t stream() const { return stream_; }
  void set_stream(cudaStream_t s) { stream_ = s; }  // a graph capture queues on its own stream

  // The scratch workspace: one device buffer shared by the ops of the stream (ops run in stream
  // order, so one op's scratch is dead when the next starts). reserve() grows it, refused once a
  // graph was captured; workspace() hands out its start, or fails when `bytes` exceed it.
  Status reserve(size_t bytes);
  size_t reserved() const { return scratch_bytes_; }
  Result<void*> workspace(size_t bytes, const char* kernel) const;
  void mark_captured() { captured_ = true; }

  Result<void*> lt_handle();  // cublasLtHandle_t, made on first use
  int sm_count() const { return props_.multiProcessorCount; }
  size_t max_smem_per_block() const { return props_.sharedMemPerBlockOptin; }
  int compute_capability() const { return 10 * props_.major + props_.minor; }

 private:
  Backend() = default;
  cudaStream_t stream_ = nullptr;
  cudaDeviceProp props_{};
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  bool captured_ = false;
  void* lt_ = nullptr;
};

}  // namespace mx::cuda
