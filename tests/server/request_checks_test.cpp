// The pre-routing checks (#27 items 8 and 9): the API key must match the whole Authorization
// value (a NUL and junk after the key is refused), covers every route but the open three, and a
// POST body must be declared application/json.
#include <gtest/gtest.h>

#include <httplib.h>

#include "server/request_checks.h"

namespace mx::server {
namespace {

httplib::Request request(std::string method, std::string path, httplib::Headers headers) {
  httplib::Request r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.headers = std::move(headers);
  return r;
}

TEST(RequestChecks, KeyMustMatchTheWholeHeaderValue) {
  EXPECT_TRUE(key_matches("Bearer secret", "secret"));
  EXPECT_FALSE(key_matches(std::string("Bearer secret\0junk", 18), "secret"));
  EXPECT_FALSE(key_matches("Bearer secretjunk", "secret"));
  EXPECT_FALSE(key_matches("Bearer secre", "secret"));
  EXPECT_FALSE(key_matches("Bearer Secret", "secret"));
  EXPECT_FALSE(key_matches("secret", "secret"));
  EXPECT_FALSE(key_matches("", "secret"));
}

TEST(RequestChecks, KeyCoversEveryRouteThatDoesWork) {
  const httplib::Headers none;
  const httplib::Headers good = {{"Authorization", "Bearer k"}};
  const httplib::Headers nul = {{"Authorization", std::string("Bearer k\0junk", 13)}};
  const httplib::Headers two = {{"Authorization", "Bearer k"}, {"Authorization", "Bearer x"}};
  for (const char* path : {"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/models", "/tokenize",
                           "/detokenize", "/no/such/route", "/v1/../tokenize", "/assets/../tokenize", "/server_info"}) {
    EXPECT_TRUE(check_api_key(request("POST", path, none), "k").has_value()) << path;
    EXPECT_EQ(check_api_key(request("POST", path, nul), "k")->status, 401) << path;
    EXPECT_TRUE(check_api_key(request("POST", path, two), "k").has_value()) << path;
    EXPECT_FALSE(check_api_key(request("POST", path, good), "k").has_value()) << path;
  }
  for (const char* path : {"/health", "/metrics", "/", "/metrics.json", "/dashboard", "/assets/chat.js"})
    EXPECT_FALSE(check_api_key(request("GET", path, none), "k")) << path;
  EXPECT_FALSE(check_api_key(request("POST", "/tokenize", none), ""));  // no key set: open
}

TEST(RequestChecks, PostBodiesMustBeJson) {
  for (const char* type : {"application/json", "application/json; charset=utf-8", "Application/JSON",
                           "application/vnd.api+json"})
    EXPECT_FALSE(check_content_type(request("POST", "/tokenize", {{"Content-Type", type}}))) << type;
  for (const char* type : {"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                           "multipart/form-data; boundary=x", "application/jsonx", ""}) {
    auto e = check_content_type(request("POST", "/tokenize", {{"Content-Type", type}}));
    ASSERT_TRUE(e) << type;
    EXPECT_EQ(e->status, 415) << type;
  }
  EXPECT_EQ(check_content_type(request("POST", "/tokenize", {}))->status, 415);  // none at all
  EXPECT_FALSE(check_content_type(request("GET", "/v1/models", {})));
}

}  // namespace
}  // namespace mx::server
