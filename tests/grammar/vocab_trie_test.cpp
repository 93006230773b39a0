// VocabTrie with the real gpt-oss vocabulary: masks inside plain strings (code-point ranges of the
// plain tokens plus a walk of the tokens with '"' or '\') equal the walk of every token through
// the matcher, on random documents of random schemas (maxLength 0..40, minLength, free strings,
// extra keys, unicode), in normal and closing mode and under wrap-up budgets.
#include "grammar/vocab_trie.h"

#include <gtest/gtest.h>

#include <random>

#include "tokenizer/tokenizer_fixture.h"

namespace mx::grammar {
namespace {

using Json = nlohmann::ordered_json;
constexpr int32_t kVocab = 201088;

const VocabTrie* vocab_for(const Tokenizer& tok) {
  static std::shared_ptr<const VocabTrie> v = [&] {
    auto r = VocabTrie::build(tok, kVocab);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r.value() : nullptr;
  }();
  return v.get();
}

// An object of 1..3 string properties with random length bounds, sometimes an array of them or
// extra keys; one schema in four is free JSON (strings of any length, free keys).
Json random_schema(std::mt19937& rng) {
  if (rng() % 4 == 0) return Json{{"type", "object"}};
  Json props = Json::object(), required = Json::array();
  const int n = 1 + int(rng() % 3);
  for (int i = 0; i < n; ++i) {
    Json s{{"type", "string"}};
    const int max = int(rng() % 41);
    if (rng() % 4 != 0) s["maxLength"] = max;
    if (rng() % 3 == 0) s["minLength"] = int(rng() % (max + 1));
    if (rng() % 5 == 0) s = Json{{"type", "array"}, {"items", s}, {"maxItems", 3}};
    const std::string key = "k" + std::to_string(i);
    props[key] = s;
    required.push_back(key);
  }
  return Json{{"type", "object"}, {"properties", props}, {"required", required}, {"additionalProperties", rng() % 4 == 0}};
}

std::vector<int32_t> allowed_ids(const TokenMask& m) {
  std::vector<int32_t> out;
  for (int32_t t = 0; t < int32_t(m.words.size() * 32); ++t)
    if (m.allows(t)) out.push_back(t);
  return out;
}

// Favours tokens with non-ASCII bytes (a third of the draws) and short ones with '"' (a third).
int32_t pick(const std::vector<int32_t>& ids, const VocabTrie& v, std::mt19937& rng) {
  std::vector<int32_t> unicode, closing;
  for (int32_t id : ids) {
    const std::string_view b = v.bytes(id);
    if (std::any_of(b.begin(), b.end(), [](char c) { return uint8_t(c) >= 0x80; })) unicode.push_back(id);
    if (b.size() <= 3 && b.find('"') != std::string_view::npos) closing.push_back(id);
  }
  const int r = int(rng() % 3);
  const auto& pool = r == 0 && !unicode.empty() ? unicode : r == 1 && !closing.empty() ? closing : ids;
  return pool[rng() % pool.size()];
}

std::string escaped(std::string_view s) {
  std::string out;
  for (unsigned char c : s) out += c >= 0x20 && c < 0x7F ? std::string(1, char(c)) : "\\x" + fmt::format("{:02x}", c);
  return out;
}

TEST(VocabTrie, PlainStringTokensAreGroupedByCodePoints) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  const VocabTrie* v = vocab_for(*tok);
  ASSERT_NE(v, nullptr);
  const PlainStrings& p = v->plain_strings();
  // Most of o200k is plain content; tokens like `":"` and `\n` are not.
  EXPECT_GT(p.upto.back().count() + int(p.longer.size()), 150000);
  EXPECT_EQ(p.upto[0].count(), 0);
  const auto ab = tok->token_id("ab"), ss = tok->token_id("ß"), quoted = tok->token_id("\":\"");
  ASSERT_TRUE(ab && ss && quoted);
  EXPECT_FALSE(p.upto[1].allows(*ab));
  EXPECT_TRUE(p.upto[2].allows(*ab));
  EXPECT_TRUE(p.upto[1].allows(*ss));  // two bytes, one code point
  EXPECT_FALSE(p.upto.back().allows(*quoted));
}

TEST(VocabTrie, PlainStringMasksEqualTheExactWalk) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  const VocabTrie* v = vocab_for(*tok);
  ASSERT_NE(v, nullptr);
  std::mt19937 rng(20251126);
  Arena arena(1 << 16), scratch(1 << 16);
  int compared = 0, plain = 0, closing = 0, budgeted = 0;
  for (int doc = 0; doc < 24; ++doc) {
    const Json schema = random_schema(rng);
    auto compiled = compile_schema(schema);
    ASSERT_TRUE(compiled.ok()) << compiled.status().message();
    const JsonMatcher m(std::make_shared<const Schema>(std::move(compiled.value())));
    arena.rewind(0);
    MatchState state = m.start(arena);
    std::string text;
    for (int step = 0; step < 40 && !m.can_end(state); ++step) {
      // Each state twice: as drawn, and in closing mode or under a random wrap-up budget.
      for (int variant = 0; variant < 2; ++variant) {
        MatchState s = state;
        int budget = -1;
        if (variant == 1 && rng() % 2 == 0) s.closing = true, closing++;
        else if (variant == 1) budget = int(rng() % 60), budgeted++;
        TokenMask fast(kVocab), exact(kVocab);
        v->allow_json(m, s, scratch, fast, budget);
        v->allow_json_exact(m, s, scratch, exact, budget);
        compared++;
        plain += m.in_plain_string(s);
        if (fast.words == exact.words) continue;
        for (int32_t t = 0; t < kVocab; ++t)
          if (fast.allows(t) != exact.allows(t)) {
            ADD_FAILURE() << "schema " << schema.dump() << " after `" << escaped(text) << "` closing " << s.closing
                          << " budget " << budget << ": token " << t << " `" << escaped(v->bytes(t)) << "` fast "
                          << fast.allows(t) << " exact " << exact.allows(t);
            return;
          }
      }
      TokenMask now(kVocab);
      v->allow_json_exact(m, state, scratch, now);
      const auto ids = allowed_ids(now);
      ASSERT_FALSE(ids.empty()) << "dead end after " << escaped(text);
      const int32_t t = pick(ids, *v, rng);
      MatchState next;
      ASSERT_TRUE(m.advance(state, v->bytes(t), next, arena));
      state = m.copy(next, arena);  // the walk's frames stay; scratch is free again
      text += v->bytes(t);
    }
  }
  // The fast path must have been exercised, in each mode.
  EXPECT_GT(plain, compared / 4) << compared << " states";
  EXPECT_GT(closing, 20);
  EXPECT_GT(budgeted, 20);
}

}  // namespace
}  // namespace mx::grammar
