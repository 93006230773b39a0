// ApiError bodies and the standard errors, worded as OpenAI / vLLM word them.
#include "server/api_error.h"

#include <fmt/format.h>

#include <initializer_list>

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

namespace {

// "src/x/y.cpp:12": a path without spaces, a colon, a line number.
bool is_location(std::string_view s) {
  const size_t colon = s.rfind(':');
  return colon != std::string_view::npos && colon + 1 < s.size() && s.find(' ') == std::string_view::npos &&
         s.substr(colon + 1).find_first_not_of("0123456789") == std::string_view::npos;
}

}  // namespace

std::string without_locations(std::string_view m) {
  constexpr size_t kMaxLocation = 160;  // bounds the search for ')' so that crafted text stays linear
  std::string out;
  out.reserve(m.size());
  for (size_t i = 0; i < m.size();) {
    if (m.substr(i).starts_with(" (src/") || m.substr(i).starts_with(" (tests/")) {
      const size_t close = m.substr(i, kMaxLocation).find(')');
      if (close != std::string_view::npos && is_location(m.substr(i + 2, close - 2))) {
        i += close + 1;
        continue;
      }
    }
    out += m[i++];
  }
  return out;
}

ApiError bad_request(const Status& status, std::string_view fallback, std::initializer_list<std::string_view> fields) {
  std::string message = without_locations(status.message());
  std::string_view lead = message;
  lead = lead.substr(0, lead.find_first_of("[. '"));
  std::optional<std::string> param;
  if (!fallback.empty()) param = std::string(fallback);
  for (std::string_view f : fields)
    if (lead == f) param = std::string(f);
  return bad_request(std::move(message), std::move(param));
}

ApiError context_length_exceeded(int max_model_len, int64_t prompt_tokens, int64_t max_tokens) {
  std::string msg = fmt::format(
      "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the messages, {} in "
      "the completion). Please reduce the length of the messages or completion.",
      max_model_len, prompt_tokens + max_tokens, prompt_tokens, max_tokens);
  return {.status = 400, .message = std::move(msg), .param = "messages", .code = "context_length_exceeded"};
}

ApiError client_closed() {
  return {.status = 499, .message = "The client closed the connection before the request ran.", .type = "cancelled"};
}

ApiError model_not_found(const std::string& model) {
  return {.status = 404, .message = fmt::format("The model `{}` does not exist.", model), .param = "model",
          .code = "model_not_found"};
}

ApiError unauthorized() {
  return {.status = 401, .message = "Incorrect API key provided. Pass it as 'Authorization: Bearer <key>'.",
          .code = "invalid_api_key"};
}

ApiError overloaded(std::string message) {
  return {.status = 503, .message = std::move(message), .type = "service_unavailable", .retry_after_s = 1};
}

ApiError server_error(std::string message) {
  return {.status = 500, .message = std::move(message), .type = "server_error"};
}

}  // namespace mx::server
