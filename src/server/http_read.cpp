// RequestReader over a blocking socket: every wait is a poll() with the time left to the deadline
// (in slices, so that a draining server notices), every read a recv() of what is there.
#include "server/http_read.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

#include "server/api_error.h"

namespace mx::server {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kPollSlice{200};  // how soon an idle connection notices a draining server
constexpr milliseconds kKeepAliveGrace{2000};  // open past the advertised keep-alive timeout

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
  }
}

}  // namespace

bool send_all(int fd, std::string_view data, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    pollfd p{.fd = fd, .events = POLLOUT, .revents = 0};
    if (left.count() <= 0 || ::poll(&p, 1, int(left.count())) <= 0 || (p.revents & (POLLERR | POLLHUP))) return false;
  }
  return true;
}

std::string error_response(const HttpError& e) {
  ApiError api{.status = e.status, .message = e.message};
  if (e.status >= 500) api.type = "server_error";
  const std::string body = api.body().dump();
  std::string extra;
  if (e.status == 415) extra += "Accept-Encoding: identity\r\n";
  if (e.status == 429 || e.status == 503) extra += "Retry-After: 1\r\n";
  return fmt::format("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n{}",
                     e.status, reason_phrase(e.status), body.size(), extra, body);
}

void linger(int fd, milliseconds time) {
  ::shutdown(fd, SHUT_WR);
  const auto deadline = Clock::now() + time;
  char sink[16384];
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (left.count() <= 0 || ::poll(&p, 1, int(left.count())) <= 0) break;
    if (::recv(fd, sink, sizeof sink, 0) <= 0) break;
  }
}

RequestReader::Fill RequestReader::fill(Clock::time_point deadline, bool stop_when_draining) {
  char chunk[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return Fill::Timeout;
    // Draining closes an idle connection, but not one whose next request has already arrived.
    const bool drain = stop_when_draining && draining_;
    pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
    const int ready = ::poll(&p, 1, drain ? 0 : int(std::min(left, kPollSlice).count()));
    if (ready < 0 && errno != EINTR) return Fill::Eof;
    if (ready == 0 && drain) return Fill::Draining;
    if (ready <= 0) continue;
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n > 0) {
      buf_.append(chunk, size_t(n));
      return Fill::Data;
    }
    if (n == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) return Fill::Eof;
  }
}

IncomingRequest RequestReader::error(int status, std::string message, const RequestHead* head) {
  IncomingRequest r{.kind = IncomingRequest::Kind::Error, .error = {status, std::move(message)}};
  if (head) {
    r.method = head->method;
    r.target = head->target;
    r.version = head->version;
  }
  return r;
}

IncomingRequest RequestReader::next(bool first) {
  const auto start = Clock::now();
  if (buf_.empty()) {  // idle: a new connection, or one kept alive after a response
    // A kept-alive connection stays open a little past the advertised timeout: a client that
    // trusts `Keep-Alive: timeout=N` but is late by a busy event loop still finds it open.
    const auto idle = start + (first ? seconds(limits_.header_timeout_s) : seconds(limits_.keep_alive_timeout_s) + kKeepAliveGrace);
    if (fill(idle, /*stop_when_draining=*/true) != Fill::Data) return {};
  }
  const auto deadline = (first ? start : Clock::now()) + seconds(limits_.header_timeout_s);
  size_t end = 0;
  while ((end = find_head_end(buf_)) == 0) {
    if (buf_.size() > limits_.max_header_bytes) break;
    const Fill f = fill(deadline, /*stop_when_draining=*/false);
    if (f == Fill::Eof) return {};
    if (f == Fill::Timeout)
      return error(408, fmt::format("The request head did not arrive within {} s.", limits_.header_timeout_s));
  }
  if (end == std::string::npos) return error(400, "Request lines must end in CRLF.");
  if (end == 0 || end > limits_.max_header_bytes)
    return error(431, fmt::format("The request line and headers exceed {} bytes.", limits_.max_header_bytes));
  auto parsed = parse_request_head(std::string_view(buf_).substr(0, end));
  if (auto* e = std::get_if<HttpError>(&parsed)) return error(e->status, e->message);
  return read_body(std::get<RequestHead>(parsed), end);
}

IncomingRequest RequestReader::read_body(const RequestHead& head, size_t head_end) {
  if (head.framing == BodyFraming::Length && head.content_length > limits_.max_body_bytes)
    return error(413, fmt::format("The request body is larger than {} bytes.", limits_.max_body_bytes), &head);
  if (head.expect_continue && head.framing != BodyFraming::None &&
      !send_all(fd_, "HTTP/1.1 100 Continue\r\n\r\n", seconds(limits_.write_timeout_s)))
    return {};
  const auto deadline = Clock::now() + seconds(limits_.body_timeout_s);
  const std::string timeout = fmt::format("The request body did not arrive within {} s.", limits_.body_timeout_s);
  buf_.erase(0, head_end);
  std::string body;
  if (head.framing == BodyFraming::Length) {
    while (buf_.size() < head.content_length) {
      const Fill f = fill(deadline, false);
      if (f == Fill::Eof) return {};
      if (f == Fill::Timeout) return error(408, timeout, &head);
    }
    body = buf_.substr(0, head.content_length);
    buf_.erase(0, head.content_length);
  } else if (head.framing == BodyFraming::Chunked) {
    ChunkedDecoder decoder(limits_.max_body_bytes, limits_.max_header_bytes);
    for (;;) {
      size_t pos = 0;
      const ChunkedDecoder::State s = decoder.feed(buf_, pos, body);
      buf_.erase(0, pos);
      if (s == ChunkedDecoder::State::Done) break;
      if (s == ChunkedDecoder::State::Failed) return error(decoder.error().status, decoder.error().message, &head);
      const Fill f = fill(deadline, false);
      if (f == Fill::Eof) return {};
      if (f == Fill::Timeout) return error(408, timeout, &head);
    }
  }
  return {.kind = IncomingRequest::Kind::Request, .bytes = normalized_request(head, body), .method = head.method,
          .target = head.target, .version = head.version};
}

}  // namespace mx::server
