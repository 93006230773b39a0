// Request line, header fields and body framing by RFC 9112 (sections 3, 5, 6 and 7.1), strict
// where leniency lets two parsers disagree about where a request ends (request smuggling).
#include "server/http_parse.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>

namespace mx::server {
namespace {

constexpr size_t kMaxTargetBytes = 8192;  // cpp-httplib's own limit on the request target (414)

bool is_tchar(unsigned char c) {
  return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(char(c)) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_tchar(static_cast<unsigned char>(c)); });
}

// Field values: visible ASCII, SP, HTAB and obs-text; never NUL, CR, LF or other controls.
bool is_field_value(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c == '\t' || (c >= 0x20 && c != 0x7f);
  });
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool iequals(std::string_view a, std::string_view b) { return a.size() == b.size() && lower(a) == lower(b); }

// The elements of a comma-separated field value (empty elements dropped, as the list rule allows).
void split_list(std::string_view value, std::vector<std::string>& out) {
  size_t start = 0;
  while (start <= value.size()) {
    const size_t comma = std::min(value.find(',', start), value.size());
    const std::string_view item = trim_ows(value.substr(start, comma - start));
    if (!item.empty()) out.push_back(lower(item));
    start = comma + 1;
  }
}

std::optional<HttpError> parse_request_line(std::string_view line, RequestHead& h) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return HttpError{400, "The request line must be 'METHOD target HTTP/1.1'."};
  h.method = line.substr(0, sp1);
  h.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  h.version = line.substr(sp2 + 1);
  if (!is_token(h.method)) return HttpError{400, "The request method is not a valid token."};
  if (h.target.size() > kMaxTargetBytes)
    return HttpError{414, fmt::format("The request target is longer than {} bytes.", kMaxTargetBytes)};
  const bool visible = std::all_of(h.target.begin(), h.target.end(), [](char c) { return c > 0x20 && c < 0x7f; });
  if (h.target.empty() || !visible) return HttpError{400, "The request target must be visible ASCII."};
  if (h.version == "HTTP/1.1" || h.version == "HTTP/1.0") return std::nullopt;
  const bool http_version = h.version.size() == 8 && h.version.starts_with("HTTP/") && std::isdigit(h.version[5]) &&
                            h.version[6] == '.' && std::isdigit(h.version[7]);
  if (http_version) return HttpError{505, "Only HTTP/1.1 and HTTP/1.0 are supported."};
  return HttpError{400, "The request line must end in HTTP/1.1 or HTTP/1.0."};
}

std::optional<HttpError> parse_field(std::string_view line, RequestHead& h) {
  if (line.front() == ' ' || line.front() == '\t') return HttpError{400, "Header fields must not be folded."};
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
    return HttpError{400, "A header field is not 'name: value' (a token name, no space before the colon)."};
  const std::string_view value = trim_ows(line.substr(colon + 1));
  if (!is_field_value(value))
    return HttpError{400, fmt::format("The '{}' header holds a control character.", line.substr(0, colon))};
  h.fields.emplace_back(line.substr(0, colon), value);
  return std::nullopt;
}

// Content-Length as 1*DIGIT (every element of every field the same); false for anything else
// ("+5", "-1", "5 5", "0x10", overflow).
bool content_length(const std::vector<std::string>& values, uint64_t& out) {
  std::vector<std::string> items;
  for (const std::string& v : values) {
    if (trim_ows(v).empty()) return false;
    split_list(v, items);
  }
  for (const std::string& item : items) {
    if (item.size() > 19 || !std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return false;
    const uint64_t n = std::stoull(item);
    if (&item != &items.front() && n != out) return false;
    out = n;
  }
  return !items.empty();
}

// Transfer-Encoding, Content-Length, Content-Encoding, Expect and Host.
std::optional<HttpError> check_framing(RequestHead& h) {
  std::vector<std::string> lengths, codings, encodings, expects;
  int hosts = 0;
  for (const auto& [name, value] : h.fields) {
    if (iequals(name, "Content-Length")) lengths.push_back(value);
    else if (iequals(name, "Transfer-Encoding")) split_list(value, codings);
    else if (iequals(name, "Content-Encoding")) split_list(value, encodings);
    else if (iequals(name, "Expect")) expects.push_back(lower(value));
    else if (iequals(name, "Host")) ++hosts;
  }
  if (hosts > 1 || (hosts == 0 && h.version == "HTTP/1.1"))
    return HttpError{400, "An HTTP/1.1 request must carry exactly one Host header."};
  for (const std::string& e : encodings)
    if (e != "identity")
      return HttpError{415, fmt::format("Content-Encoding '{}' is not supported: send the body uncompressed.", e)};
  for (const std::string& e : expects) {
    if (e != "100-continue") return HttpError{417, fmt::format("Expect '{}' is not supported.", e)};
    h.expect_continue = true;
  }
  if (!codings.empty() || std::any_of(h.fields.begin(), h.fields.end(), [](const auto& f) { return iequals(f.first, "Transfer-Encoding"); })) {
    if (h.version == "HTTP/1.0") return HttpError{400, "Transfer-Encoding is not allowed in an HTTP/1.0 request."};
    if (!lengths.empty()) return HttpError{400, "A request must not carry both Transfer-Encoding and Content-Length."};
    if (codings.empty() || codings.back() != "chunked")
      return HttpError{400, "Transfer-Encoding must end in 'chunked'."};
    if (std::count(codings.begin(), codings.end(), "chunked") > 1)
      return HttpError{400, "Transfer-Encoding must apply 'chunked' once."};
    if (codings.size() > 1)
      return HttpError{501, fmt::format("Transfer-Encoding '{}' is not supported (only chunked).", codings.front())};
    h.framing = BodyFraming::Chunked;
    return std::nullopt;
  }
  if (lengths.empty()) return std::nullopt;
  if (!content_length(lengths, h.content_length))
    return HttpError{400, "Content-Length must be one decimal number of bytes."};
  h.framing = BodyFraming::Length;
  return std::nullopt;
}

bool body_expected(std::string_view method) { return method == "POST" || method == "PUT" || method == "PATCH"; }

}  // namespace

size_t find_head_end(std::string_view buf) {
  size_t start = 0;
  while (buf.substr(start).starts_with("\r\n")) start += 2;  // empty lines before the request line
  const size_t end = buf.find("\r\n\r\n", start);
  const size_t scan = end == std::string_view::npos ? buf.size() : end + 4;
  for (size_t i = 0; i < scan; ++i) {
    if (buf[i] == '\n' && (i == 0 || buf[i - 1] != '\r')) return std::string_view::npos;
    if (buf[i] == '\r' && i + 1 < buf.size() && buf[i + 1] != '\n') return std::string_view::npos;
  }
  return end == std::string_view::npos ? 0 : end + 4;
}

std::variant<RequestHead, HttpError> parse_request_head(std::string_view head) {
  while (head.starts_with("\r\n")) head.remove_prefix(2);
  RequestHead h;
  size_t pos = 0;
  bool first = true;
  for (;;) {
    const size_t eol = head.find("\r\n", pos);
    if (eol == std::string_view::npos) return HttpError{400, "The request head does not end in an empty line."};
    const std::string_view line = head.substr(pos, eol - pos);
    pos = eol + 2;
    if (line.empty()) break;
    auto e = first ? parse_request_line(line, h) : parse_field(line, h);
    if (e) return *e;
    first = false;
  }
  if (first) return HttpError{400, "The request line is missing."};
  if (auto e = check_framing(h)) return *e;
  return h;
}

std::string normalized_request(const RequestHead& head, std::string_view body) {
  std::string out = head.method + " " + head.target + " " + head.version + "\r\n";
  for (const auto& [name, value] : head.fields) {
    if (iequals(name, "Transfer-Encoding") || iequals(name, "Content-Length") || iequals(name, "Expect")) continue;
    out += name + ": " + value + "\r\n";
  }
  if (head.framing != BodyFraming::None || body_expected(head.method))
    out += fmt::format("Content-Length: {}\r\n", body.size());
  out += "\r\n";
  out += body;
  return out;
}

ChunkedDecoder::State ChunkedDecoder::fail(int status, std::string message) {
  error_ = {status, std::move(message)};
  return State::Failed;
}

ChunkedDecoder::State ChunkedDecoder::on_size_line(std::string_view line) {
  size_t digits = 0;
  uint64_t size = 0;
  while (digits < line.size() && std::isxdigit(static_cast<unsigned char>(line[digits]))) {
    if (digits == 15) return fail(400, "A chunk size has more than 15 hex digits.");
    const char c = char(std::tolower(static_cast<unsigned char>(line[digits++])));
    size = size * 16 + uint64_t(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  const std::string_view ext = trim_ows(line.substr(digits));
  if (digits == 0 || (!ext.empty() && ext.front() != ';') || !is_field_value(ext))
    return fail(400, "A chunk size line is not 'HEX[;extension]'.");
  if (size > max_body_ - std::min<uint64_t>(total_, max_body_))
    return fail(413, fmt::format("The request body is larger than {} bytes.", max_body_));
  total_ += size;
  remaining_ = size;
  part_ = size == 0 ? Part::Trailer : Part::Data;
  return State::NeedMore;
}

ChunkedDecoder::State ChunkedDecoder::feed(std::string_view in, size_t& pos, std::string& body) {
  while (pos < in.size()) {
    if (part_ == Part::Data) {
      const size_t n = size_t(std::min<uint64_t>(remaining_, in.size() - pos));
      body.append(in.substr(pos, n));
      pos += n;
      remaining_ -= n;
      if (remaining_ == 0) part_ = Part::DataEnd;
      continue;
    }
    const size_t eol = in.find("\r\n", pos);
    const size_t line_end = eol == std::string_view::npos ? in.size() : eol;
    const std::string_view line = in.substr(pos, line_end - pos);
    const size_t cr = line.find('\r');
    const bool cr_of_crlf_to_come = eol == std::string_view::npos && cr + 1 == line.size();
    if (line.find('\n') != std::string_view::npos || (cr != std::string_view::npos && !cr_of_crlf_to_come))
      return fail(400, "Chunked framing lines must end in CRLF.");
    if (line.size() > max_line_ || (part_ == Part::Trailer && trailer_bytes_ + line.size() > max_line_))
      return fail(part_ == Part::Trailer ? 431 : 400, "A chunk size line or the trailer fields are too long.");
    if (eol == std::string_view::npos) return State::NeedMore;
    pos = eol + 2;
    if (part_ == Part::DataEnd) {
      if (!line.empty()) return fail(400, "Chunk data is longer than its size.");
      part_ = Part::SizeLine;
    } else if (part_ == Part::SizeLine) {
      if (on_size_line(line) == State::Failed) return State::Failed;
    } else if (line.empty()) {
      return State::Done;
    } else {
      trailer_bytes_ += line.size() + 2;  // trailer fields are read and dropped
    }
  }
  return State::NeedMore;
}

}  // namespace mx::server
