// BlockManager: reference counts, the hash chain of full blocks, LRU eviction.
#include "runtime/scheduler_blocks.h"

#include <algorithm>

namespace mx {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {  // splitmix64-style combine
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}

}  // namespace

uint64_t BlockManager::block_hash(uint64_t parent, const std::vector<int32_t>& tokens, int64_t block) const {
  const int64_t B = kv_.block_size();
  uint64_t h = mix(parent, 0x5eedull);
  for (int64_t i = block * B; i < (block + 1) * B; ++i) h = mix(h, uint64_t(uint32_t(tokens[size_t(i)])));
  return h;
}

bool BlockManager::reserve(std::vector<int32_t>& table, int64_t tokens) {
  const int64_t need = (tokens + kv_.block_size() - 1) / kv_.block_size() - int64_t(table.size());
  if (need <= 0) return true;
  if (need > kv_.free_blocks() + evictable_) return false;
  if (need > kv_.free_blocks()) evict(need - kv_.free_blocks());
  return kv_.reserve(table, tokens).ok();
}

void BlockManager::release(std::vector<int32_t>& table) {
  std::vector<int32_t> to_pool;
  ++tick_;
  for (int32_t b : table) {
    auto it = cached_.find(b);
    if (it == cached_.end()) {
      to_pool.push_back(b);
      continue;
    }
    it->second.last_use = tick_;
    if (--it->second.refs == 0) ++evictable_;
  }
  kv_.release(to_pool);
  table.clear();
}

void BlockManager::evict(int64_t blocks) {
  std::vector<std::pair<uint64_t, int32_t>> lru;  // (last use, block) of unreferenced cached blocks
  for (const auto& [b, e] : cached_)
    if (e.refs == 0) lru.emplace_back(e.last_use, b);
  std::sort(lru.begin(), lru.end());
  std::vector<int32_t> freed;
  for (size_t i = 0; i < lru.size() && int64_t(freed.size()) < blocks; ++i) {
    const int32_t b = lru[i].second;
    by_hash_.erase(cached_[b].hash);
    cached_.erase(b);
    freed.push_back(b);
  }
  evictable_ -= int(freed.size());
  kv_.release(freed);
}

int64_t BlockManager::match_prefix(const std::vector<int32_t>& tokens, std::vector<int32_t>& table,
                                   std::vector<uint64_t>& hashes) {
  if (mode_ == PrefixCaching::Off || !table.empty()) return 0;
  const int64_t B = kv_.block_size();
  const int64_t full = (int64_t(tokens.size()) - 1) / B;  // at least one token left to compute
  queries_ += uint64_t(tokens.size());
  hashes.clear();
  ++tick_;
  for (int64_t b = 0; b < full; ++b) {
    const uint64_t h = block_hash(b ? hashes.back() : 0, tokens, b);
    auto it = by_hash_.find(h);
    if (it == by_hash_.end()) break;
    Entry& e = cached_[it->second];
    if (!std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin() + b * B)) break;
    if (e.refs++ == 0) --evictable_;
    e.last_use = tick_;
    table.push_back(it->second);
    hashes.push_back(h);
  }
  hits_ += uint64_t(table.size()) * uint64_t(B);
  return int64_t(table.size()) * B;
}

void BlockManager::register_blocks(const std::vector<int32_t>& tokens, const std::vector<int32_t>& table,
                                   int64_t computed, std::vector<uint64_t>& hashes) {
  if (mode_ == PrefixCaching::Off) return;
  const int64_t B = kv_.block_size();
  for (int64_t b = int64_t(hashes.size()); b < computed / B; ++b) {
    const uint64_t h = block_hash(b ? hashes.back() : 0, tokens, b);
    hashes.push_back(h);
    const int32_t block = table[size_t(b)];
    if (by_hash_.count(h) || cached_.count(block)) continue;  // same content cached elsewhere: ours stays private
    by_hash_[h] = block;
    cached_[block] = Entry{.hash = h, .tokens = {tokens.begin() + b * B, tokens.begin() + (b + 1) * B}, .refs = 1,
                           .last_use = tick_};
  }
}

int BlockManager::used_blocks() const { return kv_.num_blocks() - kv_.free_blocks() - evictable_; }

}  // namespace mx
