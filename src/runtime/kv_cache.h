// Paged KV cache: per layer, K and V pools of fixed-size blocks (num_blocks, B, Hkv, Dh) on the
// model's device, a free list of block ids, and per-sequence block tables. Many sequences share
// one pool; a sequence grows block by block.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "model/config.h"

namespace mx {

class KvCache {
 public:
  static Result<KvCache> create(const ModelConfig& c, Device device, int num_blocks, int block_size);

  int block_size() const { return block_size_; }
  int num_blocks() const { return num_blocks_; }
  int free_blocks() const { return int(free_.size()); }
  const std::vector<ops::KvLayer>& layers() const { return layers_; }

  // Makes `table` hold enough blocks for `tokens` positions; fails (changing nothing) when the
  // pool has too few free blocks.
  Status reserve(std::vector<int32_t>& table, int64_t tokens);
  void release(std::vector<int32_t>& table);  // returns the blocks to the pool

 private:
  std::vector<ops::Buffer> storage_;
  std::vector<ops::KvLayer> layers_;
  std::vector<int32_t> free_;
  int num_blocks_ = 0, block_size_ = 0;
};

}  // namespace mx
