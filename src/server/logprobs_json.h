// The logprobs fields of responses: chat's {"content": [{token, logprob, bytes, top_logprobs}]}
// and the legacy completions shape {tokens, token_logprobs, top_logprobs, text_offset}.
#pragma once

#include <span>

#include "runtime/request.h"
#include "server/request_params.h"
#include "tokenizer/tokenizer.h"

namespace mx::server {

// Entries of chat's logprobs.content for the ids (lps parallel to ids).
Json chat_logprob_entries(const Tokenizer* tok, std::span<const int32_t> ids, std::span<const TokenLogprob> lps);
// Completions' logprobs object; text_offset counts from `offset0`.
Json completion_logprobs(const Tokenizer* tok, std::span<const int32_t> ids, std::span<const TokenLogprob> lps,
                         size_t offset0);

}  // namespace mx::server
