// VocabTrie: tries built from sorted tokens (sorted order is preorder); masks by linear scans with
// per-depth matcher states, or inside plain strings by ranges of code-point counts.
#include "grammar/vocab_trie.h"

#include <algorithm>
#include <bit>

namespace mx::grammar {

int TokenMask::count() const {
  int n = 0;
  for (uint32_t w : words) n += std::popcount(w);
  return n;
}

bool TokenMask::none() const {
  return std::all_of(words.begin(), words.end(), [](uint32_t w) { return w == 0; });
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

Result<TokenTrie> TokenTrie::build(const std::vector<std::string>& bytes, std::vector<int32_t> ids) {
  TokenTrie t;
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return bytes[size_t(a)] < bytes[size_t(b)]; });
  std::vector<int32_t> path;  // node index per depth - 1
  std::string_view prev;
  for (int32_t id : ids) {
    const std::string_view s = bytes[size_t(id)];
    MX_CHECK(!s.empty() && s.size() < 65535, "guided decoding: token {} is empty or too long", id);
    size_t common = 0;
    while (common < std::min(s.size(), prev.size()) && s[common] == prev[common]) ++common;
    common = std::min(common, path.size());
    for (size_t d = path.size(); d > common; --d) t.skip_[size_t(path[d - 1])] = int32_t(t.byte_.size());
    path.resize(common);
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(int32_t(t.byte_.size()));
      t.byte_.push_back(uint8_t(s[d]));
      t.depth_.push_back(uint16_t(d + 1));
      t.skip_.push_back(-1);
      t.token_.push_back(-1);
    }
    int32_t& end = t.token_[size_t(path.back())];
    if (end < 0) end = id;
    else t.twins_.emplace_back(path.back(), id);
    t.max_depth_ = std::max(t.max_depth_, int(s.size()));
    prev = s;
  }
  for (int32_t node : path) t.skip_[size_t(node)] = int32_t(t.byte_.size());
  return t;
}

void TokenTrie::allow_prefixes_of(std::string_view bytes, TokenMask& mask) const {
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

void TokenTrie::allow_json(const JsonMatcher& m, const MatchState& state, Arena& scratch, TokenMask& mask,
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

void PlainStrings::allow(int lo, int hi, TokenMask& mask) const {
  if (const int top = std::min(hi, kDense); lo <= top) {
    const auto &to = upto[size_t(top)].words, &below = upto[size_t(lo - 1)].words;
    for (size_t w = 0; w < mask.words.size(); ++w) mask.words[w] |= to[w] & ~below[w];
  }
  for (const auto& [points, id] : longer)
    if (points >= lo && points <= hi) mask.allow(id);
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
  std::vector<int32_t> ordinary;
  const int32_t n = std::min(vocab, tok.vocab_size());
  for (int32_t id = 0; id < n; ++id) {
    if (tok.is_special(id) || tok.token_bytes(id).empty()) continue;
    t->bytes_[size_t(id)] = std::string(tok.token_bytes(id));
    t->ordinary_.allow(id);
    ordinary.push_back(id);
  }
  MX_CHECK(!ordinary.empty(), "guided decoding: the tokenizer has no ordinary tokens");
  MX_ASSIGN(t->all_, TokenTrie::build(t->bytes_, std::move(ordinary)));
  MX_TRY(t->build_plain_strings());
  return std::shared_ptr<const VocabTrie>(std::move(t));
}

// The plain tokens are those without '"' and '\\' that a free string takes right after its
// opening quote (the matcher decides what valid UTF-8 content is); a code point per byte that is
// not a UTF-8 continuation byte (a token may end inside a character: its lead byte counts).
Status VocabTrie::build_plain_strings() {
  MX_ASSIGN(Schema schema, compile_schema(nlohmann::ordered_json{{"type", "string"}}));
  const JsonMatcher m(std::make_shared<const Schema>(std::move(schema)));
  Arena arena(1 << 16);
  MatchState content;
  MX_CHECK(m.advance(m.start(arena), uint8_t('"'), content, arena), "guided decoding: a string cannot start");
  TokenMask taken(vocab_);
  all_.allow_json(m, content, arena, taken, -1);
  std::vector<int32_t> quoted;
  std::vector<std::pair<int32_t, int32_t>> plain;  // (code points, id)
  for (int32_t id = 0; id < vocab_; ++id) {
    const std::string_view s = bytes_[size_t(id)];
    if (s.find_first_of("\"\\") != std::string_view::npos) {
      quoted.push_back(id);
    } else if (taken.allows(id)) {
      const auto points = std::count_if(s.begin(), s.end(), [](char c) { return (uint8_t(c) & 0xC0) != 0x80; });
      plain.emplace_back(int32_t(points), id);
    }
  }
  MX_ASSIGN(plain_.quoted, TokenTrie::build(bytes_, std::move(quoted)));
  std::sort(plain.begin(), plain.end());
  plain_.upto.assign(PlainStrings::kDense + 1, TokenMask(vocab_));
  for (const auto& [points, id] : plain) {
    if (points > PlainStrings::kDense) plain_.longer.emplace_back(points, id);
    else plain_.upto[size_t(points)].allow(id);
  }
  for (size_t k = 1; k < plain_.upto.size(); ++k)
    for (size_t w = 0; w < plain_.upto[k].words.size(); ++w) plain_.upto[k].words[w] |= plain_.upto[k - 1].words[w];
  plain_.max_code_points = plain.empty() ? 0 : plain.back().first;
  return ok_status();
}

std::string_view VocabTrie::bytes(int32_t id) const {
  return id >= 0 && id < vocab_ ? std::string_view(bytes_[size_t(id)]) : std::string_view();
}

void VocabTrie::allow_json(const JsonMatcher& m, const MatchState& state, Arena& scratch, TokenMask& mask,
                           int closing_budget) const {
  if (m.in_plain_string(state)) return allow_plain_string(m, state, scratch, mask, closing_budget);
  all_.allow_json(m, state, scratch, mask, closing_budget);
}

// Every code point is judged alike, so k plain code points are taken exactly when k 'a's are; the
// counts whose state passes the budget check come in runs, each one range of PlainStrings.
void VocabTrie::allow_plain_string(const JsonMatcher& m, const MatchState& state, Arena& scratch, TokenMask& mask,
                                   int closing_budget) const {
  const size_t mark = scratch.mark();
  MatchState at = state;
  int run = 0, k = 1;  // run: the first count of the open run (0: none)
  for (; k <= plain_.max_code_points; ++k) {
    MatchState next;
    if (!m.advance(at, uint8_t('a'), next, scratch)) break;
    at = next;
    const bool fits = closing_budget < 0 || m.closing_bytes(at) <= closing_budget;
    if (fits && run == 0) run = k;
    if (!fits && run > 0) plain_.allow(run, k - 1, mask), run = 0;
  }
  if (run > 0) plain_.allow(run, k - 1, mask);
  scratch.rewind(mark);
  plain_.quoted.allow_json(m, state, scratch, mask, closing_budget);
}

}  // namespace mx::grammar
