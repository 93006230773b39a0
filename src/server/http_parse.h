// HTTP/1.1 request framing, checked strictly before cpp-httplib sees a request (RFC 9112): the
// request line and header fields, the body's framing (Content-Length or chunked, never both, no
// other transfer coding, no Content-Encoding) and an incremental chunked-body decoder with a size
// limit. Pure functions over bytes; the socket side is http_read.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace mx::server {

// A request the front answers itself, then closes the connection.
struct HttpError {
  int status = 400;
  std::string message;
};

enum class BodyFraming { None, Length, Chunked };

struct RequestHead {
  std::string method, target, version;  // version: "HTTP/1.1" or "HTTP/1.0"
  std::vector<std::pair<std::string, std::string>> fields;  // in order, values without OWS
  BodyFraming framing = BodyFraming::None;
  uint64_t content_length = 0;   // BodyFraming::Length
  bool expect_continue = false;  // "Expect: 100-continue"
};

// `head`: the bytes of the request line and fields up to and including the empty line (CRLF
// endings; leading empty lines allowed). Errors: 400 (syntax, ambiguous framing), 414 (target
// longer than 8 KiB), 415 (Content-Encoding), 417 (Expect), 501 (unknown transfer coding),
// 505 (HTTP version).
std::variant<RequestHead, HttpError> parse_request_head(std::string_view head);

// Where a head ends in `buf` (one past its empty line); 0 when it is not complete yet; npos when
// a line ends in a bare LF or holds a bare CR (a 400 before waiting for more).
size_t find_head_end(std::string_view buf);

// The request as cpp-httplib reads it: the request line and fields without Transfer-Encoding,
// Content-Length and Expect, plus "Content-Length: <body size>", then the body.
std::string normalized_request(const RequestHead& head, std::string_view body);

// The body of a chunked request: chunks (size line, data, CRLF), the last chunk, trailer fields
// (read and dropped), the final CRLF. Refuses a body over `max_body` bytes (413) and framing
// errors (400) as soon as it sees them.
class ChunkedDecoder {
 public:
  ChunkedDecoder(size_t max_body, size_t max_line) : max_body_(max_body), max_line_(max_line) {}
  enum class State { NeedMore, Done, Failed };
  // Consumes from in[pos...] and appends chunk data to body; on Done, pos is just past the body.
  State feed(std::string_view in, size_t& pos, std::string& body);
  const HttpError& error() const { return error_; }

 private:
  enum class Part { SizeLine, Data, DataEnd, Trailer };
  State fail(int status, std::string message);
  State on_size_line(std::string_view line);

  size_t max_body_, max_line_;
  Part part_ = Part::SizeLine;
  uint64_t remaining_ = 0;  // Part::Data: bytes of the current chunk still to come
  uint64_t total_ = 0;      // body bytes announced so far
  size_t trailer_bytes_ = 0;
  HttpError error_;
};

}  // namespace mx::server
