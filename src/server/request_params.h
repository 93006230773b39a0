// Request-body parsing shared by the endpoints: the body as an ordered JSON object, and the
// sampling / limit fields (temperature, top_p, top_k, min_p, seed, max_tokens, n, stop, stream,
// ignore_eos, min_tokens, ...) with type and range checks that become 400 errors.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/request.h"
#include "server/api_error.h"

namespace mx::server {

using Json = nlohmann::ordered_json;

enum class Endpoint { Chat, Completions, Responses };

struct SamplingRequest {
  RequestParams params;               // everything but the prompt and max_tokens
  std::optional<int64_t> max_tokens;  // absent: the rest of the context
  int n = 1;
  bool stream = false, include_usage = false, return_token_ids = false;
  std::vector<std::string> stop;      // stop strings (on the visible text)
};

// Nesting of arrays and objects allowed in a request body by default (--max-json-depth). The
// parser and everything that walks the body (copies, schema rendering, dumps) recurse per level,
// so the depth is checked on the raw text before parsing.
constexpr int kDefaultMaxJsonDepth = 64;
// logit_bias entries and stop_token_ids at most (each is applied or scanned every step).
constexpr size_t kMaxTokenListEntries = 1024;

// The deepest nesting of arrays/objects in JSON text (strings skipped), stopping early once it
// exceeds `limit`: linear in the text, no recursion.
int json_text_depth(std::string_view text, int limit);

// The body parsed as a JSON object; malformed JSON, another type or nesting deeper than
// max_depth is a 400.
std::variant<Json, ApiError> parse_body(const std::string& text, int max_depth = kDefaultMaxJsonDepth);
std::optional<ApiError> parse_sampling(const Json& body, Endpoint endpoint, SamplingRequest& out);
// Parameters this server does not implement, which a client may count on: a 400 naming them
// instead of ignoring them (chat: functions/function_call, text, audio, prediction, modalities
// other than text; completions: suffix, best_of other than n).
std::optional<ApiError> check_unsupported(const Json& body, Endpoint endpoint);
// x as a token id in [0, vocab): nullopt for anything else (never wrapped to 32 bits).
std::optional<int32_t> token_id(const Json& x, int64_t vocab);
// 404 unless `model` is absent or the served name.
std::optional<ApiError> check_model(const Json& body, const std::string& served_name);

}  // namespace mx::server
