// ChatDecoder: model output ids of one chat choice -> streamable deltas (reasoning, content,
// tool-call starts and argument pieces) through the harmony streaming parser in lenient mode,
// with stop strings applied to the visible content.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/harmony_parser.h"
#include "tokenizer/openai_chat.h"
#include "tokenizer/tokenizer.h"

namespace mx::server {

struct ChatDelta {
  openai::DeltaKind kind = openai::DeltaKind::Content;
  std::string text;
  int tool_index = -1;     // ToolArguments: which call
  std::string tool_id;     // set on the first delta of a call (then also tool_name)
  std::string tool_name;
};

enum class StopHit { No, Yes };

class ChatDecoder {
 public:
  static Result<ChatDecoder> create(std::shared_ptr<const Tokenizer> tok, std::vector<std::string> stop);

  // Feeds one generated id; appends what became visible to `out`. Yes when a stop string
  // appeared (the content is cut before it; the request should end).
  StopHit push(int32_t id, std::vector<ChatDelta>& out);
  void finish(std::vector<ChatDelta>& out);  // end of stream

  // Non-streaming result (tool call ids as streamed).
  openai::ChatOutput output(openai::StopReason stop) const;
  int tool_calls() const { return int(tool_ids_.size()); }
  // Generated tokens of analysis-channel messages (their header and end tokens included), the
  // usage's reasoning_tokens; a message cut by the end of the stream counts once finish() ran.
  int64_t reasoning_tokens() const { return reasoning_tokens_; }

 private:
  explicit ChatDecoder(harmony::StreamParser p, std::vector<std::string> stop)
      : parser_(std::move(p)), stop_(std::move(stop)) {}
  StopHit collect(std::vector<ChatDelta>& out);

  harmony::StreamParser parser_;
  std::vector<std::string> stop_;
  std::vector<std::string> tool_ids_;
  size_t tool_message_ = SIZE_MAX;  // messages().size() when the current tool call began
  std::string content_;             // visible content so far (for stop strings)
  std::string reasoning_;
  size_t message_index_ = SIZE_MAX;  // messages().size() while reading the current message
  size_t streamed_ = 0;              // bytes of it streamed so far
  bool stopped_ = false;
  int64_t message_tokens_ = 0;  // tokens fed since the last completed message
  int64_t reasoning_tokens_ = 0;
  void count_completed_message();
};

}  // namespace mx::server
