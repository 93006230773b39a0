// OpenAI-style API errors: the HTTP status and the {"error": {message, type, param, code}} body
// that the openai clients parse, for bad requests, unknown models, auth and context overflow.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace mx::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::optional<std::string> param;
  std::optional<std::string> code;

  nlohmann::ordered_json body() const;
};

ApiError bad_request(std::string message, std::optional<std::string> param = std::nullopt);
ApiError context_length_exceeded(int max_model_len, int64_t prompt_tokens, int64_t max_tokens);
ApiError model_not_found(const std::string& model);
ApiError unauthorized();
ApiError server_error(std::string message);

}  // namespace mx::server
