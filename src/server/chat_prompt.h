// The chat prompt of a request body: OpenAI messages/tools/reasoning_effort -> harmony (with
// today's date and any response_format) -> token ids, plus max_tokens and the end ids; shared by
// /v1/chat/completions and /v1/responses.
#pragma once

#include <optional>
#include <vector>

#include "server/request_params.h"
#include "server/server.h"

namespace mx::server {

// Fills prompt_ids, sr.params.max_tokens and sr.params.eos_ids; a 400 on bad input or overflow.
std::optional<ApiError> prepare_chat_prompt(const ServerContext& ctx, const Json& chat_body, SamplingRequest& sr,
                                            std::vector<int32_t>& prompt_ids);

}  // namespace mx::server
