// The HTTP front's framing checks (#27 items 4 and 10): each request head or chunked body below is
// the exact input that was accepted before, and must now be refused with the right status;
// valid ones pass and come out normalized for cpp-httplib.
#include <gtest/gtest.h>

#include "server/http_parse.h"

namespace mx::server {
namespace {

int status_of(std::string_view head) {
  auto r = parse_request_head(head);
  return std::holds_alternative<HttpError>(r) ? std::get<HttpError>(r).status : 200;
}

constexpr std::string_view kPost = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n";

std::string with(std::string_view fields) { return std::string(kPost) + std::string(fields) + "\r\n"; }

TEST(HttpParse, ValidHeadsParse) {
  auto r = parse_request_head("\r\nGET /health HTTP/1.1\r\nHost: a\r\nX-Y:  v w \t\r\n\r\n");
  ASSERT_TRUE(std::holds_alternative<RequestHead>(r));
  const RequestHead& h = std::get<RequestHead>(r);
  EXPECT_EQ(h.method, "GET");
  EXPECT_EQ(h.target, "/health");
  ASSERT_EQ(h.fields.size(), 2u);
  EXPECT_EQ(h.fields[1].second, "v w");  // OWS trimmed, inner space kept
  EXPECT_EQ(h.framing, BodyFraming::None);
  EXPECT_EQ(status_of(with("Content-Length: 12\r\n")), 200);
  EXPECT_EQ(status_of(with("Content-Length: 12, 12\r\nContent-Length: 12\r\n")), 200);  // the same value repeated
  EXPECT_EQ(status_of(with("Transfer-Encoding: chunked\r\n")), 200);
  EXPECT_EQ(status_of(with("Transfer-Encoding: Chunked\r\nContent-Encoding: identity\r\n")), 200);
  EXPECT_EQ(status_of("GET / HTTP/1.0\r\n\r\n"), 200);  // HTTP/1.0 needs no Host
}

TEST(HttpParse, AmbiguousBodyFramingIsRefused) {
  EXPECT_EQ(status_of(with("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n")), 400);
  EXPECT_EQ(status_of(with("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n")), 400);
  EXPECT_EQ(status_of(with("Content-Length: +5\r\n")), 400);
  EXPECT_EQ(status_of(with("Content-Length: -1\r\n")), 400);
  EXPECT_EQ(status_of(with("Content-Length: 0x10\r\n")), 400);
  EXPECT_EQ(status_of(with("Content-Length: 5 5\r\n")), 400);
  EXPECT_EQ(status_of(with("Content-Length: 5\r\nContent-Length: 6\r\n")), 400);
  EXPECT_EQ(status_of(with("Content-Length: \r\n")), 400);
  EXPECT_EQ(status_of(with("Content-Length: 99999999999999999999\r\n")), 400);
  EXPECT_EQ(status_of(with("Transfer-Encoding: chunked, chunked\r\n")), 400);
  EXPECT_EQ(status_of(with("Transfer-Encoding: gzip\r\n")), 400);  // chunked must come last
  EXPECT_EQ(status_of(with("Transfer-Encoding: identity\r\n")), 400);
  EXPECT_EQ(status_of(with("Transfer-Encoding: \r\n")), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
}

TEST(HttpParse, UnsupportedCodingsAndVersions) {
  EXPECT_EQ(status_of(with("Transfer-Encoding: gzip, chunked\r\n")), 501);
  EXPECT_EQ(status_of(with("Transfer-Encoding: x-custom\r\nTransfer-Encoding: chunked\r\n")), 501);
  EXPECT_EQ(status_of(with("Content-Encoding: gzip\r\nContent-Length: 4\r\n")), 415);
  EXPECT_EQ(status_of(with("Content-Encoding: deflate\r\nContent-Length: 4\r\n")), 415);
  EXPECT_EQ(status_of(with("Content-Encoding: br\r\nContent-Length: 4\r\n")), 415);
  EXPECT_EQ(status_of(with("Expect: something-else\r\n")), 417);
  EXPECT_EQ(status_of("GET / HTTP/2.0\r\nHost: x\r\n\r\n"), 505);
  EXPECT_EQ(status_of("GET / HTTX/1.1\r\nHost: x\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n"), 414);
}

TEST(HttpParse, MalformedFieldsAreRefused) {
  EXPECT_EQ(status_of(with(std::string("Authorization: Bearer k\0junk\r\n", 30))), 400);  // NUL
  EXPECT_EQ(status_of(with("X-A: a\r\n b\r\n")), 400);      // obs-fold
  EXPECT_EQ(status_of(with("X-A : a\r\n")), 400);           // space before the colon
  EXPECT_EQ(status_of(with("X A: a\r\n")), 400);            // not a token
  EXPECT_EQ(status_of(with("no colon\r\n")), 400);
  EXPECT_EQ(status_of(with("X-A: \x7f\r\n")), 400);         // DEL
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\n\r\n"), 400);      // no Host
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET  / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);  // two spaces
  EXPECT_EQ(status_of("GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
}

TEST(HttpParse, HeadEndNeedsCrlf) {
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\r\nHost: a\r\n"), 0u);  // not complete yet
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\r\nHost: a\r\n\r\nrest"), 27u);
  EXPECT_EQ(find_head_end("\r\n\r\nGET / HTTP/1.1\r\n\r\n"), 22u);  // leading empty lines skipped
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\nHost: a\n\n"), std::string_view::npos);
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n"), std::string_view::npos);
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\r"), 0u);  // the LF may still come
}

TEST(HttpParse, NormalizedRequestDropsFramingFields) {
  auto r = parse_request_head(with("Transfer-Encoding: chunked\r\nExpect: 100-continue\r\nX-K: v\r\n"));
  ASSERT_TRUE(std::holds_alternative<RequestHead>(r));
  EXPECT_TRUE(std::get<RequestHead>(r).expect_continue);
  EXPECT_EQ(normalized_request(std::get<RequestHead>(r), "{}"),
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-K: v\r\nContent-Length: 2\r\n\r\n{}");
}

// Feeds `wire` in pieces of `step` bytes; returns the decoder's end state.
ChunkedDecoder::State decode(std::string_view wire, size_t step, std::string& body, size_t max_body = 100,
                             ChunkedDecoder* out = nullptr) {
  ChunkedDecoder local(max_body, 64);
  ChunkedDecoder& d = out ? *out : local;
  std::string buf;
  ChunkedDecoder::State s = ChunkedDecoder::State::NeedMore;
  for (size_t i = 0; i < wire.size() && s == ChunkedDecoder::State::NeedMore; i += step) {
    buf += wire.substr(i, step);
    size_t pos = 0;
    s = d.feed(buf, pos, body);
    buf.erase(0, pos);
  }
  return s;
}

TEST(HttpParse, ChunkedBodyDecodesInAnyPieces) {
  const std::string wire = "5\r\nhello\r\n1;ext=1\r\n \r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n";
  for (size_t step : {1u, 2u, 3u, 7u, 1000u}) {
    std::string body;
    EXPECT_EQ(decode(wire, step, body), ChunkedDecoder::State::Done) << step;
    EXPECT_EQ(body, "hello 0123456789") << step;
  }
}

TEST(HttpParse, ChunkedBodyOverTheLimitOrMalformedIsRefused) {
  ChunkedDecoder d(10, 64);
  std::string body;
  EXPECT_EQ(decode("8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n", 1, body, 10, &d), ChunkedDecoder::State::Failed);
  EXPECT_EQ(d.error().status, 413);
  EXPECT_LE(body.size(), 10u);
  ChunkedDecoder huge(1 << 20, 64);
  EXPECT_EQ(decode("fffffffffffffff\r\n", 1, body, 1 << 20, &huge), ChunkedDecoder::State::Failed);
  EXPECT_EQ(huge.error().status, 413);
  for (std::string_view bad : {"5\r\nhelloX\r\n0\r\n\r\n", "5\nhello\r\n0\r\n\r\n", "x\r\n", "5 6\r\nhello\r\n",
                               "1ffffffffffffffff\r\n", "5\r\nhello\r\n0\r\n\r\r\n"}) {
    ChunkedDecoder b(1 << 20, 64);
    std::string out;
    EXPECT_EQ(decode(bad, 1, out, 1 << 20, &b), ChunkedDecoder::State::Failed) << bad;
    EXPECT_EQ(b.error().status, 400) << bad;
  }
  ChunkedDecoder t(100, 64);
  EXPECT_EQ(decode("0\r\n" + std::string(40, 'a') + ": b\r\n" + std::string(40, 'a') + ": b\r\n\r\n", 5, body, 100, &t),
            ChunkedDecoder::State::Failed);
  EXPECT_EQ(t.error().status, 431);  // trailers count against the header limit
}

}  // namespace
}  // namespace mx::server
