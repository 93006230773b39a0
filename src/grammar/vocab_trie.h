// VocabTrie: the ordinary tokens' bytes as one trie laid out in preorder (edge byte, depth, end of
// subtree, token per node), so that a token mask is one linear scan that skips every subtree a
// matcher refuses; plus the harmony special ids guided decoding needs. Built once per tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/json_matcher.h"
#include "tokenizer/tokenizer.h"

namespace mx::grammar {

// A set of token ids as bits: word t / 32, bit t % 32.
struct TokenMask {
  std::vector<uint32_t> words;
  explicit TokenMask(int32_t vocab = 0) : words(size_t(vocab + 31) / 32, 0u) {}
  void allow(int32_t t) { words[size_t(t) >> 5] |= 1u << (t & 31); }
  bool allows(int32_t t) const { return t >= 0 && size_t(t >> 5) < words.size() && (words[size_t(t) >> 5] >> (t & 31)) & 1u; }
  int count() const;
  int32_t only() const;  // the one allowed id, or -1 when none or several
};

struct HarmonyIds {
  int32_t start = -1, end = -1, message = -1, channel = -1, constrain = -1, ret = -1, call = -1;
};

class VocabTrie {
 public:
  // `vocab` is the model's vocabulary size (masks have that many bits; ids past the tokenizer's
  // are never allowed).
  static Result<std::shared_ptr<const VocabTrie>> build(const Tokenizer& tok, int32_t vocab);

  int32_t vocab() const { return vocab_; }
  const HarmonyIds& ids() const { return ids_; }
  // Every ordinary token (no special ids).
  const TokenMask& ordinary() const { return ordinary_; }
  // Ordinary tokens whose bytes are a non-empty prefix of `bytes`.
  void allow_prefixes_of(std::string_view bytes, TokenMask& mask) const;
  // Ordinary tokens whose bytes the matcher accepts from `state` (scratch: rewound, then reused);
  // with closing_budget >= 0 only those after which a wrap-up takes at most that many bytes.
  void allow_json(const JsonMatcher& m, const MatchState& state, Arena& scratch, TokenMask& mask,
                  int closing_budget = -1) const;
  std::string_view bytes(int32_t id) const;  // an ordinary token's bytes ("" for special ids)

 private:
  int32_t vocab_ = 0;
  HarmonyIds ids_;
  TokenMask ordinary_;
  std::vector<std::string> bytes_;  // (vocab) ordinary tokens' bytes
  // The trie in preorder, root excluded: node i is reached by byte_[i] from its parent at depth_[i] - 1.
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<int32_t> skip_;   // one past the last node of i's subtree
  std::vector<int32_t> token_;  // the token ending at i, or -1
  std::vector<std::pair<int32_t, int32_t>> twins_;  // (node, token): further ids with the same bytes
  int max_depth_ = 0;
};

}  // namespace mx::grammar
