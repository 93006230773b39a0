// Harmony message-header parsing (the words between <|start|> and <|message|>), the lenient
// fallback that keeps what it can.
#include <fmt/format.h>

#include "tokenizer/harmony_parser.h"

namespace mx::harmony {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

std::vector<std::string> split_words(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    size_t j = i;
    while (j < s.size() && !is_space(s[j])) ++j;
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// Takes "<|channel|>X" out of the header (X ends at whitespace or '<'). Returns X ("" when the
// marker has no value), or nullopt when there is no marker.
std::optional<std::string> take_channel(std::string& header) {
  const std::string_view marker = marker_text(Marker::Channel);
  const size_t at = header.find(marker);
  if (at == std::string::npos) return std::nullopt;
  const size_t begin = at + marker.size();
  size_t end = begin;
  while (end < header.size() && !is_space(header[end]) && header[end] != '<') ++end;
  std::string value = header.substr(begin, end - begin);
  header = header.substr(0, at) + header.substr(end);
  return value;
}

// Puts a space in front of every <|constrain|> so that it splits into its own word.
std::string space_constrain(const std::string& header) {
  const std::string marker(marker_text(Marker::Constrain));
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t at = header.find(marker, pos);
    if (at == std::string::npos) break;
    out += header.substr(pos, at - pos) + " " + marker;
    pos = at + marker.size();
  }
  return out + header.substr(pos);
}

std::string strip_to(const std::string& word) { return word.starts_with("to=") ? word.substr(3) : word; }

}  // namespace

Result<Message> parse_header(std::string_view header_text, std::optional<Role> role) {
  std::string header(header_text);
  Message m;
  if (auto channel = take_channel(header)) {
    MX_CHECK(!channel->empty(), "channel marker present but no channel value in header '{}'", header_text);
    m.channel = std::move(*channel);
  }
  header = trim(space_constrain(trim(header)));
  std::vector<std::string> parts = split_words(header);

  std::optional<std::string> role_word;
  if (!role) {
    MX_CHECK(!parts.empty(), "message header did not contain a role: '{}'", header_text);
    role_word = parts.front();
    role = role_from_name(*role_word);
    if (!role) {
      // An unknown first word followed by more words (or a recipient) names a tool.
      MX_CHECK(parts.size() > 1 || parts.front().starts_with("to="), "unknown role '{}' in message header",
               *role_word);
      parts.erase(parts.begin());
      role = Role::Tool;
    }
  }
  if (!parts.empty() && parts.front() == role_name(*role)) parts.erase(parts.begin());

  if (!parts.empty()) {
    const size_t count = parts.size();
    std::string last = parts.back();
    parts.pop_back();
    if (last.starts_with("to=")) {
      m.recipient = last.substr(3);
    } else if (count == 1) {
      m.recipient = last;
    } else {
      m.content_type = last;
      m.recipient = strip_to(parts.back());
      parts.pop_back();
    }
  }
  if (!parts.empty()) {
    std::string rest;
    for (const std::string& p : parts) rest += (rest.empty() ? "" : " ") + p;
    return MX_ERROR("unexpected tokens remaining in message header: '{}' (header '{}')", rest, header_text);
  }
  m.author.role = *role;
  if (*role == Role::Tool) m.author.name = role_word;
  return m;
}

// Best effort for a header that parse_header rejects: channel, a "to=" recipient, a constrain
// content type and a role word are kept; other words are dropped.
Message parse_header_lenient(std::string_view header_text, std::optional<Role> role) {
  std::string header(header_text);
  Message m;
  if (auto channel = take_channel(header); channel && !channel->empty()) m.channel = std::move(*channel);
  for (const std::string& w : split_words(space_constrain(header))) {
    if (w.starts_with("to=") && w.size() > 3) {
      m.recipient = w.substr(3);
    } else if (w.starts_with(marker_text(Marker::Constrain))) {
      m.content_type = w;
    } else if (!role) {
      role = role_from_name(w);
    }
  }
  m.author.role = role.value_or(Role::Assistant);
  if (m.author.role == Role::Tool) m.author.name = "tool";
  return m;
}

}  // namespace mx::harmony
