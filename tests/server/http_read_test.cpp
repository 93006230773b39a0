// RequestReader over a socketpair (#27 items 4, 5 and 10): pipelined requests are all read, a
// head trickled slower than the deadline gets 408, bodies over the limit (chunked too) get 413
// before they are read whole, Expect: 100-continue is answered, idle and draining connections end.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "server/http_read.h"

namespace mx::server {
namespace {

using namespace std::chrono_literals;

struct Pair {
  int server = -1, client = -1;
  Pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    server = fds[0];
    client = fds[1];
  }
  ~Pair() {
    ::close(server);
    ::close(client);
  }
  void send(std::string_view s) const { ASSERT_EQ(::write(client, s.data(), s.size()), ssize_t(s.size())); }
  std::string receive() const {
    char buf[4096];
    const ssize_t n = ::recv(client, buf, sizeof buf, MSG_DONTWAIT);
    return n > 0 ? std::string(buf, size_t(n)) : "";
  }
};

HttpLimits small_limits() {
  HttpLimits l;
  l.max_body_bytes = 1000;
  l.max_header_bytes = 512;
  l.header_timeout_s = 1;
  l.body_timeout_s = 1;
  l.keep_alive_timeout_s = 1;
  return l;
}

TEST(HttpRead, PipelinedRequestsAreAllRead) {
  Pair p;
  const HttpLimits limits = small_limits();
  std::atomic<bool> draining{false};
  RequestReader reader(p.server, limits, draining);
  p.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
         "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n[\r\n1\r\n]\r\n0\r\n\r\n");
  const auto a = reader.next(true), b = reader.next(false), c = reader.next(false);
  ASSERT_EQ(a.kind, IncomingRequest::Kind::Request);
  EXPECT_EQ(a.target, "/a");
  ASSERT_EQ(b.kind, IncomingRequest::Kind::Request);
  EXPECT_EQ(b.bytes, "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}");
  ASSERT_EQ(c.kind, IncomingRequest::Kind::Request);
  EXPECT_EQ(c.bytes, "POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n[]");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(reader.next(false).kind, IncomingRequest::Kind::Closed);  // idle past the keep-alive timeout
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 900ms);
}

TEST(HttpRead, TrickledHeadGets408AtTheDeadline) {
  Pair p;
  const HttpLimits limits = small_limits();
  std::atomic<bool> draining{false};
  RequestReader reader(p.server, limits, draining);
  std::atomic<bool> stop{false};
  std::thread slowloris([&] {  // one header byte every 100 ms: every read is quick, the head never ends
    p.send("GET / HTTP/1.1\r\nHost: x\r\nX-A: ");
    while (!stop) {
      ::send(p.client, "a", 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(100ms);
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = reader.next(true);
  const auto took = std::chrono::steady_clock::now() - t0;
  stop = true;
  slowloris.join();
  ASSERT_EQ(r.kind, IncomingRequest::Kind::Error);
  EXPECT_EQ(r.error.status, 408);
  EXPECT_LT(took, 1500ms);
}

TEST(HttpRead, BodiesOverTheLimitGet413) {
  const HttpLimits limits = small_limits();
  std::atomic<bool> draining{false};
  {
    Pair p;
    RequestReader reader(p.server, limits, draining);
    p.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n");  // refused before any body byte
    const auto r = reader.next(true);
    ASSERT_EQ(r.kind, IncomingRequest::Kind::Error);
    EXPECT_EQ(r.error.status, 413);
  }
  Pair p;
  RequestReader reader(p.server, limits, draining);
  std::string wire = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) wire += "190\r\n" + std::string(400, 'a') + "\r\n";  // 1200 bytes in 400-byte chunks
  p.send(wire);
  const auto r = reader.next(true);
  ASSERT_EQ(r.kind, IncomingRequest::Kind::Error);
  EXPECT_EQ(r.error.status, 413);
}

TEST(HttpRead, HeadOverTheLimitGets431) {
  Pair p;
  const HttpLimits limits = small_limits();
  std::atomic<bool> draining{false};
  RequestReader reader(p.server, limits, draining);
  p.send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(600, 'a') + "\r\n\r\n");
  const auto r = reader.next(true);
  ASSERT_EQ(r.kind, IncomingRequest::Kind::Error);
  EXPECT_EQ(r.error.status, 431);
}

TEST(HttpRead, ExpectContinueIsAnswered) {
  Pair p;
  const HttpLimits limits = small_limits();
  std::atomic<bool> draining{false};
  RequestReader reader(p.server, limits, draining);
  p.send("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
  std::thread body([&] {
    for (int i = 0; i < 50 && p.receive().empty(); ++i) std::this_thread::sleep_for(10ms);  // waits for the 100
    p.send("{}");
  });
  const auto r = reader.next(true);
  body.join();
  ASSERT_EQ(r.kind, IncomingRequest::Kind::Request);
  EXPECT_EQ(r.bytes.substr(r.bytes.size() - 2), "{}");
}

TEST(HttpRead, DrainingClosesIdleConnections) {
  Pair p;
  HttpLimits limits = small_limits();
  limits.header_timeout_s = 30;
  std::atomic<bool> draining{false};
  RequestReader reader(p.server, limits, draining);
  std::thread drain([&] {
    std::this_thread::sleep_for(100ms);
    draining = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(reader.next(true).kind, IncomingRequest::Kind::Closed);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  drain.join();
}

TEST(HttpRead, ErrorResponsesAreCompleteHttp) {
  const std::string r = error_response({415, "no gzip"});
  EXPECT_TRUE(r.starts_with("HTTP/1.1 415 Unsupported Media Type\r\n")) << r;
  EXPECT_NE(r.find("Connection: close\r\n"), std::string::npos);
  EXPECT_NE(r.find("Accept-Encoding: identity\r\n"), std::string::npos);
  EXPECT_TRUE(r.ends_with(R"({"error":{"message":"no gzip","type":"invalid_request_error","param":null,"code":null}})")) << r;
}

}  // namespace
}  // namespace mx::server
