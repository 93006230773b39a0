// Byte-pair encoding with tiktoken semantics: RankTable maps byte strings to ranks (= token ids),
// and bpe_encode splits one pre-tokenized piece by repeatedly merging the adjacent pair whose
// concatenation has the lowest rank (leftmost on ties).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mx {

// Hash map from byte strings to ranks. Lookups dominate BPE time, so they are split by length:
// 1- and 2-byte strings index flat arrays, strings up to 8 bytes live packed in one 16-byte slot
// (one cache line touched per probe), longer ones in an open-addressing table over an arena.
class RankTable {
 public:
  static constexpr int32_t kNone = -1;

  void reserve(size_t n);
  // Adds bytes -> rank; returns false when the bytes were already present.
  bool insert(std::string_view bytes, int32_t rank);
  int32_t find(std::string_view bytes) const {  // kNone when absent
    if (bytes.size() == 1) return byte_rank_[static_cast<unsigned char>(bytes[0])];
    if (bytes.size() == 2) return pair_rank_[pair_index(bytes)];
    return bytes.size() <= 8 ? find_short(bytes) : find_long(bytes);
  }
  size_t size() const { return count_; }

 private:
  struct ShortSlot {
    uint64_t key;     // the bytes, little-endian, zero-padded
    int32_t rank;
    uint32_t length;  // 0 = empty slot
  };
  struct Entry {
    uint32_t offset, length;
    int32_t rank;
  };
  static size_t pair_index(std::string_view b) {
    return size_t(static_cast<unsigned char>(b[0])) << 8 | static_cast<unsigned char>(b[1]);
  }
  int32_t find_short(std::string_view bytes) const;
  int32_t find_long(std::string_view bytes) const;
  bool insert_short(std::string_view bytes, int32_t rank);
  bool insert_long(std::string_view bytes, int32_t rank);
  void rehash_short(size_t capacity);
  void rehash_long(size_t capacity);
  size_t probe_long(std::string_view bytes, uint64_t h) const;  // slot holding bytes or the empty slot

  std::vector<int32_t> byte_rank_ = std::vector<int32_t>(256, kNone);
  std::vector<int32_t> pair_rank_ = std::vector<int32_t>(65536, kNone);
  std::vector<ShortSlot> short_slots_;
  size_t short_count_ = 0;
  std::string arena_;
  std::vector<Entry> entries_;
  std::vector<uint64_t> slots_;  // (hash high 32 bits << 32) | (entry index + 1); 0 = empty
  size_t count_ = 0;
};

uint64_t hash_bytes(std::string_view bytes);

// Which merge loop to use: the quadratic scan is fastest for short pieces, the heap bounds the cost
// of long ones (both give identical results; Auto picks by length).
enum class MergeStrategy { Auto, Scan, Heap };

// Appends the ranks of `piece` (non-empty; every single byte must be in the table) to out.
void bpe_encode(const RankTable& ranks, std::string_view piece, std::vector<int32_t>& out,
                MergeStrategy strategy = MergeStrategy::Auto);

}  // namespace mx
