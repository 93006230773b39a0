// Guided decoding of a chat request (also /v1/responses, which becomes one): response_format
// json_object / json_schema, tool_choice required or named, and the reasoning budget
// (max_reasoning_tokens, --max-reasoning-tokens) become one HarmonyConstraint on the request.
#pragma once

#include <optional>

#include "server/request_params.h"
#include "server/server.h"
#include "tokenizer/openai_chat.h"

namespace mx::server {

// Sets params.constraint when the request asks for any of the above; a 400 names what cannot be
// enforced (a strict schema with an unsupported keyword, a bad max_reasoning_tokens).
std::optional<ApiError> attach_constraint(const ServerContext& ctx, const Json& body, const openai::ChatPrompt& prompt,
                                          RequestParams& params);

}  // namespace mx::server
