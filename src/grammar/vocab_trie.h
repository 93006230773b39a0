// VocabTrie: the ordinary tokens' bytes as one trie laid out in preorder (TokenTrie), so that a
// token mask is one linear scan that skips every subtree a matcher refuses; the tokens that are plain
// string content grouped by code points (PlainStrings: masks inside strings without a walk); plus
// the harmony special ids guided decoding needs. Built once per tokenizer.
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
  bool none() const;  // no id allowed (stops at the first word with one)
  int32_t only() const;  // the one allowed id, or -1 when none or several
};

struct HarmonyIds {
  int32_t start = -1, end = -1, message = -1, channel = -1, constrain = -1, ret = -1, call = -1;
};

// A set of tokens as one trie laid out in preorder (edge byte, depth, end of subtree, token per
// node): a mask is one linear scan that skips every subtree a matcher refuses.
class TokenTrie {
 public:
  // The tokens `ids` (non-empty bytes[id] each).
  static Result<TokenTrie> build(const std::vector<std::string>& bytes, std::vector<int32_t> ids);
  // Tokens whose bytes are a non-empty prefix of `bytes`.
  void allow_prefixes_of(std::string_view bytes, TokenMask& mask) const;
  // As VocabTrie::allow_json, over these tokens.
  void allow_json(const JsonMatcher& m, const MatchState& state, Arena& scratch, TokenMask& mask,
                  int closing_budget) const;

 private:
  // Node i is reached by byte_[i] from its parent at depth_[i] - 1 (the root is not stored).
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<int32_t> skip_;   // one past the last node of i's subtree
  std::vector<int32_t> token_;  // the token ending at i, or -1
  std::vector<std::pair<int32_t, int32_t>> twins_;  // (node, token): further ids with the same bytes
  int max_depth_ = 0;
};

// String content without a pattern judges every character alike (JsonMatcher::in_plain_string):
// a token without '"' and '\\' that is valid content anywhere is allowed exactly when its code
// points fit what the state still takes. So those "plain" tokens are grouped by code points once,
// and only the tokens with '"' or '\\' (which end the string or escape) are walked.
struct PlainStrings {
  static constexpr int kDense = 32;  // code points up to which `upto` holds a mask per count
  TokenTrie quoted;             // the ordinary tokens with '"' or '\\'
  std::vector<TokenMask> upto;  // (kDense + 1): plain tokens of at most k code points
  std::vector<std::pair<int32_t, int32_t>> longer;  // (code points, id) of the plain ones beyond, sorted
  int max_code_points = 0;
  // Plain tokens of lo..hi code points (1 <= lo <= hi).
  void allow(int lo, int hi, TokenMask& mask) const;
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
  void allow_prefixes_of(std::string_view bytes, TokenMask& mask) const { all_.allow_prefixes_of(bytes, mask); }
  // Ordinary tokens whose bytes the matcher accepts from `state` (scratch: rewound, then reused);
  // with closing_budget >= 0 only those after which a wrap-up takes at most that many bytes.
  // Inside plain string content by code-point counts, else by the walk of allow_json_exact.
  void allow_json(const JsonMatcher& m, const MatchState& state, Arena& scratch, TokenMask& mask,
                  int closing_budget = -1) const;
  // The same set, always by walking every token through the matcher (the oracle of the tests).
  void allow_json_exact(const JsonMatcher& m, const MatchState& state, Arena& scratch, TokenMask& mask,
                        int closing_budget = -1) const {
    all_.allow_json(m, state, scratch, mask, closing_budget);
  }
  std::string_view bytes(int32_t id) const;  // an ordinary token's bytes ("" for special ids)
  const PlainStrings& plain_strings() const { return plain_; }

 private:
  Status build_plain_strings();
  void allow_plain_string(const JsonMatcher& m, const MatchState& state, Arena& scratch, TokenMask& mask,
                          int closing_budget) const;

  int32_t vocab_ = 0;
  HarmonyIds ids_;
  TokenMask ordinary_;
  std::vector<std::string> bytes_;  // (vocab) ordinary tokens' bytes
  TokenTrie all_;                   // the ordinary tokens
  PlainStrings plain_;
};

}  // namespace mx::grammar
