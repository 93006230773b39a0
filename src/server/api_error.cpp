// ApiError bodies and the standard errors, worded as OpenAI / vLLM word them.
#include "server/api_error.h"

#include <fmt/format.h>

namespace mx::server {

nlohmann::ordered_json ApiError::body() const {
  nlohmann::ordered_json e = {{"message", message}, {"type", type}};
  e["param"] = param ? nlohmann::ordered_json(*param) : nlohmann::ordered_json(nullptr);
  e["code"] = code ? nlohmann::ordered_json(*code) : nlohmann::ordered_json(nullptr);
  return {{"error", e}};
}

ApiError bad_request(std::string message, std::optional<std::string> param) {
  return {.status = 400, .message = std::move(message), .param = std::move(param)};
}

ApiError context_length_exceeded(int max_model_len, int64_t prompt_tokens, int64_t max_tokens) {
  std::string msg = fmt::format(
      "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the messages, {} in "
      "the completion). Please reduce the length of the messages or completion.",
      max_model_len, prompt_tokens + max_tokens, prompt_tokens, max_tokens);
  return {.status = 400, .message = std::move(msg), .param = "messages", .code = "context_length_exceeded"};
}

ApiError model_not_found(const std::string& model) {
  return {.status = 404, .message = fmt::format("The model `{}` does not exist.", model), .param = "model",
          .code = "model_not_found"};
}

ApiError unauthorized() {
  return {.status = 401, .message = "Incorrect API key provided. Pass it as 'Authorization: Bearer <key>'.",
          .code = "invalid_api_key"};
}

ApiError server_error(std::string message) {
  return {.status = 500, .message = std::move(message), .type = "server_error"};
}

}  // namespace mx::server
