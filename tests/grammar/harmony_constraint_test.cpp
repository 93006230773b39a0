// HarmonyConstraint with the real gpt-oss vocabulary: a "model" that draws uniformly among the
// allowed tokens always produces a well-formed harmony answer whose body validates against the
// schema, within the reasoning budget; masks match what accept() takes; tokens drawn ahead under
// an older mask are replaced by the forced one.
#include "grammar/harmony_constraint.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar_test_util.h"
#include "tokenizer/tokenizer_fixture.h"

namespace mx::grammar {
namespace {

using Json = nlohmann::ordered_json;
constexpr int32_t kVocab = 201088;

std::shared_ptr<const VocabTrie> vocab_for(const Tokenizer& tok) {
  static std::shared_ptr<const VocabTrie> v = [&] {
    auto r = VocabTrie::build(tok, kVocab);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r.value() : nullptr;
  }();
  return v;
}

std::shared_ptr<const Schema> schema_of(const char* text) {
  auto s = compile_schema(Json::parse(text));
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::make_shared<Schema>(std::move(s.value()));
}

std::vector<int32_t> allowed_ids(const std::vector<uint32_t>& words) {
  std::vector<int32_t> out;
  for (size_t w = 0; w < words.size(); ++w)
    for (int b = 0; b < 32; ++b)
      if ((words[w] >> b) & 1u) out.push_back(int32_t(w * 32 + size_t(b)));
  return out;
}

// Draws until the rule ends the answer (or `limit` tokens); favours short tokens with '"', '}' and
// digits half of the time so that JSON bodies end.
std::vector<int32_t> draw(HarmonyConstraint& c, const Tokenizer& tok, std::mt19937& rng, int limit) {
  std::vector<int32_t> out;
  while (!c.done() && int(out.size()) < limit) {
    const auto ids = allowed_ids(c.next_mask(0));
    EXPECT_FALSE(ids.empty()) << "dead end after " << tok.decode(out);
    if (ids.empty()) break;
    std::vector<int32_t> closing;
    for (int32_t id : ids) {
      const auto b = tok.token_bytes(id);
      if (tok.is_special(id) || (b.size() <= 2 && b.find_first_of("\"}]0123456789") != std::string_view::npos))
        closing.push_back(id);
    }
    const auto& pool = !closing.empty() && rng() % 2 == 0 ? closing : ids;
    const int32_t t = pool[rng() % pool.size()];
    EXPECT_EQ(c.accept(t), t);
    out.push_back(t);
  }
  return out;
}

// The body between <|message|> and the terminator of the last message.
std::string body_of(const std::vector<int32_t>& ids, const Tokenizer& tok) {
  const int32_t message = *tok.token_id("<|message|>");
  auto last = std::find(ids.rbegin(), ids.rend(), message);
  EXPECT_NE(last, ids.rend());
  std::vector<int32_t> body(last.base(), ids.end() - 1);
  return tok.decode(body);
}

TEST(HarmonyConstraint, FinalJsonFollowsSchemaWithinBudget) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  const char* schema = R"({"type": "object", "properties": {
      "city": {"type": "string", "enum": ["Paris", "Oslo", "Lima"]},
      "days": {"type": "integer", "minimum": 1, "maximum": 14},
      "notes": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 2},
      "warm": {"type": "boolean"}},
    "required": ["city", "days", "notes", "warm"], "additionalProperties": false})";
  std::mt19937 rng(7);
  for (int run = 0; run < 6; ++run) {
    auto c = HarmonyConstraint::create(vocab_for(*tok), {.targets = {{.header = "final", .schema = schema_of(schema)}},
                                                         .max_reasoning_tokens = 5});
    ASSERT_TRUE(c.ok()) << c.status().message();
    const auto ids = draw(**c, *tok, rng, 400);
    ASSERT_TRUE((*c)->done()) << tok->decode(ids);
    EXPECT_LE((*c)->reasoning_tokens(), 5);
    const std::string text = tok->decode(ids);
    EXPECT_TRUE(text.starts_with("<|channel|>")) << text;
    EXPECT_NE(text.find("<|channel|>final<|message|>"), std::string::npos) << text;
    EXPECT_TRUE(text.ends_with("<|return|>")) << text;
    const std::string body = body_of(ids, *tok);
    Json doc;
    ASSERT_NO_THROW(doc = Json::parse(body)) << body;
    EXPECT_TRUE(test::validates(nlohmann::json::parse(schema), nlohmann::json(doc))) << body;
  }
}

TEST(HarmonyConstraint, ForcedToolCallHeaderAndArguments) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  const char* params = R"({"type": "object", "properties": {"unit": {"enum": ["c", "f"]}, "n": {"type": "integer",
    "minimum": -3, "maximum": 3}}, "required": ["unit", "n"], "additionalProperties": false})";
  std::mt19937 rng(11);
  for (int run = 0; run < 4; ++run) {
    HarmonyRule rule{.targets = {{.header = "commentary to=functions.get_weather", .tool = true, .schema = schema_of(params)},
                                 {.header = "commentary to=functions.get_time", .tool = true, .schema = schema_of(R"({"type": "object", "properties": {}, "additionalProperties": false})")}},
                     .max_reasoning_tokens = 0};
    auto c = HarmonyConstraint::create(vocab_for(*tok), std::move(rule));
    ASSERT_TRUE(c.ok());
    const auto ids = draw(**c, *tok, rng, 200);
    ASSERT_TRUE((*c)->done());
    EXPECT_EQ((*c)->reasoning_tokens(), 0);
    const std::string text = tok->decode(ids);
    const bool weather = text.starts_with("<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>");
    const bool time = text.starts_with("<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>");
    ASSERT_TRUE(weather || time) << text;
    const auto args = nlohmann::json::parse(body_of(ids, *tok));
    if (weather) {
      EXPECT_TRUE(test::validates(nlohmann::json::parse(params), args)) << text;
    } else {
      EXPECT_EQ(args, nlohmann::json::object()) << text;
    }
    EXPECT_TRUE(text.ends_with("<|call|>"));
  }
}

TEST(HarmonyConstraint, RunAheadInAnalysisAndForcedReplacement) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  auto c = HarmonyConstraint::create(vocab_for(*tok), {.targets = {{.header = "final"}}, .max_reasoning_tokens = 3});
  ASSERT_TRUE(c.ok());
  HarmonyConstraint& h = **c;
  const int32_t channel = *tok->token_id("<|channel|>"), end = *tok->token_id("<|end|>");
  const int32_t start = *tok->token_id("<|start|>"), message = *tok->token_id("<|message|>");
  EXPECT_FALSE(h.can_run_ahead(1));  // the header is forced token by token
  EXPECT_EQ(allowed_ids(h.next_mask(0)), std::vector<int32_t>{channel});
  EXPECT_EQ(h.accept(channel), channel);
  const int32_t analysis = tok->encode("analysis").value()[0];
  EXPECT_EQ(h.accept(analysis), analysis);
  EXPECT_EQ(h.accept(message), message);
  EXPECT_TRUE(h.can_run_ahead(1));
  EXPECT_TRUE(h.can_run_ahead(2));
  EXPECT_FALSE(h.can_run_ahead(3));  // the budget of 3 would be reached
  const auto ahead = h.next_mask(1);
  EXPECT_TRUE((ahead[size_t(end) / 32] >> (end % 32)) & 1u);
  const int32_t word = tok->encode(" hello").value()[0];
  EXPECT_EQ(h.accept(word), word);
  EXPECT_EQ(h.accept(end), end);
  // A token drawn ahead under the analysis mask: <|start|> is the only one allowed after <|end|>.
  EXPECT_EQ(h.accept(word), start);
  EXPECT_EQ(h.accept(channel), -1);  // "assistant" must come first, and more than one token spells it
  EXPECT_EQ(h.reasoning_tokens(), 1);
}

TEST(HarmonyConstraint, BudgetClosesTheAnalysis) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  auto c = HarmonyConstraint::create(vocab_for(*tok), {.targets = {{.header = "final"}}, .max_reasoning_tokens = 2});
  ASSERT_TRUE(c.ok());
  HarmonyConstraint& h = **c;
  for (const char* piece : {"<|channel|>", "analysis", "<|message|>"}) {
    const auto ids = tok->encode(piece, SpecialTokens::Allow).value();
    for (int32_t id : ids) ASSERT_EQ(h.accept(id), id) << piece;
  }
  const int32_t word = tok->encode(" a").value()[0];
  EXPECT_EQ(h.accept(word), word);
  EXPECT_EQ(h.accept(word), word);
  const int32_t end = *tok->token_id("<|end|>");
  EXPECT_EQ(allowed_ids(h.next_mask(0)), std::vector<int32_t>{end});
  EXPECT_EQ(h.accept(word), end);  // over budget: the one allowed token takes its place
  // After <|start|>assistant<|channel|> the analysis is no longer offered: only "final".
  for (const char* piece : {"<|start|>", "assistant", "<|channel|>"}) {
    const auto ids = tok->encode(piece, SpecialTokens::Allow).value();
    for (int32_t id : ids) ASSERT_EQ(h.accept(id), id) << piece;
  }
  const auto next = allowed_ids(h.next_mask(0));
  for (int32_t id : next) EXPECT_TRUE(std::string("final").starts_with(tok->token_bytes(id))) << tok->token_bytes(id);
}

}  // namespace
}  // namespace mx::grammar
