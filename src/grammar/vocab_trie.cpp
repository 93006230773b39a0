// VocabTrie: built from the sorted ordinary tokens (sorted order is preorder); masks by linear
// scans with per-depth matcher states.
#include "grammar/vocab_trie.h"

#include <algorithm>
#include <bit>

namespace mx::grammar {

int TokenMask::count() const {
  int n = 0;
  for (uint32_t w : words) n += std::popcount(w);
  return n;
}

int32_t TokenMask::only() const {
  int32_t found = -1;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == 0) continue;
    if (found >= 0 || std::popcount(words[i]) != 1) return -1;
    found = int32_t(i * 32 + size_t(std::countr_zero(words[i])));
  }
  return found;
}

Result<std::shared_ptr<const VocabTrie>> VocabTrie::build(const Tokenizer& tok, int32_t vocab) {
  auto t = std::make_shared<VocabTrie>();
  t->vocab_ = vocab;
  t->ordinary_ = TokenMask(vocab);
  t->bytes_.resize(size_t(vocab));
  auto special = [&](const char* name) {
    auto id = tok.token_id(name);
    return id && tok.is_special(*id) && *id < vocab ? *id : -1;
  };
  t->ids_ = {.start = special("<|start|>"), .end = special("<|end|>"), .message = special("<|message|>"),
             .channel = special("<|channel|>"), .constrain = special("<|constrain|>"), .ret = special("<|return|>"),
             .call = special("<|call|>")};
  std::vector<int32_t> order;
  const int32_t n = std::min(vocab, tok.vocab_size());
  for (int32_t id = 0; id < n; ++id) {
    if (tok.is_special(id) || tok.token_bytes(id).empty()) continue;
    t->bytes_[size_t(id)] = std::string(tok.token_bytes(id));
    t->ordinary_.allow(id);
    order.push_back(id);
  }
  MX_CHECK(!order.empty(), "guided decoding: the tokenizer has no ordinary tokens");
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return t->bytes_[size_t(a)] < t->bytes_[size_t(b)]; });
  std::vector<int32_t> path;  // node index per depth - 1
  std::string_view prev;
  for (int32_t id : order) {
    const std::string_view s = t->bytes_[size_t(id)];
    MX_CHECK(s.size() < 65535, "guided decoding: token {} is too long", id);
    size_t common = 0;
    while (common < std::min(s.size(), prev.size()) && s[common] == prev[common]) ++common;
    common = std::min(common, path.size());
    for (size_t d = path.size(); d > common; --d) t->skip_[size_t(path[d - 1])] = int32_t(t->byte_.size());
    path.resize(common);
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(int32_t(t->byte_.size()));
      t->byte_.push_back(uint8_t(s[d]));
      t->depth_.push_back(uint16_t(d + 1));
      t->skip_.push_back(-1);
      t->token_.push_back(-1);
    }
    int32_t& end = t->token_[size_t(path.back())];
    if (end < 0) end = id;
    else t->twins_.emplace_back(path.back(), id);
    t->max_depth_ = std::max(t->max_depth_, int(s.size()));
    prev = s;
  }
  for (int32_t node : path) t->skip_[size_t(node)] = int32_t(t->byte_.size());
  return std::shared_ptr<const VocabTrie>(std::move(t));
}

std::string_view VocabTrie::bytes(int32_t id) const {
  return id >= 0 && id < vocab_ ? std::string_view(bytes_[size_t(id)]) : std::string_view();
}

void VocabTrie::allow_prefixes_of(std::string_view bytes, TokenMask& mask) const {
  // Walk down: the children of a node are the nodes after it up to its skip.
  int32_t i = 0, end = int32_t(byte_.size());
  for (size_t d = 0; d < bytes.size(); ++d) {
    while (i < end && byte_[size_t(i)] != uint8_t(bytes[d])) i = skip_[size_t(i)];
    if (i >= end) return;
    if (token_[size_t(i)] >= 0) mask.allow(token_[size_t(i)]);
    end = skip_[size_t(i)];
    ++i;
  }
}

void VocabTrie::allow_json(const JsonMatcher& m, const MatchState& state, Arena& scratch, TokenMask& mask,
                           int closing_budget) const {
  std::vector<MatchState> at(size_t(max_depth_) + 1);
  std::vector<size_t> marks(size_t(max_depth_) + 1);
  at[0] = state;
  marks[0] = scratch.mark();
  const int32_t n = int32_t(byte_.size());
  for (int32_t i = 0; i < n;) {
    const size_t d = depth_[size_t(i)];
    scratch.rewind(marks[d - 1]);
    if (!m.advance(at[d - 1], byte_[size_t(i)], at[d], scratch)) {
      i = skip_[size_t(i)];
      continue;
    }
    marks[d] = scratch.mark();
    if (token_[size_t(i)] >= 0 && (closing_budget < 0 || m.closing_bytes(at[d]) <= closing_budget))
      mask.allow(token_[size_t(i)]);
    ++i;
  }
  scratch.rewind(marks[0]);
  for (const auto& [node, id] : twins_)
    if (mask.allows(token_[size_t(node)])) mask.allow(id);
}

}  // namespace mx::grammar
