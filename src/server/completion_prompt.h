// The prompts of a /v1/completions body: "prompt" as a string, a list of token ids, or a list of
// either; ids outside [0, vocab) are a 400, never wrapped to 32 bits. And "echo", which sends
// each prompt's text back before its completion.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "server/request_params.h"
#include "tokenizer/tokenizer.h"

namespace mx::server {

struct Prompt {
  std::vector<int32_t> ids;
  std::string text;  // for "echo": the string sent, or the ids decoded
};

// tok may be null (a model without tokenizer.json: token ids only).
std::variant<std::vector<Prompt>, ApiError> prompts_of(const Json& body, const Tokenizer* tok, int64_t vocab, bool echo);
// "echo" as a boolean; a 400 with logprobs (prompt logprobs are not computed).
std::variant<bool, ApiError> echo_of(const Json& body, const SamplingRequest& sr);

}  // namespace mx::server
