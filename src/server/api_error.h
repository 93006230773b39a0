// OpenAI-style API errors: the HTTP status and the {"error": {message, type, param, code}} body
// that the openai clients parse, for bad requests, unknown models, auth and context overflow.
#pragma once

#include <nlohmann/json.hpp>

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace mx::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::optional<std::string> param;
  std::optional<std::string> code;
  int retry_after_s = 0;  // > 0: sent as a Retry-After header (503 when the queue is full)

  nlohmann::ordered_json body() const;
};

ApiError bad_request(std::string message, std::optional<std::string> param = std::nullopt);
// A 400 from an error of the layers below: the message without the source locations that
// MX_ERROR adds ("(src/x.cpp:12)"), which are for the log, not for clients; the param is the
// request field the message starts with when it is one of `fields` ("tools[0].function.name
// ..." -> "tools"), else `fallback`.
ApiError bad_request(const Status& status, std::string_view fallback,
                     std::initializer_list<std::string_view> fields = {"messages", "tools", "tool_choice", "response_format"});
// `message` without " (src/...:N)" / " (tests/...:N)" locations.
std::string without_locations(std::string_view message);
ApiError context_length_exceeded(int max_model_len, int64_t prompt_tokens, int64_t max_tokens);
ApiError model_not_found(const std::string& model);
ApiError unauthorized();
ApiError server_error(std::string message);
ApiError overloaded(std::string message);  // 503, Retry-After: 1
ApiError client_closed();                  // 499: the client left before its request ran (nobody reads it)

}  // namespace mx::server
