// The body of POST /v1/responses as a chat-completions body, so that responses share the chat
// pipeline (prompt rendering, decoding); every field checked, wrong types and unsupported values
// are 400s naming the responses field (input, tools, text, reasoning, ...).
#pragma once

#include <variant>

#include "server/request_params.h"

namespace mx::server {

std::variant<Json, ApiError> responses_to_chat_body(const Json& body);

}  // namespace mx::server
