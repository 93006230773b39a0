// ChatDecoder: classify each parser delta by its message's channel and recipient.
#include "server/chat_decoder.h"

namespace mx::server {

using openai::DeltaKind;

Result<ChatDecoder> ChatDecoder::create(std::shared_ptr<const Tokenizer> tok, std::vector<std::string> stop) {
  MX_ASSIGN(harmony::StreamParser p,
            harmony::StreamParser::create(std::move(tok), {.role = harmony::Role::Assistant,
                                                          .mode = harmony::ParseMode::Lenient}));
  return ChatDecoder(std::move(p), std::move(stop));
}

StopHit ChatDecoder::push(int32_t id, std::vector<ChatDelta>& out) {
  if (stopped_) return StopHit::Yes;
  (void)parser_.push(id);  // lenient: never an error
  ++message_tokens_;
  count_completed_message();
  return collect(out);
}

void ChatDecoder::finish(std::vector<ChatDelta>& out) {
  if (stopped_) return;
  (void)parser_.finish();
  count_completed_message();
  collect(out);
}

void ChatDecoder::count_completed_message() {
  if (!parser_.last_push_completed_message() || parser_.messages().empty()) return;
  if (parser_.messages().back().channel == "analysis") reasoning_tokens_ += message_tokens_;
  message_tokens_ = 0;
}

StopHit ChatDecoder::collect(std::vector<ChatDelta>& out) {
  const harmony::Message* cur = parser_.current();
  // The header of the message being read, or of the one just completed by this push. A completed
  // message sends whatever of its text was not streamed yet (a salvaged header, in lenient mode).
  std::optional<std::string> channel, recipient;
  std::string delta;
  size_t msg = 0;  // index of the message in messages() (once complete)
  if (parser_.last_push_completed_message() && !parser_.messages().empty()) {
    const harmony::Message& m = parser_.messages().back();
    msg = parser_.messages().size() - 1;
    if (parser_.messages().size() - 1 != message_index_) streamed_ = 0;
    channel = m.channel;
    recipient = m.recipient;
    delta = m.text().size() > streamed_ ? m.text().substr(streamed_) : "";
    message_index_ = SIZE_MAX;
    streamed_ = 0;
  } else if (cur) {
    if (parser_.messages().size() != message_index_) {
      message_index_ = parser_.messages().size();
      streamed_ = 0;
    }
    msg = parser_.messages().size();
    channel = cur->channel;
    recipient = cur->recipient;
    delta = parser_.last_content_delta();
    streamed_ += delta.size();
  } else {
    return StopHit::No;
  }
  const DeltaKind kind = openai::delta_kind(channel, recipient);
  ChatDelta d{.kind = kind, .text = delta};
  if (kind == DeltaKind::ToolArguments) {
    if (msg != tool_message_) {
      tool_message_ = msg;
      tool_ids_.push_back(openai::make_call_id(0));
      d.tool_id = tool_ids_.back();
      d.tool_name = recipient->substr(std::string_view("functions.").size());
    }
    d.tool_index = int(tool_ids_.size()) - 1;
    if (d.text.empty() && d.tool_id.empty()) return StopHit::No;
    out.push_back(std::move(d));
    return StopHit::No;
  }
  if (d.text.empty() || kind == DeltaKind::Hidden) return StopHit::No;
  if (kind == DeltaKind::Reasoning) {
    reasoning_ += d.text;
    out.push_back(std::move(d));
    return StopHit::No;
  }
  const size_t before = content_.size();
  content_ += d.text;
  for (const std::string& s : stop_) {
    // Search only where a new match can be: the new text and up to s.size() - 1 bytes before it.
    const size_t from = before >= s.size() ? before - s.size() + 1 : 0;
    const size_t at = content_.find(s, from);
    if (at == std::string::npos) continue;
    content_.resize(at);
    stopped_ = true;
    d.text = at > before ? content_.substr(before) : "";
    if (!d.text.empty()) out.push_back(std::move(d));
    return StopHit::Yes;
  }
  out.push_back(std::move(d));
  return StopHit::No;
}

openai::ChatOutput ChatDecoder::output(openai::StopReason stop) const {
  openai::ChatOutput o = openai::harmony_to_chat(parser_.messages(), {.stop = stop});
  if (parser_.current()) {  // a message cut off by max_tokens or a stop string
    std::vector<harmony::Message> all = parser_.messages();
    harmony::Message m = *parser_.current();
    m.content = parser_.current_content();
    all.push_back(std::move(m));
    o = openai::harmony_to_chat(all, {.stop = stop});
  }
  for (size_t i = 0; i < o.tool_calls.size() && i < tool_ids_.size(); ++i) o.tool_calls[i].id = tool_ids_[i];
  if (stopped_) {
    o.content = content_;
    o.finish_reason = "stop";
  }
  return o;
}

}  // namespace mx::server
