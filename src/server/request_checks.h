// The checks every request passes before its route runs: the API key (every route but the open
// ones: GET /health, GET /metrics, GET /) compared in constant time over the whole header value,
// and the media type of a POST body (application/json, so that a web page cannot make a browser
// send a cross-site "simple" request that the server would parse as JSON).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"

namespace httplib {
struct Request;
}

namespace mx::server {

// Routes that stay open with --api-key: nothing on them does work for the caller (health, the
// metrics as text and JSON, the web pages and their /assets/ files).
bool is_open_route(std::string_view path);
// Whether `authorization` is exactly "Bearer <key>": every byte compared, whatever differs.
bool key_matches(std::string_view authorization, std::string_view key);
// 401 when a key is set and the request does not carry it (exactly one Authorization header).
std::optional<ApiError> check_api_key(const httplib::Request& req, const std::string& key);
// 415 for a POST whose Content-Type is not application/json (or application/<x>+json).
std::optional<ApiError> check_content_type(const httplib::Request& req);

}  // namespace mx::server
