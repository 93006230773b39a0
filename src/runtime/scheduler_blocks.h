// BlockManager: the scheduler's view of the paged KV pool. Without prefix caching it forwards to
// KvCache. With it, full blocks whose K/V are computed are registered by a hash of their tokens
// and everything before them; a new request starts from the longest cached prefix, shared blocks
// are reference-counted, and unused cached blocks are evicted (least recently used) on demand.
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "runtime/kv_cache.h"

namespace mx {

enum class PrefixCaching { Off, On };

class BlockManager {
 public:
  BlockManager(KvCache& kv, PrefixCaching mode) : kv_(kv), mode_(mode) {}

  // Makes `table` cover `tokens` positions; false (nothing changed) when the pool cannot.
  bool reserve(std::vector<int32_t>& table, int64_t tokens);
  // Gives the table's blocks back: cached ones lose a reference, the others return to the pool.
  void release(std::vector<int32_t>& table);
  // The window pool (KvCache::reserve_window); without one both do nothing (and reserve succeeds).
  bool reserve_window(std::vector<int32_t>& window, int64_t first_live, int64_t tokens) {
    return !kv_.has_window_pool() || kv_.reserve_window(window, first_live, tokens);
  }
  void release_window(std::vector<int32_t>& window) {
    if (kv_.has_window_pool()) kv_.release_window(window);
  }

  // For a request with nothing computed: fills `table` with the cached blocks of its longest
  // cached prefix of full blocks (always leaving one token to compute) and returns the tokens
  // they cover. `hashes` receives the hash chain of those blocks.
  int64_t match_prefix(const std::vector<int32_t>& tokens, std::vector<int32_t>& table, std::vector<uint64_t>& hashes);
  // Registers the full blocks among the first `computed` tokens not registered yet (hashes grows).
  void register_blocks(const std::vector<int32_t>& tokens, const std::vector<int32_t>& table, int64_t computed,
                       std::vector<uint64_t>& hashes);

  int used_blocks() const;  // held by requests (neither free nor evictable)
  int free_blocks() const { return kv_.free_blocks() + evictable_; }  // free or evictable
  // Blocks reserve() would take to make `table` cover `tokens` positions.
  int64_t blocks_needed(const std::vector<int32_t>& table, int64_t tokens) const {
    return std::max<int64_t>(0, (tokens + kv_.block_size() - 1) / kv_.block_size() - int64_t(table.size()));
  }
  uint64_t query_tokens() const { return queries_; }
  uint64_t hit_tokens() const { return hits_; }

 private:
  struct Entry {
    uint64_t hash = 0;
    std::vector<int32_t> tokens;  // the block's tokens, checked on a hit (no trust in the hash alone)
    int refs = 0;
    uint64_t last_use = 0;
  };
  uint64_t block_hash(uint64_t parent, const std::vector<int32_t>& tokens, int64_t block) const;
  void evict(int64_t blocks);

  KvCache& kv_;
  PrefixCaching mode_;
  std::unordered_map<uint64_t, int32_t> by_hash_;  // hash -> block
  std::unordered_map<int32_t, Entry> cached_;      // block -> entry
  int evictable_ = 0;
  uint64_t tick_ = 0, queries_ = 0, hits_ = 0;
};

}  // namespace mx
