// ResponseOutput: the chat deltas of one /v1/responses generation (chat_decoder.h) as Responses
// output items — reasoning (with its summary when asked, and its text sealed when asked), message,
// function_call — and, for streaming, the response.* events that build them, numbered in order.
#pragma once

#include <string>

#include "server/chat_decoder.h"
#include "server/request_params.h"
#include "server/sealer.h"

namespace mx::server {

class ResponseOutput {
 public:
  Json output = Json::array();
  int seq = 0;
  const Sealer* sealer = nullptr;  // set: reasoning items carry their text sealed (include: reasoning.encrypted_content)
  bool summarize = false;          // reasoning.summary set: the analysis text is also the item's summary

  std::string event(const std::string& type, Json data);  // one SSE event, sequence-numbered

  // The events for one delta: the open item closed and a new one opened when the kind changes
  // (or a new call starts), then the text delta.
  std::string on_delta(const ChatDelta& d);

  // Closes the open item; `truncated` (max_output_tokens reached) marks a message or call incomplete.
  std::string close(bool truncated = false);

  bool has_call() const;  // a function_call item was output

 private:
  enum class Kind { None, Reasoning, Message, Call };

  std::string open(Kind k, const ChatDelta& d);

  Kind open_ = Kind::None;
  Json item_;
  std::string text_;
};

}  // namespace mx::server
