// ResponseOutput: chat deltas -> Responses output items and response.* events: reasoning then a
// message, the summary events and item when reasoning.summary is set, a sealed reasoning text
// that opens back, function calls, and a cut item marked incomplete.
#include <gtest/gtest.h>

#include "server/responses_output.h"

namespace mx::server {
namespace {

using openai::DeltaKind;

ChatDelta delta(DeltaKind k, std::string text, std::string tool_id = "", std::string tool_name = "") {
  return {.kind = k, .text = std::move(text), .tool_index = tool_id.empty() ? -1 : 0, .tool_id = std::move(tool_id),
          .tool_name = std::move(tool_name)};
}

// The event types in the SSE text, in order.
std::vector<std::string> types(const std::string& sse) {
  std::vector<std::string> out;
  for (size_t at = 0; (at = sse.find("event: ", at)) != std::string::npos;) {
    const size_t end = sse.find('\n', at);
    out.push_back(sse.substr(at + 7, end - at - 7));
    at = end;
  }
  return out;
}

TEST(ResponseOutput, ReasoningWithSummaryAndSealThenMessage) {
  const Sealer sealer("k");
  ResponseOutput o;
  o.summarize = true;
  o.sealer = &sealer;
  std::string sse = o.on_delta(delta(DeltaKind::Reasoning, "Think "));
  sse += o.on_delta(delta(DeltaKind::Reasoning, "hard."));
  sse += o.on_delta(delta(DeltaKind::Content, "Answer."));
  sse += o.close();
  const std::vector<std::string> want = {
      "response.output_item.added", "response.content_part.added", "response.reasoning_summary_part.added",
      "response.reasoning_text.delta", "response.reasoning_summary_text.delta",
      "response.reasoning_text.delta", "response.reasoning_summary_text.delta",
      "response.reasoning_text.done", "response.content_part.done",
      "response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.done", "response.content_part.done", "response.output_item.done"};
  EXPECT_EQ(types(sse), want);
  ASSERT_EQ(o.output.size(), 2u);
  const Json& rs = o.output[0];
  EXPECT_EQ(rs["type"], "reasoning");
  EXPECT_EQ(rs["content"][0]["text"], "Think hard.");
  EXPECT_EQ(rs["summary"][0], (Json{{"type", "summary_text"}, {"text", "Think hard."}}));
  EXPECT_EQ(sealer.open(rs["encrypted_content"].get<std::string>()), "Think hard.");
  EXPECT_EQ(o.output[1]["content"][0]["text"], "Answer.");
  EXPECT_EQ(o.output[1]["status"], "completed");
  EXPECT_FALSE(o.has_call());
  EXPECT_NE(sse.find("\"sequence_number\":17"), std::string::npos) << "numbered in order";
}

TEST(ResponseOutput, PlainReasoningCallsAndACutItem) {
  ResponseOutput o;
  std::string sse = o.on_delta(delta(DeltaKind::Reasoning, "r"));
  sse += o.on_delta(delta(DeltaKind::ToolArguments, "{\"a\":", "call_1", "f"));
  sse += o.on_delta(delta(DeltaKind::ToolArguments, "1}"));
  sse += o.on_delta(delta(DeltaKind::ToolArguments, "{", "call_2", "g"));
  sse += o.close(/*truncated=*/true);
  for (const std::string& t : types(sse)) EXPECT_EQ(t.find("summary"), std::string::npos) << t;
  ASSERT_EQ(o.output.size(), 3u);
  EXPECT_EQ(o.output[0]["summary"], Json::array());
  EXPECT_FALSE(o.output[0].contains("encrypted_content"));
  EXPECT_EQ(o.output[1]["arguments"], "{\"a\":1}");
  EXPECT_EQ(o.output[1]["call_id"], "call_1");
  EXPECT_EQ(o.output[1]["status"], "completed");
  EXPECT_EQ(o.output[2]["name"], "g");
  EXPECT_EQ(o.output[2]["status"], "incomplete");
  EXPECT_TRUE(o.has_call());
}

}  // namespace
}  // namespace mx::server
