// RankTable (hash map from token bytes to rank) and the two equivalent BPE merge loops.
#include "tokenizer/bpe.h"

#include <cstring>
#include <limits>
#include <queue>

namespace mx {

// Pieces up to this many bytes use the O(n^2) scan over stack arrays; longer ones use the heap.
// Both do the same rank lookups; the scan avoids allocation and wins on short pieces (on the mixed
// test corpus thresholds of 16 and 48 were slower than 128); the heap bounds long runs (CJK text
// without spaces, 100k-space runs) to O(n log n).
constexpr size_t kScanMaxBytes = 128;

namespace {
constexpr int32_t kNoRank = std::numeric_limits<int32_t>::max();

inline uint64_t load_tail(const char* p, size_t n) {  // n < 8
  uint64_t v = 0;
  std::memcpy(&v, p, n);
  return v;
}
inline uint64_t mix(uint64_t h) {
  h ^= h >> 31;
  h *= 0x7fb5d329728ea185ull;
  h ^= h >> 27;
  h *= 0x81dadef4bc2dd44dull;
  return h ^ (h >> 33);
}
}  // namespace

uint64_t hash_bytes(std::string_view bytes) {
  const char* p = bytes.data();
  size_t n = bytes.size();
  uint64_t h = 0x9E3779B97F4A7C15ull * (n + 1);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  if (n) h = (h ^ load_tail(p, n)) * 0xc4ceb9fe1a85ec53ull;
  return mix(h);
}

namespace {
size_t capacity_for(size_t n) {
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  return cap;
}
inline uint64_t pack_short(std::string_view bytes) {
  uint64_t key = 0;
  std::memcpy(&key, bytes.data(), bytes.size());
  return key;
}
inline size_t short_hash(uint64_t key, size_t length) { return size_t(mix(key ^ (length << 59))); }
}  // namespace

void RankTable::reserve(size_t n) {
  entries_.reserve(n / 2);
  if (capacity_for(n / 2) > slots_.size()) rehash_long(capacity_for(n / 2));
  if (capacity_for(n * 3 / 4) > short_slots_.size()) rehash_short(capacity_for(n * 3 / 4));
}

bool RankTable::insert(std::string_view bytes, int32_t rank) {
  if (bytes.empty()) return false;
  bool fresh;
  if (bytes.size() <= 8) {
    fresh = insert_short(bytes, rank);
    if (fresh && bytes.size() == 1) byte_rank_[static_cast<unsigned char>(bytes[0])] = rank;
    if (fresh && bytes.size() == 2) pair_rank_[pair_index(bytes)] = rank;
  } else {
    fresh = insert_long(bytes, rank);
  }
  count_ += fresh;
  return fresh;
}

void RankTable::rehash_short(size_t capacity) {
  std::vector<ShortSlot> old = std::move(short_slots_);
  short_slots_.assign(capacity, ShortSlot{0, 0, 0});
  const size_t mask = capacity - 1;
  for (const ShortSlot& s : old) {
    if (s.length == 0) continue;
    size_t i = short_hash(s.key, s.length) & mask;
    while (short_slots_[i].length != 0) i = (i + 1) & mask;
    short_slots_[i] = s;
  }
}

bool RankTable::insert_short(std::string_view bytes, int32_t rank) {
  if (2 * (short_count_ + 1) > short_slots_.size()) rehash_short(capacity_for(short_count_ + 1) * 2);
  const uint64_t key = pack_short(bytes);
  const size_t mask = short_slots_.size() - 1;
  for (size_t i = short_hash(key, bytes.size()) & mask;; i = (i + 1) & mask) {
    ShortSlot& s = short_slots_[i];
    if (s.length == 0) {
      s = ShortSlot{key, rank, uint32_t(bytes.size())};
      ++short_count_;
      return true;
    }
    if (s.key == key && s.length == bytes.size()) return false;
  }
}

int32_t RankTable::find_short(std::string_view bytes) const {
  if (short_slots_.empty()) return kNone;
  const uint64_t key = pack_short(bytes);
  const size_t mask = short_slots_.size() - 1;
  for (size_t i = short_hash(key, bytes.size()) & mask;; i = (i + 1) & mask) {
    const ShortSlot& s = short_slots_[i];
    if (s.length == 0) return kNone;
    if (s.key == key && s.length == bytes.size()) return s.rank;
  }
}

void RankTable::rehash_long(size_t capacity) {
  slots_.assign(capacity, 0);
  const size_t mask = capacity - 1;
  for (size_t e = 0; e < entries_.size(); ++e) {
    const uint64_t h = hash_bytes(std::string_view(arena_).substr(entries_[e].offset, entries_[e].length));
    size_t i = h & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = ((h >> 32) << 32) | uint64_t(e + 1);
  }
}

size_t RankTable::probe_long(std::string_view bytes, uint64_t h) const {
  const size_t mask = slots_.size() - 1;
  const uint64_t tag = h >> 32;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const uint64_t s = slots_[i];
    if (s == 0) return i;
    if ((s >> 32) == tag) {
      const Entry& e = entries_[(s & 0xffffffffu) - 1];
      if (e.length == bytes.size() && std::memcmp(arena_.data() + e.offset, bytes.data(), e.length) == 0) return i;
    }
  }
}

bool RankTable::insert_long(std::string_view bytes, int32_t rank) {
  if (2 * (entries_.size() + 1) > slots_.size()) rehash_long(capacity_for(entries_.size() + 1) * 2);
  const uint64_t h = hash_bytes(bytes);
  const size_t i = probe_long(bytes, h);
  if (slots_[i] != 0) return false;
  entries_.push_back(Entry{uint32_t(arena_.size()), uint32_t(bytes.size()), rank});
  arena_.append(bytes);
  slots_[i] = ((h >> 32) << 32) | uint64_t(entries_.size());
  return true;
}

int32_t RankTable::find_long(std::string_view bytes) const {
  if (slots_.empty()) return kNone;
  const uint64_t s = slots_[probe_long(bytes, hash_bytes(bytes))];
  return s == 0 ? kNone : entries_[(s & 0xffffffffu) - 1].rank;
}

namespace {

int32_t rank_or_max(const RankTable& ranks, std::string_view bytes) {
  const int32_t r = ranks.find(bytes);
  return r == RankTable::kNone ? kNoRank : r;
}

// parts[k] = start of the k-th current token; pair_rank[k] = rank of tokens k and k+1 merged.
// Each step merges the lowest-ranked pair (leftmost on ties) until no pair is in the table.
void merge_scan(const RankTable& ranks, std::string_view piece, std::vector<int32_t>& out) {
  const size_t n = piece.size();
  uint32_t start_buf[kScanMaxBytes + 1];
  int32_t rank_buf[kScanMaxBytes];
  std::vector<uint32_t> start_vec;
  std::vector<int32_t> rank_vec;
  uint32_t* start = start_buf;
  int32_t* pair_rank = rank_buf;
  if (n > kScanMaxBytes) {
    start_vec.resize(n + 1);
    rank_vec.resize(n);
    start = start_vec.data();
    pair_rank = rank_vec.data();
  }
  size_t m = n;  // current token count; start[m] = n
  for (size_t k = 0; k <= n; ++k) start[k] = uint32_t(k);
  for (size_t k = 0; k + 1 < m; ++k) pair_rank[k] = rank_or_max(ranks, piece.substr(k, 2));
  // Rank of tokens k and k+1 merged, given the current starts.
  auto merged_rank = [&](size_t k) {
    return k + 2 <= m ? rank_or_max(ranks, piece.substr(start[k], start[k + 2] - start[k])) : kNoRank;
  };
  while (m > 1) {
    size_t best = 0;
    int32_t best_rank = kNoRank;
    for (size_t k = 0; k + 1 < m; ++k) {
      if (pair_rank[k] < best_rank) best_rank = pair_rank[k], best = k;
    }
    if (best_rank == kNoRank) break;
    // Token best absorbs token best+1: drop start[best+1] and the pair rank of (best+1, best+2).
    std::memmove(start + best + 1, start + best + 2, (m - best - 1) * sizeof(uint32_t));
    if (m >= best + 3) std::memmove(pair_rank + best + 1, pair_rank + best + 2, (m - best - 3) * sizeof(int32_t));
    --m;
    pair_rank[best] = merged_rank(best);
    if (best > 0) pair_rank[best - 1] = merged_rank(best - 1);
  }
  for (size_t k = 0; k < m; ++k) out.push_back(ranks.find(piece.substr(start[k], start[k + 1] - start[k])));
}

// Same merge order with a linked list of tokens and a min-heap of (rank, position) candidates;
// stale candidates are skipped when popped. O(n log n) for long pieces.
void merge_heap(const RankTable& ranks, std::string_view piece, std::vector<int32_t>& out) {
  const uint32_t n = uint32_t(piece.size());
  std::vector<uint32_t> next(n), prev(n);
  std::vector<uint8_t> alive(n, 1);
  for (uint32_t k = 0; k < n; ++k) next[k] = k + 1, prev[k] = k - 1;  // prev[0] wraps (unused)
  struct Cand {
    int32_t rank;
    uint32_t left, right_end;  // merged token bytes [left, right_end)
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push_pair = [&](uint32_t left) {
    if (left >= n || next[left] >= n) return;
    const uint32_t end = next[next[left]];
    const int32_t r = rank_or_max(ranks, piece.substr(left, end - left));
    if (r != kNoRank) heap.push(Cand{r, left, end});
  };
  for (uint32_t k = 0; k + 1 < n; ++k) push_pair(k);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    // Valid only if `left` still starts a token and the pair still spans [left, right_end).
    if (!alive[c.left] || next[c.left] >= n || next[next[c.left]] != c.right_end) continue;
    const uint32_t right = next[c.left];
    alive[right] = 0;
    next[c.left] = next[right];
    if (next[right] < n) prev[next[right]] = c.left;
    push_pair(c.left);
    if (c.left > 0) push_pair(prev[c.left]);
  }
  for (uint32_t k = 0; k < n; k = next[k]) out.push_back(ranks.find(piece.substr(k, next[k] - k)));
}

}  // namespace

void bpe_encode(const RankTable& ranks, std::string_view piece, std::vector<int32_t>& out, MergeStrategy strategy) {
  if (piece.size() == 1) {
    out.push_back(ranks.find(piece));
    return;
  }
  if (strategy == MergeStrategy::Auto) strategy = piece.size() <= kScanMaxBytes ? MergeStrategy::Scan : MergeStrategy::Heap;
  if (strategy == MergeStrategy::Scan) merge_scan(ranks, piece, out);
  else merge_heap(ranks, piece, out);
}

}  // namespace mx
