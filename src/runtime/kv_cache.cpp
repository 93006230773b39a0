// Paged KV cache pools and block bookkeeping.
#include "runtime/kv_cache.h"

namespace mx {

Result<KvCache> KvCache::create(const ModelConfig& c, Device device, int num_blocks, int block_size) {
  MX_CHECK(num_blocks > 0 && block_size > 0, "kv cache: need positive block count and size ({}, {})", num_blocks,
           block_size);
  KvCache kv;
  kv.num_blocks_ = num_blocks;
  kv.block_size_ = block_size;
  const DType act = device == Device::CPU ? DType::F32 : DType::BF16;
  const std::initializer_list<int64_t> shape = {num_blocks, block_size, c.num_key_value_heads, c.head_dim};
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    ops::KvLayer layer;
    for (Tensor* t : {&layer.k, &layer.v}) {
      Tensor probe(nullptr, act, shape, device);
      MX_ASSIGN(ops::Buffer b, ops::Buffer::allocate(device, probe.nbytes()));
      *t = b.view(act, shape);
      kv.storage_.push_back(std::move(b));
    }
    kv.layers_.push_back(layer);
  }
  for (int b = num_blocks - 1; b >= 0; --b) kv.free_.push_back(b);
  return kv;
}

Status KvCache::reserve(std::vector<int32_t>& table, int64_t tokens) {
  const int64_t need = (tokens + block_size_ - 1) / block_size_ - int64_t(table.size());
  if (need <= 0) return ok_status();
  MX_CHECK(need <= int64_t(free_.size()), "kv cache full: {} more blocks needed, {} free of {}", need, free_.size(),
           num_blocks_);
  for (int64_t i = 0; i < need; ++i) {
    table.push_back(free_.back());
    free_.pop_back();
  }
  return ok_status();
}

void KvCache::release(std::vector<int32_t>& table) {
  for (int32_t b : table) free_.push_back(b);
  table.clear();
}

}  // namespace mx
