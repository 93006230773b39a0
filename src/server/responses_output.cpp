// ResponseOutput (responses_output.h).
#include "server/responses_output.h"

#include "server/server.h"
#include "server/sse.h"

namespace mx::server {

using openai::DeltaKind;

std::string ResponseOutput::event(const std::string& type, Json data) {
  Json e = {{"type", type}, {"sequence_number", seq++}};
  for (auto& [k, v] : data.items()) e[k] = v;
  return sse_event(type, e.dump());
}

std::string ResponseOutput::on_delta(const ChatDelta& d) {
  std::string out;
  const Kind want = d.kind == DeltaKind::Reasoning ? Kind::Reasoning : d.kind == DeltaKind::ToolArguments ? Kind::Call : Kind::Message;
  if (open_ != want || (want == Kind::Call && !d.tool_id.empty())) {
    out += close();  // in this order: the closing events come first
    out += open(want, d);
  }
  text_ += d.text;
  if (d.text.empty()) return out;
  const size_t idx = output.size();
  if (want == Kind::Reasoning) {
    out += event("response.reasoning_text.delta", {{"item_id", item_["id"]}, {"output_index", idx}, {"content_index", 0}, {"delta", d.text}});
    if (summarize)
      out += event("response.reasoning_summary_text.delta", {{"item_id", item_["id"]}, {"output_index", idx}, {"summary_index", 0}, {"delta", d.text}});
  } else if (want == Kind::Message)
    out += event("response.output_text.delta", {{"item_id", item_["id"]}, {"output_index", idx}, {"content_index", 0}, {"delta", d.text}, {"logprobs", Json::array()}});
  else
    out += event("response.function_call_arguments.delta", {{"item_id", item_["id"]}, {"output_index", idx}, {"delta", d.text}});
  return out;
}

std::string ResponseOutput::close(bool truncated) {
  if (open_ == Kind::None) return "";
  const char* status = truncated ? "incomplete" : "completed";
  std::string out;
  const size_t idx = output.size();
  const Json id = item_["id"];
  if (open_ == Kind::Reasoning) {
    Json part = {{"type", "reasoning_text"}, {"text", text_}};
    out += event("response.reasoning_text.done", {{"item_id", id}, {"output_index", idx}, {"content_index", 0}, {"text", text_}});
    out += event("response.content_part.done", {{"item_id", id}, {"output_index", idx}, {"content_index", 0}, {"part", part}});
    item_["content"] = Json::array({part});
    if (summarize) {
      const Json summary = {{"type", "summary_text"}, {"text", text_}};
      out += event("response.reasoning_summary_text.done", {{"item_id", id}, {"output_index", idx}, {"summary_index", 0}, {"text", text_}});
      out += event("response.reasoning_summary_part.done", {{"item_id", id}, {"output_index", idx}, {"summary_index", 0}, {"part", summary}});
      item_["summary"] = Json::array({summary});
    }
    if (sealer) item_["encrypted_content"] = sealer->seal(text_);
  } else if (open_ == Kind::Message) {
    Json part = {{"type", "output_text"}, {"text", text_}, {"annotations", Json::array()}, {"logprobs", Json::array()}};
    out += event("response.output_text.done", {{"item_id", id}, {"output_index", idx}, {"content_index", 0}, {"text", text_}, {"logprobs", Json::array()}});
    out += event("response.content_part.done", {{"item_id", id}, {"output_index", idx}, {"content_index", 0}, {"part", part}});
    item_["content"] = Json::array({part});
    item_["status"] = status;
  } else {
    out += event("response.function_call_arguments.done", {{"item_id", id}, {"output_index", idx}, {"arguments", text_}});
    item_["arguments"] = text_;
    item_["status"] = status;
  }
  out += event("response.output_item.done", {{"output_index", idx}, {"item", item_}});
  output.push_back(std::move(item_));
  open_ = Kind::None;
  text_.clear();
  return out;
}

bool ResponseOutput::has_call() const {
  for (const Json& it : output) if (it["type"] == "function_call") return true;
  return false;
}

std::string ResponseOutput::open(Kind k, const ChatDelta& d) {
  open_ = k;
  const size_t idx = output.size();
  if (k == Kind::Reasoning) item_ = {{"id", random_id("rs_")}, {"type", "reasoning"}, {"summary", Json::array()}, {"content", Json::array()}};
  else if (k == Kind::Message) item_ = {{"id", random_id("msg_")}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"}, {"content", Json::array()}};
  else item_ = {{"id", random_id("fc_")}, {"type", "function_call"}, {"status", "in_progress"}, {"call_id", d.tool_id.empty() ? random_id("call_") : d.tool_id}, {"name", d.tool_name}, {"arguments", ""}};
  std::string out = event("response.output_item.added", {{"output_index", idx}, {"item", item_}});
  if (k == Kind::Reasoning) {
    out += event("response.content_part.added", {{"item_id", item_["id"]}, {"output_index", idx}, {"content_index", 0}, {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
    if (summarize)
      out += event("response.reasoning_summary_part.added", {{"item_id", item_["id"]}, {"output_index", idx}, {"summary_index", 0}, {"part", {{"type", "summary_text"}, {"text", ""}}}});
  } else if (k == Kind::Message)
    out += event("response.content_part.added", {{"item_id", item_["id"]}, {"output_index", idx}, {"content_index", 0}, {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}}}});
  return out;
}
}  // namespace mx::server
