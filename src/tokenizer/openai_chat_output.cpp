// Parsed harmony output -> OpenAI assistant message fields: reasoning (analysis), content (final
// and commentary preambles), tool_calls (functions.* recipients) and finish_reason.
#include <random>

#include "tokenizer/openai_chat.h"

namespace mx::openai {

namespace {

constexpr std::string_view kFunctionsPrefix = "functions.";

void append_paragraph(std::string& to, const std::string& text) {
  if (text.empty()) return;
  if (!to.empty()) to += "\n";
  to += text;
}

}  // namespace

DeltaKind delta_kind(const std::optional<std::string>& channel, const std::optional<std::string>& recipient) {
  if (recipient && *recipient != "all" && *recipient != "assistant") {
    return recipient->starts_with(kFunctionsPrefix) ? DeltaKind::ToolArguments : DeltaKind::Hidden;
  }
  if (channel && *channel == "analysis") return DeltaKind::Reasoning;
  return DeltaKind::Content;  // final, a commentary preamble, or a salvaged message without channel
}

std::string make_call_id(uint64_t seed) {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::mt19937_64 rng(seed != 0 ? seed : (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}());
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
  return id;
}

ChatOutput harmony_to_chat(std::span<const harmony::Message> messages, const OutputOptions& options) {
  ChatOutput out;
  for (const harmony::Message& m : messages) {
    if (m.author.role != harmony::Role::Assistant) continue;  // the model wrote a tool's turn: ignore
    switch (delta_kind(m.channel, m.recipient)) {
      case DeltaKind::Reasoning:
        append_paragraph(out.reasoning, m.text());
        break;
      case DeltaKind::Content:
        append_paragraph(out.content, m.text());
        break;
      case DeltaKind::ToolArguments: {
        const uint64_t seed = options.id_seed ? options.id_seed + out.tool_calls.size() : 0;
        out.tool_calls.push_back(ToolCall{.id = make_call_id(seed),
                                          .name = m.recipient->substr(kFunctionsPrefix.size()),
                                          .arguments = m.text()});
        break;
      }
      case DeltaKind::Hidden:
        break;
    }
  }
  if (options.stop == StopReason::Length) {
    out.finish_reason = "length";
  } else {
    out.finish_reason = out.tool_calls.empty() ? "stop" : "tool_calls";
  }
  return out;
}

nlohmann::json ChatOutput::to_message_json() const {
  nlohmann::json j = {{"role", "assistant"}};
  j["content"] = content.empty() && !tool_calls.empty() ? nlohmann::json(nullptr) : nlohmann::json(content);
  if (!reasoning.empty()) j["reasoning_content"] = reasoning;
  if (!tool_calls.empty()) {
    nlohmann::json calls = nlohmann::json::array();
    for (const ToolCall& c : tool_calls)
      calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    j["tool_calls"] = std::move(calls);
  }
  return j;
}

}  // namespace mx::openai
