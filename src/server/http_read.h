// Reading requests off one client connection under the front's limits: waits for a request,
// reads its head (one deadline for the whole head, a size limit) and its body (Content-Length or
// chunked, a deadline, a size limit), answers "Expect: 100-continue", and keeps the bytes of
// pipelined requests that follow for the next call. Plus the socket writes the front makes itself.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>

#include "server/http_limits.h"
#include "server/http_parse.h"

namespace mx::server {

struct IncomingRequest {
  enum class Kind { Request, Error, Closed };
  Kind kind = Kind::Closed;  // Closed: the client left, stayed idle, or the server is draining
  std::string bytes;         // Request: the normalized request (http_parse.h) for cpp-httplib
  std::string method, target, version;  // for the access log (empty when the head did not parse)
  HttpError error;                      // Error: answer it, then close
};

class RequestReader {
 public:
  // `draining`: when set, a connection waiting for its next request is closed.
  RequestReader(int fd, const HttpLimits& limits, const std::atomic<bool>& draining)
      : fd_(fd), limits_(limits), draining_(draining) {}
  // first: the connection's first request, whose head deadline runs from the accept.
  IncomingRequest next(bool first);

 private:
  enum class Fill { Data, Eof, Timeout, Draining };
  Fill fill(std::chrono::steady_clock::time_point deadline, bool stop_when_draining);
  IncomingRequest read_body(const RequestHead& head, size_t head_end);
  IncomingRequest error(int status, std::string message, const RequestHead* head = nullptr);

  int fd_;
  const HttpLimits& limits_;
  const std::atomic<bool>& draining_;
  std::string buf_;  // received, not yet consumed
};

// Writes all of `data` unless the client stops reading for `timeout`; false when it failed.
bool send_all(int fd, std::string_view data, std::chrono::milliseconds timeout);
// A complete HTTP/1.1 response for an error the front answers itself: an OpenAI error body and
// "Connection: close" (plus Retry-After for 429/503, Accept-Encoding for 415).
std::string error_response(const HttpError& e);
// Ends a connection after an error response without resetting it under the response (which a
// close with unread input does): stops writing, reads and drops what the client still sends for
// up to `time`. The caller closes.
void linger(int fd, std::chrono::milliseconds time);

}  // namespace mx::server
