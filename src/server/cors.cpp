// CORS policy and X-Request-Id (cors.h).
#include "server/cors.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "server/server.h"

namespace mx::server {
namespace {

constexpr int kPreflightMaxAgeS = 600;

std::string trim(std::string s) {
  const auto sp = [](unsigned char c) { return std::isspace(c) != 0; };
  s.erase(s.begin(), std::find_if_not(s.begin(), s.end(), sp));
  s.erase(std::find_if_not(s.rbegin(), s.rend(), sp).base(), s.end());
  return s;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

bool has_star(const std::vector<std::string>& list) { return std::find(list.begin(), list.end(), "*") != list.end(); }

bool contains_ci(const std::vector<std::string>& list, const std::string& v) {
  const std::string l = lower(v);
  return std::any_of(list.begin(), list.end(), [&](const std::string& x) { return x == "*" || lower(x) == l; });
}

std::string joined(const std::vector<std::string>& list) {
  std::string out;
  for (const auto& x : list) out += (out.empty() ? "" : ", ") + x;
  return out;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = std::min(s.find(',', start), s.size());
    if (std::string item = trim(s.substr(start, end - start)); !item.empty()) out.push_back(std::move(item));
    start = end + 1;
  }
  return out;
}

ApiError forbidden(const std::string& message) {
  return ApiError{.status = 403, .message = message, .type = "invalid_request_error"};
}

}  // namespace

bool CorsPolicy::allows_origin(const std::string& origin) const {
  return !origin.empty() && contains_ci(origins, origin);
}

std::variant<std::vector<std::string>, std::string> parse_cors_list(const std::string& value) {
  const std::string v = trim(value);
  if (!v.starts_with("[")) return split_commas(v);
  const nlohmann::json j = nlohmann::json::parse(v, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return std::string("not a JSON list of strings: " + v);
  std::vector<std::string> out;
  for (const auto& x : j) {
    if (!x.is_string()) return std::string("not a JSON list of strings: " + v);
    if (std::string s = trim(x.get<std::string>()); !s.empty()) out.push_back(std::move(s));
  }
  return out;
}

std::vector<Header> cors_headers(const CorsPolicy& policy, const std::string& origin) {
  if (!policy.allows_origin(origin)) return {};
  // With credentials the origin is echoed (browsers refuse "*" then); an echoed origin varies by request.
  std::vector<Header> h;
  if (has_star(policy.origins) && !policy.credentials) {
    h.push_back({"Access-Control-Allow-Origin", "*"});
  } else {
    h.push_back({"Access-Control-Allow-Origin", origin});
    h.push_back({"Vary", "Origin"});
  }
  if (policy.credentials) h.push_back({"Access-Control-Allow-Credentials", "true"});
  h.push_back({"Access-Control-Expose-Headers", "X-Request-Id, Retry-After"});
  return h;
}

Preflight answer_preflight(const CorsPolicy& policy, const std::string& origin, const std::string& method,
                           const std::string& request_headers) {
  Preflight p;
  if (!policy.allows_origin(origin)) {
    p.status = 403;
    p.error = forbidden("Cross-origin requests from '" + origin + "' are not allowed (--allowed-origins).");
    return p;
  }
  if (!contains_ci(policy.methods, method)) {
    p.status = 403;
    p.error = forbidden("Cross-origin method '" + method + "' is not allowed (--allowed-methods).");
    return p;
  }
  for (const std::string& h : split_commas(request_headers)) {
    if (!contains_ci(policy.headers, h)) {
      p.status = 403;
      p.error = forbidden("Cross-origin request header '" + h + "' is not allowed (--allowed-headers).");
      return p;
    }
  }
  p.headers = cors_headers(policy, origin);
  p.headers.push_back({"Access-Control-Allow-Methods", has_star(policy.methods) ? kServedMethods : joined(policy.methods)});
  const bool any_header = has_star(policy.headers);
  // "*" is no wildcard for Authorization in browsers: grant exactly what was asked.
  if (!request_headers.empty())
    p.headers.push_back({"Access-Control-Allow-Headers", any_header ? trim(request_headers) : joined(policy.headers)});
  p.headers.push_back({"Access-Control-Max-Age", std::to_string(kPreflightMaxAgeS)});
  return p;
}

std::string request_id_for(const std::string& sent) {
  const bool ok = !sent.empty() && sent.size() <= 128 &&
                  std::all_of(sent.begin(), sent.end(), [](unsigned char c) { return c > 0x20 && c < 0x7f; });
  return ok ? sent : random_id("req_");
}

}  // namespace mx::server
