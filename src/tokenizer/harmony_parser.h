// StreamParser: turns model output token ids (fed one at a time) into harmony messages, exposing
// the current channel / recipient and each step's content delta so a server can stream reasoning,
// content and tool-call arguments apart. Never throws; malformed input gives best effort.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/harmony.h"
#include "tokenizer/utf8.h"  // sanitize_utf8, utf8_complete_prefix: the parser's deltas are whole UTF-8

namespace mx {
class Tokenizer;
}

namespace mx::harmony {

// Strict: harmony's default; a stop token before <|message|> is kept in the header, and a bad
// header or end of stream inside a header is an error.
// Lenient: a stop token (or end of stream) inside a header salvages the header text as a message
// (channel from <|channel|>X, the other words as content); a bad header keeps what it can; text
// where <|start|> was expected opens a new assistant message; <|start|> or <|channel|> inside
// content closes the message first (the model forgot its terminator). Lenient never errors.
enum class ParseMode { Strict, Lenient };
enum class ParserState { ExpectStart, Header, Content };

struct ParserOptions {
  std::optional<Role> role;  // role of the first message when the input starts after <|start|>role
  ParseMode mode = ParseMode::Strict;
};

class StreamParser {
 public:
  static Result<StreamParser> create(std::shared_ptr<const Tokenizer> tok, const ParserOptions& options);

  // Feeds one token. On error (strict mode only) the parser recovers to its best state and can be
  // fed further; the error says what was wrong.
  Status push(int32_t id);
  // End of stream: completes a message whose content was being read.
  Status finish();

  const std::vector<Message>& messages() const { return messages_; }
  ParserState state() const { return state_; }
  // Header of the message whose content is being read (state() == Content).
  const Message* current() const { return state_ == ParserState::Content ? &current_ : nullptr; }
  std::optional<std::string> current_channel() const;
  std::optional<std::string> current_recipient() const;
  // Text added to the current message's content by the last push (complete UTF-8 only).
  const std::string& last_content_delta() const { return delta_; }
  // Content of the current message so far.
  const std::string& current_content() const { return content_; }
  // Whether the last push (or finish) completed a message.
  bool last_push_completed_message() const { return completed_; }

 private:
  struct Ids {
    int32_t start, end, message, channel, constrain, ret, call;
  };
  StreamParser(std::shared_ptr<const Tokenizer> tok, const ParserOptions& options, Ids ids);

  bool is_stop(int32_t id) const { return id == ids_.end || id == ids_.ret || id == ids_.call; }
  void begin_header(std::optional<Role> role);
  Status on_header_token(int32_t id);
  void on_content_token(int32_t id);
  void complete_message();
  void salvage_header();
  void append_content_bytes(std::string_view bytes);

  std::shared_ptr<const Tokenizer> tok_;
  ParseMode mode_;
  Ids ids_;
  ParserState state_ = ParserState::ExpectStart;
  std::optional<Role> next_role_;  // role given for the header being read
  std::string header_;             // header text so far (markers as text)
  Message current_;                // parsed header of the message in Content
  std::string content_;            // complete UTF-8 content so far
  std::string pending_;            // trailing bytes of an incomplete UTF-8 character
  std::string delta_;
  bool completed_ = false;
  std::vector<Message> messages_;
};

// The header words of a message (everything between <|start|> and <|message|>), parsed as
// harmony does. role: the role when it was given instead of written.
Result<Message> parse_header(std::string_view header, std::optional<Role> role);
// Best effort for a header parse_header rejects: keeps the channel, a "to=" recipient, a
// <|constrain|> content type and a role word (default assistant); drops other words.
Message parse_header_lenient(std::string_view header, std::optional<Role> role);

enum class EndOfStream { Pending, Reached };

// Feeds all ids; with EndOfStream::Reached also calls finish(). Strict errors abort.
Result<std::vector<Message>> parse_tokens(std::shared_ptr<const Tokenizer> tok, std::span<const int32_t> ids,
                                          const ParserOptions& options, EndOfStream eos);

}  // namespace mx::harmony
