// Cross-origin access (CORS) and the request id: which browser origins may call the API
// (vLLM's --allowed-origins / --allowed-methods / --allowed-headers / --allow-credentials), the
// answer to a preflight, the Access-Control-* headers of an ordinary response, and X-Request-Id.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "server/api_error.h"

namespace mx::server {

// The methods the server answers (OPTIONS's Allow header, a preflight's grant for "*").
inline constexpr const char* kServedMethods = "GET, POST, DELETE, OPTIONS";

struct CorsPolicy {
  // Exact origins ("https://app.example.com") or "*". Empty (the default): no cross-origin access;
  // a page served by another origin cannot read any response (the server's own page at / is
  // same-origin and needs none).
  std::vector<std::string> origins;
  std::vector<std::string> methods = {"*"};  // "*": every method the server answers
  std::vector<std::string> headers = {"*"};  // "*": whatever the preflight asks for
  bool credentials = false;                  // Access-Control-Allow-Credentials: true

  bool enabled() const { return !origins.empty(); }
  bool allows_origin(const std::string& origin) const;
};

// A flag's value: a JSON list of strings ('["*"]', vLLM's form) or a comma-separated list.
std::variant<std::vector<std::string>, std::string> parse_cors_list(const std::string& value);

struct Header {
  std::string name, value;
};

// The headers for a response to a request with this Origin (none when the origin is absent or
// not allowed).
std::vector<Header> cors_headers(const CorsPolicy& policy, const std::string& origin);

// A preflight (OPTIONS with Origin and Access-Control-Request-Method): the status and headers of
// the answer — 204 with the grants, or 403 with an error when the origin, method or a header is
// not allowed.
struct Preflight {
  int status = 204;
  std::vector<Header> headers;
  std::optional<ApiError> error;
};
Preflight answer_preflight(const CorsPolicy& policy, const std::string& origin, const std::string& method,
                           const std::string& request_headers);

// X-Request-Id: the client's value when it is 1..128 visible ASCII characters, else a new one.
std::string request_id_for(const std::string& sent);

}  // namespace mx::server
