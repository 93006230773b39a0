// OpenAI chat-completions <-> harmony: a request body (messages, tools, tool_choice,
// reasoning_effort) becomes a harmony conversation to render for completion; parsed model output
// becomes {content, reasoning, tool_calls, finish_reason}. Bad input gives a Status, never throws.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/harmony.h"

namespace mx::openai {

enum class ToolChoice { Auto, None, Required, Named };

struct ChatOptions {
  std::optional<std::string> conversation_start_date;  // "YYYY-MM-DD"; the server passes today
  std::string model_identity = std::string(harmony::kDefaultModelIdentity);
  std::string knowledge_cutoff = std::string(harmony::kDefaultKnowledgeCutoff);
};

struct ChatPrompt {
  std::vector<harmony::Message> messages;  // system, developer (if any), then the turns
  harmony::ReasoningEffort effort = harmony::ReasoningEffort::Medium;
  ToolChoice tool_choice = ToolChoice::Auto;
  std::optional<std::string> forced_tool;  // ToolChoice::Named: the function name
  std::vector<std::string> tool_names;     // functions offered to the model
};

// OpenAI's rule for function and response-format names, ^[A-Za-z0-9_-]{1,64}$: a name is
// rendered into the harmony header ("to=functions.NAME"), where other characters would shape it.
bool valid_function_name(std::string_view name);

// low/medium/high as is; minimal/none -> low, xhigh/max -> high, anything else -> medium.
harmony::ReasoningEffort map_reasoning_effort(std::string_view value);

// The request body of POST /v1/chat/completions -> harmony conversation. Parse the body as
// ordered_json to keep the key order of tool parameter schemas (they render in that order);
// the nlohmann::json overload sees keys sorted by name.
Result<ChatPrompt> chat_to_harmony(const nlohmann::ordered_json& body, const ChatOptions& options = {});
Result<ChatPrompt> chat_to_harmony(const nlohmann::json& body, const ChatOptions& options = {});

enum class StopReason { Stop, Length };  // why generation ended (stop token / token limit)

struct ToolCall {
  std::string id;         // "call_<24 alphanumerics>"
  std::string name;       // function name without the "functions." prefix
  std::string arguments;  // JSON text as the model wrote it
};

struct ChatOutput {
  std::string content;    // final channel (and commentary preambles)
  std::string reasoning;  // analysis channel
  std::vector<ToolCall> tool_calls;
  std::string finish_reason;  // "stop" | "tool_calls" | "length"

  // {"role": "assistant", "content": ..., "reasoning_content": ..., "tool_calls": [...]}
  nlohmann::json to_message_json() const;
};

struct OutputOptions {
  StopReason stop = StopReason::Stop;
  uint64_t id_seed = 0;  // 0: random call ids; otherwise deterministic (tests)
};

// Parsed model output (the assistant messages of one turn) -> the OpenAI response fields.
ChatOutput harmony_to_chat(std::span<const harmony::Message> messages, const OutputOptions& options = {});

// What a streamed content delta is, by the channel and recipient of its message.
enum class DeltaKind { Reasoning, Content, ToolArguments, Hidden };
DeltaKind delta_kind(const std::optional<std::string>& channel, const std::optional<std::string>& recipient);

std::string make_call_id(uint64_t seed);  // "call_" + 24 alphanumerics; seed 0: random

}  // namespace mx::openai
