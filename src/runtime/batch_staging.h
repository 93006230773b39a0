// BatchStaging: fixed device buffers for the small per-call arrays of a forward (token ids,
// positions, sequence rows, block tables, logit rows) and the logits, filled from the host
// before each call. Fixed addresses let a captured CUDA graph replay over them.
#pragma once

#include <span>
#include <vector>

#include "kernels/ops.h"
#include "model/forward.h"
#include "runtime/kv_cache.h"

namespace mx {

struct HostBatch {
  std::vector<int32_t> tokens;     // (T)
  std::vector<int32_t> positions;  // (T)
  std::vector<int32_t> seq_index;  // (T)
  std::vector<std::vector<int32_t>> tables;  // (S) block tables
  std::vector<int32_t> logit_rows; // (R)
};

class BatchStaging {
 public:
  static Result<BatchStaging> create(Device device, int max_tokens, int max_seqs, int max_blocks, int max_rows,
                                     int vocab);
  // Copies the host arrays in and returns the forward's arguments over the device buffers.
  Result<ForwardArgs> stage(const HostBatch& b, std::span<const ops::KvLayer> cache);
  // Same, and the sliding layers' block tables when the cache keeps rings for them.
  Result<ForwardArgs> stage(const HostBatch& b, const KvCache& cache);
  Status read_logits(int64_t rows, std::vector<float>& out) const;
  const Tensor& logits() const { return logits_; }

 private:
  Status make(Tensor& t, DType dt, std::initializer_list<int64_t> shape);
  Result<Tensor> put(const Tensor& buf, std::span<const int32_t> host);
  Result<Tensor> put_tables(const Tensor& buf, const std::vector<std::vector<int32_t>>& tables);

  Device device_ = Device::CPU;
  std::vector<ops::Buffer> storage_;
  Tensor tokens_, positions_, seq_, tables_, sliding_tables_, rows_, logits_;
};

}  // namespace mx
