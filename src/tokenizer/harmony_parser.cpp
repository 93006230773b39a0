// StreamParser state machine (expect <|start|> -> header -> content) over token ids, with the
// strict harmony rules and the lenient recovery paths described in harmony_parser.h.
#include "tokenizer/harmony_parser.h"

#include <fmt/format.h>

#include <cctype>

#include "tokenizer/tokenizer.h"

namespace mx::harmony {

Result<StreamParser> StreamParser::create(std::shared_ptr<const Tokenizer> tok, const ParserOptions& options) {
  MX_CHECK(tok != nullptr, "harmony parser needs a tokenizer");
  auto id = [&](Marker m) -> Result<int32_t> {
    const auto v = tok->token_id(marker_text(m));
    MX_CHECK(v.has_value(), "tokenizer has no special token {}", marker_text(m));
    return *v;
  };
  Ids ids{};
  MX_ASSIGN(ids.start, id(Marker::Start));
  MX_ASSIGN(ids.end, id(Marker::End));
  MX_ASSIGN(ids.message, id(Marker::Message));
  MX_ASSIGN(ids.channel, id(Marker::Channel));
  MX_ASSIGN(ids.constrain, id(Marker::Constrain));
  MX_ASSIGN(ids.ret, id(Marker::Return));
  MX_ASSIGN(ids.call, id(Marker::Call));
  return StreamParser(std::move(tok), options, ids);
}

StreamParser::StreamParser(std::shared_ptr<const Tokenizer> tok, const ParserOptions& options, Ids ids)
    : tok_(std::move(tok)), mode_(options.mode), ids_(ids) {
  if (options.role) begin_header(options.role);
}

std::optional<std::string> StreamParser::current_channel() const {
  return state_ == ParserState::Content ? current_.channel : std::nullopt;
}

std::optional<std::string> StreamParser::current_recipient() const {
  return state_ == ParserState::Content ? current_.recipient : std::nullopt;
}

void StreamParser::begin_header(std::optional<Role> role) {
  state_ = ParserState::Header;
  next_role_ = role;
  header_.clear();
}

Status StreamParser::push(int32_t id) {
  delta_.clear();
  completed_ = false;
  switch (state_) {
    case ParserState::ExpectStart:
      if (id == ids_.start) {
        begin_header(std::nullopt);
        return ok_status();
      }
      if (mode_ == ParseMode::Strict) return MX_ERROR("unexpected token {} while expecting <|start|>", id);
      if (is_stop(id)) return ok_status();  // a stray terminator: nothing to keep
      begin_header(Role::Assistant);        // text without <|start|>assistant: assume it
      return on_header_token(id);
    case ParserState::Header:
      return on_header_token(id);
    case ParserState::Content:
      on_content_token(id);
      return ok_status();
  }
  return ok_status();
}

Status StreamParser::on_header_token(int32_t id) {
  const bool lenient = mode_ == ParseMode::Lenient;
  if (id == ids_.message) {
    auto parsed = parse_header(sanitize_utf8(header_), next_role_);
    Status st = parsed.status();
    current_ = parsed.ok() ? std::move(parsed).value() : parse_header_lenient(sanitize_utf8(header_), next_role_);
    state_ = ParserState::Content;
    content_.clear();
    pending_.clear();
    return lenient ? ok_status() : st;
  }
  if (lenient && (is_stop(id) || id == ids_.start)) {
    salvage_header();
    if (id == ids_.start) begin_header(std::nullopt);
    return ok_status();
  }
  // Strict harmony keeps a stop token in the header text; the header fails to parse later.
  header_ += tok_->token_bytes(id);
  return ok_status();
}

void StreamParser::on_content_token(int32_t id) {
  if (is_stop(id)) {
    complete_message();
    return;
  }
  if (mode_ == ParseMode::Lenient && (id == ids_.start || id == ids_.channel)) {
    complete_message();
    if (id == ids_.start) {
      begin_header(std::nullopt);
    } else {
      begin_header(Role::Assistant);
      header_ = marker_text(Marker::Channel);
    }
    return;
  }
  append_content_bytes(tok_->token_bytes(id));
}

void StreamParser::append_content_bytes(std::string_view bytes) {
  pending_ += bytes;
  const size_t n = utf8_complete_prefix(pending_);
  const std::string text = sanitize_utf8(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  content_ += text;
  delta_ += text;
}

void StreamParser::complete_message() {
  if (!pending_.empty()) {
    const std::string tail = sanitize_utf8(pending_);
    pending_.clear();
    content_ += tail;
    delta_ += tail;
  }
  current_.content = std::move(content_);
  messages_.push_back(std::move(current_));
  current_ = Message{};
  content_.clear();
  state_ = ParserState::ExpectStart;
  next_role_.reset();
  completed_ = true;
}

// A header that ended without <|message|>: its channel (if any) and its words as the content.
void StreamParser::salvage_header() {
  std::string header = sanitize_utf8(header_);
  header_.clear();
  Message m;
  const std::string_view marker = marker_text(Marker::Channel);
  if (const size_t at = header.find(marker); at != std::string::npos) {
    size_t end = at + marker.size();
    while (end < header.size() && !std::isspace(static_cast<unsigned char>(header[end])) && header[end] != '<') ++end;
    if (end > at + marker.size()) m.channel = header.substr(at + marker.size(), end - at - marker.size());
    header.erase(at, end - at);
  }
  std::optional<Role> role = next_role_;
  std::string words;
  size_t i = 0;
  while (i < header.size()) {
    while (i < header.size() && std::isspace(static_cast<unsigned char>(header[i]))) ++i;
    size_t j = i;
    while (j < header.size() && !std::isspace(static_cast<unsigned char>(header[j]))) ++j;
    if (j == i) break;
    const std::string word = header.substr(i, j - i);
    if (!role && role_from_name(word)) {
      role = role_from_name(word);  // "<|start|>assistant ..." without <|message|>
    } else {
      words += (words.empty() ? "" : " ") + word;
    }
    i = j;
  }
  m.author.role = role.value_or(Role::Assistant);
  if (m.author.role == Role::Tool) m.author.name = "tool";
  m.content = std::move(words);
  state_ = ParserState::ExpectStart;
  next_role_.reset();
  if (!m.channel && m.text().empty()) return;  // nothing worth keeping
  messages_.push_back(std::move(m));
  completed_ = true;
}

Status StreamParser::finish() {
  delta_.clear();
  completed_ = false;
  if (state_ == ParserState::Content) {
    complete_message();
  } else if (state_ == ParserState::Header) {
    if (mode_ == ParseMode::Lenient) {
      salvage_header();
    } else if (!header_.empty()) {
      const std::string header = sanitize_utf8(header_);
      begin_header(std::nullopt);
      state_ = ParserState::ExpectStart;
      return MX_ERROR("end of stream while reading a message header: '{}'", header);
    }
  }
  return ok_status();
}

Result<std::vector<Message>> parse_tokens(std::shared_ptr<const Tokenizer> tok, std::span<const int32_t> ids,
                                          const ParserOptions& options, EndOfStream eos) {
  MX_ASSIGN(StreamParser parser, StreamParser::create(std::move(tok), options));
  for (size_t i = 0; i < ids.size(); ++i) {
    Status st = parser.push(ids[i]);
    if (!st.ok()) return st.with_context(fmt::format("harmony parse at token {} (id {})", i, ids[i]));
  }
  if (eos == EndOfStream::Reached) MX_TRY(parser.finish());
  return parser.messages();
}

}  // namespace mx::harmony
