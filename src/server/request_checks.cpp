// API key and Content-Type checks of the pre-routing handler.
#include "server/request_checks.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>

namespace mx::server {

bool is_open_route(std::string_view path) {
  // The web pages and their files are static; the pages send the key the user types.
  const bool asset = path.starts_with("/assets/") && path.find("..") == std::string_view::npos;
  return path == "/health" || path == "/metrics" || path == "/metrics.json" || path == "/" || path == "/dashboard" || asset;
}

bool key_matches(std::string_view authorization, std::string_view key) {
  const std::string expected = "Bearer " + std::string(key);
  // The time taken depends on the sent length only, never on how much of the key was right.
  unsigned diff = authorization.size() != expected.size() ? 1u : 0u;
  for (size_t i = 0; i < authorization.size(); ++i)
    diff |= unsigned(static_cast<unsigned char>(authorization[i]) ^ static_cast<unsigned char>(expected[i % expected.size()]));
  return diff == 0;
}

std::optional<ApiError> check_api_key(const httplib::Request& req, const std::string& key) {
  // OPTIONS does no work (it lists methods, or answers a CORS preflight, which browsers send
  // without credentials).
  if (key.empty() || req.method == "OPTIONS" || is_open_route(req.path)) return std::nullopt;
  // Read the header itself: Request::get_header_value goes through a C string, so a value with a
  // NUL byte ("Bearer <key>\0junk") would be cut at the NUL.
  const auto [first, last] = req.headers.equal_range("Authorization");
  if (std::distance(first, last) == 1 && key_matches(first->second, key)) return std::nullopt;
  return unauthorized();
}

std::optional<ApiError> check_content_type(const httplib::Request& req) {
  if (req.method != "POST") return std::nullopt;
  const auto it = req.headers.find("Content-Type");
  std::string type = it == req.headers.end() ? "" : it->second.substr(0, it->second.find(';'));
  type.erase(std::remove_if(type.begin(), type.end(), [](unsigned char c) { return std::isspace(c); }), type.end());
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (type == "application/json" || (type.starts_with("application/") && type.ends_with("+json"))) return std::nullopt;
  ApiError e = bad_request(type.empty() ? "The request has no Content-Type: send the JSON body as application/json."
                                        : "Content-Type '" + type + "' is not supported: send the JSON body as application/json.");
  e.status = 415;
  return e;
}

}  // namespace mx::server
