// The chat prompt of a request body: OpenAI messages/tools/reasoning_effort -> harmony (with
// today's date and any response_format) -> token ids, plus max_tokens and the end ids; shared by
// /v1/chat/completions, /v1/responses and /tokenize.
#pragma once

#include <optional>
#include <variant>
#include <vector>

#include "server/request_params.h"
#include "server/server.h"

namespace mx::server {

// The rendered prompt's token ids; a 400 on bad input.
std::variant<std::vector<int32_t>, ApiError> chat_prompt_ids(const ServerContext& ctx, const Json& chat_body);
// Fills prompt_ids, sr.params.max_tokens and sr.params.eos_ids; a 400 on bad input or overflow.
std::optional<ApiError> prepare_chat_prompt(const ServerContext& ctx, const Json& chat_body, SamplingRequest& sr,
                                            std::vector<int32_t>& prompt_ids);

}  // namespace mx::server
