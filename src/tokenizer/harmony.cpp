// Harmony basics: names of markers, roles and efforts, message constructors, and Rendered
// (text pieces + marker tokens) with its conversion to text and to token ids.
#include "tokenizer/harmony.h"

#include <array>

#include "tokenizer/tokenizer.h"

namespace mx::harmony {

namespace {

struct MarkerInfo {
  std::string_view text;
  int32_t id;
};

constexpr std::array<MarkerInfo, 7> kMarkers = {{
    {"<|start|>", 200006},
    {"<|end|>", 200007},
    {"<|message|>", 200008},
    {"<|channel|>", 200005},
    {"<|constrain|>", 200003},
    {"<|return|>", 200002},
    {"<|call|>", 200012},
}};

constexpr std::array<std::string_view, 5> kRoles = {"system", "developer", "user", "assistant", "tool"};
constexpr std::array<std::string_view, 3> kEfforts = {"low", "medium", "high"};

}  // namespace

std::string_view marker_text(Marker m) { return kMarkers[size_t(m)].text; }
int32_t marker_id(Marker m) { return kMarkers[size_t(m)].id; }

std::string_view role_name(Role r) { return kRoles[size_t(r)]; }

std::optional<Role> role_from_name(std::string_view name) {
  for (size_t i = 0; i < kRoles.size(); ++i)
    if (kRoles[i] == name) return Role(i);
  return std::nullopt;
}

std::string_view effort_name(ReasoningEffort e) { return kEfforts[size_t(e)]; }

std::optional<ReasoningEffort> effort_from_name(std::string_view name) {
  for (size_t i = 0; i < kEfforts.size(); ++i)
    if (kEfforts[i] == name) return ReasoningEffort(i);
  return std::nullopt;
}

const std::string& Message::text() const {
  static const std::string kEmpty;
  const auto* s = std::get_if<std::string>(&content);
  return s ? *s : kEmpty;
}

Message text_message(Role role, std::string text) {
  Message m;
  m.author.role = role;
  m.content = std::move(text);
  return m;
}

Message system_message(SystemContent content) {
  Message m;
  m.author.role = Role::System;
  m.content = std::move(content);
  return m;
}

Message developer_message(DeveloperContent content) {
  Message m;
  m.author.role = Role::Developer;
  m.content = std::move(content);
  return m;
}

void Rendered::text(std::string_view s) {
  if (s.empty()) return;
  if (!pieces_.empty() && !pieces_.back().marker) {
    pieces_.back().text.append(s);
  } else {
    pieces_.push_back(Piece{.marker = std::nullopt, .text = std::string(s)});
  }
}

void Rendered::marker(Marker m) { pieces_.push_back(Piece{.marker = m, .text = {}}); }

void Rendered::append(const Rendered& other) {
  for (const Piece& p : other.pieces_) {
    if (p.marker) {
      marker(*p.marker);
    } else {
      text(p.text);
    }
  }
}

bool Rendered::ends_with(Marker m) const { return !pieces_.empty() && pieces_.back().marker == m; }

void Rendered::replace_last_marker(Marker m) {
  if (!pieces_.empty() && pieces_.back().marker) pieces_.back().marker = m;
}

void Rendered::pop_marker(Marker m) {
  if (ends_with(m)) pieces_.pop_back();
}

std::string Rendered::str() const {
  std::string out;
  for (const Piece& p : pieces_) out += p.marker ? std::string(marker_text(*p.marker)) : p.text;
  return out;
}

size_t Rendered::text_bytes() const {
  size_t n = 0;
  for (const Piece& p : pieces_) n += p.text.size();
  return n;
}

Result<std::vector<int32_t>> Rendered::tokens(const Tokenizer& tok) const {
  std::vector<int32_t> ids;
  for (const Piece& p : pieces_) {
    if (p.marker) {
      const auto id = tok.token_id(marker_text(*p.marker));
      MX_CHECK(id.has_value(), "tokenizer has no special token {}", marker_text(*p.marker));
      ids.push_back(*id);
      continue;
    }
    MX_ASSIGN(std::vector<int32_t> part, tok.encode(p.text, SpecialTokens::AsText));
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

}  // namespace mx::harmony
