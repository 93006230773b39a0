// CORS policy (cors.h): the flag lists (JSON or comma-separated), which origins get headers, the
// preflight's grants and refusals, credentials (the origin echoed, never "*"), and X-Request-Id.
#include <gtest/gtest.h>

#include "server/cors.h"

namespace mx::server {
namespace {

std::string header(const std::vector<Header>& hs, const std::string& name) {
  for (const Header& h : hs)
    if (h.name == name) return h.value;
  return "<absent>";
}

std::vector<std::string> list(const std::string& v) { return std::get<std::vector<std::string>>(parse_cors_list(v)); }

TEST(Cors, FlagListsAreJsonOrCommaSeparated) {
  EXPECT_EQ(list(R"(["*"])"), std::vector<std::string>{"*"});
  EXPECT_EQ(list(R"([" https://a.example ", "http://localhost:3000"])"),
            (std::vector<std::string>{"https://a.example", "http://localhost:3000"}));
  EXPECT_EQ(list("GET, POST,,OPTIONS "), (std::vector<std::string>{"GET", "POST", "OPTIONS"}));
  EXPECT_TRUE(list("").empty());
  EXPECT_TRUE(std::holds_alternative<std::string>(parse_cors_list(R"(["a", 1])")));
  EXPECT_TRUE(std::holds_alternative<std::string>(parse_cors_list(R"(["a")")));
}

TEST(Cors, OnlyAllowedOriginsGetHeaders) {
  const CorsPolicy off;
  EXPECT_FALSE(off.enabled());
  EXPECT_TRUE(cors_headers(off, "https://a.example").empty());
  const CorsPolicy one{.origins = {"https://a.example"}};
  EXPECT_EQ(header(cors_headers(one, "https://a.example"), "Access-Control-Allow-Origin"), "https://a.example");
  EXPECT_EQ(header(cors_headers(one, "HTTPS://A.EXAMPLE"), "Access-Control-Allow-Origin"), "HTTPS://A.EXAMPLE");
  EXPECT_EQ(header(cors_headers(one, "https://a.example"), "Vary"), "Origin");
  EXPECT_TRUE(cors_headers(one, "https://a.example.evil").empty());
  EXPECT_TRUE(cors_headers(one, "").empty());
  const CorsPolicy any{.origins = {"*"}};
  EXPECT_EQ(header(cors_headers(any, "https://b.example"), "Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(header(cors_headers(any, "https://b.example"), "Vary"), "<absent>");
  const CorsPolicy creds{.origins = {"*"}, .credentials = true};  // browsers refuse "*" with credentials
  EXPECT_EQ(header(cors_headers(creds, "https://b.example"), "Access-Control-Allow-Origin"), "https://b.example");
  EXPECT_EQ(header(cors_headers(creds, "https://b.example"), "Access-Control-Allow-Credentials"), "true");
}

TEST(Cors, PreflightGrantsWhatIsAllowedAndRefusesTheRest) {
  const CorsPolicy p{.origins = {"https://a.example"}, .methods = {"GET", "POST"}, .headers = {"Authorization", "Content-Type"}};
  const Preflight ok = answer_preflight(p, "https://a.example", "post", "content-type, authorization");
  EXPECT_EQ(ok.status, 204);
  EXPECT_FALSE(ok.error);
  EXPECT_EQ(header(ok.headers, "Access-Control-Allow-Methods"), "GET, POST");
  EXPECT_EQ(header(ok.headers, "Access-Control-Allow-Headers"), "Authorization, Content-Type");
  EXPECT_NE(header(ok.headers, "Access-Control-Max-Age"), "<absent>");
  for (const auto& [origin, method, headers] : {std::tuple{"https://b.example", "POST", ""},
                                               std::tuple{"https://a.example", "DELETE", ""},
                                               std::tuple{"https://a.example", "POST", "x-api-key"}}) {
    const Preflight no = answer_preflight(p, origin, method, headers);
    EXPECT_EQ(no.status, 403) << origin << " " << method << " " << headers;
    ASSERT_TRUE(no.error);
    EXPECT_EQ(header(no.headers, "Access-Control-Allow-Origin"), "<absent>");
  }
  const CorsPolicy wide{.origins = {"*"}};  // methods and headers "*": the served methods, the asked headers
  const Preflight w = answer_preflight(wide, "https://c.example", "POST", "authorization,x-stainless-os");
  EXPECT_EQ(w.status, 204);
  EXPECT_EQ(header(w.headers, "Access-Control-Allow-Methods"), "GET, POST, DELETE, OPTIONS");
  EXPECT_EQ(header(w.headers, "Access-Control-Allow-Headers"), "authorization,x-stainless-os");
}

TEST(Cors, RequestIdIsEchoedWhenUsable) {
  EXPECT_EQ(request_id_for("abc-123_x.y"), "abc-123_x.y");
  for (const std::string bad : {std::string(""), std::string(129, 'a'), std::string("a b"), std::string("a\x7f"),
                                std::string("caf\xc3\xa9")}) {
    const std::string id = request_id_for(bad);
    EXPECT_TRUE(id.starts_with("req_") && id.size() == 28) << id;
  }
  EXPECT_NE(request_id_for(""), request_id_for(""));
}

}  // namespace
}  // namespace mx::server
