// The server's ChatDecoder on real harmony output (the gpt-oss tokenizer): reasoning, content and
// tool-call deltas (name first, arguments streamed), stop strings, and the whole output matching
// what was streamed.
#include <gtest/gtest.h>

#include "server/chat_decoder.h"
#include "tokenizer/tokenizer_fixture.h"

namespace mx::server {
namespace {

using openai::DeltaKind;

std::vector<ChatDelta> decode(const Tokenizer& tok, std::shared_ptr<const Tokenizer> shared, const std::string& text,
                              std::vector<std::string> stop, ChatDecoder** keep = nullptr) {
  auto ids = tok.encode(text, SpecialTokens::Allow);
  EXPECT_TRUE(ids.ok()) << ids.status().message();
  static std::unique_ptr<ChatDecoder> last;
  auto d = ChatDecoder::create(std::move(shared), std::move(stop));
  EXPECT_TRUE(d.ok()) << d.status().message();
  last = std::make_unique<ChatDecoder>(std::move(d).value());
  std::vector<ChatDelta> out;
  for (int32_t id : *ids)
    if (last->push(id, out) == StopHit::Yes) break;
  last->finish(out);
  if (keep) *keep = last.get();
  return out;
}

std::string joined(const std::vector<ChatDelta>& ds, DeltaKind kind) {
  std::string s;
  for (const ChatDelta& d : ds)
    if (d.kind == kind) s += d.text;
  return s;
}

TEST(ChatDecoder, ReasoningThenContent) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  ChatDecoder* dec = nullptr;
  const auto ds = decode(*tok, tok,
                         "<|channel|>analysis<|message|>User greets. Reply.<|end|>"
                         "<|start|>assistant<|channel|>final<|message|>Hello there!<|return|>",
                         {}, &dec);
  EXPECT_EQ(joined(ds, DeltaKind::Reasoning), "User greets. Reply.");
  EXPECT_EQ(joined(ds, DeltaKind::Content), "Hello there!");
  EXPECT_GT(ds.size(), 2u) << "streamed in pieces, not at the end";
  const openai::ChatOutput o = dec->output(openai::StopReason::Stop);
  EXPECT_EQ(o.content, "Hello there!");
  EXPECT_EQ(o.reasoning, "User greets. Reply.");
  EXPECT_EQ(o.finish_reason, "stop");
}

TEST(ChatDecoder, ToolCallStreamsNameThenArguments) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  ChatDecoder* dec = nullptr;
  const auto ds = decode(*tok, tok,
                         "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
                         "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
                         {}, &dec);
  std::vector<const ChatDelta*> calls;
  for (const ChatDelta& d : ds)
    if (d.kind == DeltaKind::ToolArguments) calls.push_back(&d);
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls[0]->tool_name, "get_weather");
  EXPECT_TRUE(calls[0]->tool_id.starts_with("call_"));
  for (size_t i = 1; i < calls.size(); ++i) {
    EXPECT_TRUE(calls[i]->tool_id.empty()) << "the id and name come once";
    EXPECT_EQ(calls[i]->tool_index, 0);
  }
  EXPECT_EQ(joined(ds, DeltaKind::ToolArguments), "{\"city\": \"Paris\"}");
  EXPECT_EQ(dec->tool_calls(), 1);
  const openai::ChatOutput o = dec->output(openai::StopReason::Stop);
  ASSERT_EQ(o.tool_calls.size(), 1u);
  EXPECT_EQ(o.tool_calls[0].id, calls[0]->tool_id) << "the whole response uses the streamed id";
  EXPECT_EQ(o.finish_reason, "tool_calls");
}

TEST(ChatDecoder, StopStringCutsContent) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  ChatDecoder* dec = nullptr;
  const auto ds = decode(*tok, tok, "<|channel|>final<|message|>one two three four<|return|>", {" thr"}, &dec);
  EXPECT_EQ(joined(ds, DeltaKind::Content), "one two");
  EXPECT_EQ(dec->output(openai::StopReason::Stop).content, "one two");
}

TEST(ChatDecoder, TextWithoutHeaderIsContentAtTheEnd) {
  // A model that never writes <|message|> (the random demo model): lenient parsing keeps the text.
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  const auto ds = decode(*tok, tok, "just some words", {});
  EXPECT_EQ(joined(ds, DeltaKind::Content), "just some words");
}

}  // namespace
}  // namespace mx::server

namespace mx::server {
namespace {

// reasoning_tokens: the tokens of each analysis message (its header and <|end|>), counted from
// the encoded pieces, whether the analysis comes first, twice, or is cut by the end of the stream.
TEST(ChatDecoder, ReasoningTokensCountTheAnalysisMessages) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  const auto count = [&](const std::string& text) {
    auto ids = tok->encode(text, SpecialTokens::Allow);
    EXPECT_TRUE(ids.ok());
    return int64_t(ids->size());
  };
  const std::string a1 = "<|channel|>analysis<|message|>User greets. Reply politely.<|end|>";
  const std::string a2 = "<|start|>assistant<|channel|>analysis<|message|>Second thought.<|end|>";
  const std::string call = "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>";
  const std::string fin = "<|start|>assistant<|channel|>final<|message|>Hello there!<|return|>";
  const std::string cut = "<|start|>assistant<|channel|>analysis<|message|>Still thinking about";
  ChatDecoder* dec = nullptr;
  decode(*tok, tok, a1 + fin, {}, &dec);
  EXPECT_EQ(dec->reasoning_tokens(), count(a1));
  decode(*tok, tok, a1 + a2 + call, {}, &dec);
  EXPECT_EQ(dec->reasoning_tokens(), count(a1) + count(a2));
  decode(*tok, tok, a1 + cut, {}, &dec);
  EXPECT_EQ(dec->reasoning_tokens(), count(a1) + count(cut));
  decode(*tok, tok, "<|channel|>final<|message|>No reasoning at all.<|return|>", {}, &dec);
  EXPECT_EQ(dec->reasoning_tokens(), 0);
}

}  // namespace
}  // namespace mx::server
