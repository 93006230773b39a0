// OpenAI chat request -> harmony conversation (rendered text checked exactly) and parsed harmony
// output -> content / reasoning / tool_calls / finish_reason; bad requests give clear errors.
#include <gtest/gtest.h>

#include "tokenizer/openai_chat.h"

namespace mx::openai {
namespace {

using nlohmann::ordered_json;

std::string render(const ChatPrompt& p) {
  auto r = harmony::render_for_completion(p.messages, harmony::Role::Assistant);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r->str() : "";
}

Result<ChatPrompt> convert(const char* body_json, const ChatOptions& options = {}) {
  return chat_to_harmony(ordered_json::parse(body_json), options);
}

TEST(OpenAIChat, SimpleConversationRendersLikeHarmony) {
  auto p = convert(R"({"messages": [{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "Hi"}]})",
                   {.conversation_start_date = "2025-06-28"});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(render(*p),
            "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
            "Knowledge cutoff: 2024-06\nCurrent date: 2025-06-28\n\nReasoning: medium\n\n"
            "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>"
            "<|start|>developer<|message|># Instructions\n\nBe brief.<|end|>"
            "<|start|>user<|message|>Hi<|end|><|start|>assistant");
}

TEST(OpenAIChat, NoInstructionsNoToolsMeansNoDeveloperMessage) {
  auto p = convert(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                                 {"type": "text", "text": "b"}]}]})");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->messages.size(), 2u);
  EXPECT_EQ(p->messages[1].text(), "ab");
  EXPECT_EQ(render(*p).find("developer"), std::string::npos);
}

TEST(OpenAIChat, ReasoningEffortMappedNotRejected) {
  EXPECT_EQ(map_reasoning_effort("low"), harmony::ReasoningEffort::Low);
  EXPECT_EQ(map_reasoning_effort("HIGH"), harmony::ReasoningEffort::High);
  EXPECT_EQ(map_reasoning_effort("minimal"), harmony::ReasoningEffort::Low);
  EXPECT_EQ(map_reasoning_effort("xhigh"), harmony::ReasoningEffort::High);
  EXPECT_EQ(map_reasoning_effort("banana"), harmony::ReasoningEffort::Medium);
  auto p = convert(R"({"reasoning_effort": "high", "messages": [{"role": "user", "content": "x"}]})");
  ASSERT_TRUE(p.ok());
  EXPECT_NE(render(*p).find("Reasoning: high"), std::string::npos);
  auto q = convert(R"({"reasoning_effort": 7, "messages": [{"role": "user", "content": "x"}]})");
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->effort, harmony::ReasoningEffort::Medium);
}

constexpr const char* kToolTurn = R"({
  "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather now.",
             "parameters": {"type": "object", "properties": {"location": {"type": "string"},
                                                             "unit": {"type": "string", "enum": ["c", "f"]}},
                            "required": ["location"]}}},
            {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}],
  "messages": [
    {"role": "user", "content": "Old question"},
    {"role": "assistant", "content": "Old answer", "reasoning_content": "old thoughts"},
    {"role": "user", "content": "Weather in SF?"},
    {"role": "assistant", "content": null, "reasoning_content": "Need the tool.",
     "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"location\":\"SF\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 20}"}
  ]})";

TEST(OpenAIChat, ToolTurnKeepsCurrentReasoningAndDropsOld) {
  auto p = convert(kToolTurn);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const std::string text = render(*p);
  EXPECT_EQ(text.find("old thoughts"), std::string::npos) << text;
  const std::string tail =
      "<|start|>user<|message|>Old question<|end|>"
      "<|start|>assistant<|channel|>final<|message|>Old answer<|end|>"
      "<|start|>user<|message|>Weather in SF?<|end|>"
      "<|start|>assistant<|channel|>analysis<|message|>Need the tool.<|end|>"
      "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>"
      "{\"location\":\"SF\"}<|call|>"
      "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{\"temp\": 20}<|end|>"
      "<|start|>assistant";
  ASSERT_GE(text.size(), tail.size());
  EXPECT_EQ(text.substr(text.size() - tail.size()), tail);
  EXPECT_NE(text.find("Calls to these tools must go to the commentary channel: 'functions'."), std::string::npos);
  EXPECT_NE(text.find("// Weather now.\ntype get_weather = (_: {\nlocation: string,\nunit?: \"c\" | \"f\",\n}) => any;"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("type get_time = () => any;"), std::string::npos);
  EXPECT_EQ(p->tool_names, (std::vector<std::string>{"get_weather", "get_time"}));
}

TEST(OpenAIChat, ToolChoice) {
  const std::string base = R"("tools": [{"type": "function", "function": {"name": "a"}},
                                        {"type": "function", "function": {"name": "b"}}],
                              "messages": [{"role": "user", "content": "x"}])";
  auto none = chat_to_harmony(ordered_json::parse("{" + base + R"(, "tool_choice": "none"})"));
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(render(*none).find("namespace functions"), std::string::npos);
  auto named = chat_to_harmony(
      ordered_json::parse("{" + base + R"(, "tool_choice": {"type": "function", "function": {"name": "b"}}})"));
  ASSERT_TRUE(named.ok()) << named.status().message();
  EXPECT_EQ(named->tool_choice, ToolChoice::Named);
  EXPECT_EQ(named->tool_names, std::vector<std::string>{"b"});
  auto unknown = chat_to_harmony(
      ordered_json::parse("{" + base + R"(, "tool_choice": {"type": "function", "function": {"name": "zz"}}})"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("zz"), std::string::npos);
  EXPECT_FALSE(chat_to_harmony(ordered_json::parse("{" + base + R"(, "tool_choice": "sometimes"})")).ok());
}

TEST(OpenAIChat, BadRequestsGiveClearErrors) {
  struct Bad {
    const char* body;
    const char* mentions;
  };
  const Bad cases[] = {
      {R"([])", "JSON object"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})", "image_url"},
      {R"({"messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}]})", "nope"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]})", "name"},
      {R"({"tools": [{"type": "retrieval"}], "messages": [{"role": "user", "content": "x"}]})", "retrieval"},
      {R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}],
           "messages": [{"role": "user", "content": "x"}]})", "parameters"},
      {R"({"tool_choice": "required", "messages": [{"role": "user", "content": "x"}]})", "required"},
  };
  for (const Bad& b : cases) {
    auto r = convert(b.body);
    ASSERT_FALSE(r.ok()) << b.body;
    EXPECT_NE(r.status().message().find(b.mentions), std::string::npos) << r.status().message();
  }
}

TEST(OpenAIChat, UnorderedJsonOverloadAlsoWorks) {
  auto p = chat_to_harmony(nlohmann::json::parse(R"({"messages": [{"role": "user", "content": "x"}]})"));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->messages.back().text(), "x");
}

harmony::Message assistant(std::optional<std::string> channel, std::string text,
                           std::optional<std::string> recipient = std::nullopt) {
  harmony::Message m = harmony::text_message(harmony::Role::Assistant, std::move(text));
  m.channel = std::move(channel);
  m.recipient = std::move(recipient);
  return m;
}

TEST(OpenAIChatOutput, ReasoningAndContent) {
  const std::vector<harmony::Message> msgs = {assistant("analysis", "think"), assistant("final", "Answer.")};
  const ChatOutput out = harmony_to_chat(msgs);
  EXPECT_EQ(out.reasoning, "think");
  EXPECT_EQ(out.content, "Answer.");
  EXPECT_TRUE(out.tool_calls.empty());
  EXPECT_EQ(out.finish_reason, "stop");
  const auto j = out.to_message_json();
  EXPECT_EQ(j["content"], "Answer.");
  EXPECT_EQ(j["reasoning_content"], "think");
  EXPECT_FALSE(j.contains("tool_calls"));
}

TEST(OpenAIChatOutput, ToolCalls) {
  const std::vector<harmony::Message> msgs = {assistant("analysis", "need tools"),
                                              assistant("commentary", R"({"location":"SF"})", "functions.get_weather"),
                                              assistant("commentary", "{}", "functions.get_time"),
                                              assistant("analysis", "{\"q\":1}", "browser.search")};
  const ChatOutput out = harmony_to_chat(msgs, {.stop = StopReason::Stop, .id_seed = 7});
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(out.tool_calls[0].arguments, R"({"location":"SF"})");
  EXPECT_EQ(out.tool_calls[1].name, "get_time");
  for (const ToolCall& c : out.tool_calls) {
    ASSERT_EQ(c.id.size(), 5u + 24u) << c.id;
    EXPECT_TRUE(c.id.starts_with("call_"));
    EXPECT_TRUE(std::all_of(c.id.begin() + 5, c.id.end(), [](char ch) { return std::isalnum(ch); })) << c.id;
  }
  EXPECT_NE(out.tool_calls[0].id, out.tool_calls[1].id);
  EXPECT_EQ(out.finish_reason, "tool_calls");
  const auto j = out.to_message_json();
  EXPECT_TRUE(j["content"].is_null());
  EXPECT_EQ(j["tool_calls"][0]["function"]["arguments"], R"({"location":"SF"})");
  EXPECT_EQ(j["tool_calls"][0]["type"], "function");
  EXPECT_NE(make_call_id(0), make_call_id(0));  // random ids differ
}

TEST(OpenAIChatOutput, LengthAndDeltaKinds) {
  const std::vector<harmony::Message> msgs = {assistant("final", "cut sh")};
  EXPECT_EQ(harmony_to_chat(msgs, {.stop = StopReason::Length, .id_seed = 0}).finish_reason, "length");
  EXPECT_EQ(delta_kind("analysis", std::nullopt), DeltaKind::Reasoning);
  EXPECT_EQ(delta_kind("final", std::nullopt), DeltaKind::Content);
  EXPECT_EQ(delta_kind("commentary", std::nullopt), DeltaKind::Content);
  EXPECT_EQ(delta_kind("commentary", "functions.f"), DeltaKind::ToolArguments);
  EXPECT_EQ(delta_kind("analysis", "functions.f"), DeltaKind::ToolArguments);
  EXPECT_EQ(delta_kind("analysis", "python"), DeltaKind::Hidden);
}

}  // namespace
}  // namespace mx::openai
