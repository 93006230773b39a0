// Regular expressions for JSON Schema `pattern` and `format`: Regex compiles an ECMA-262 subset to a
// byte-level DFA (UTF-8) that constrains generated string contents one byte at a time; every state
// it hands out can still reach a full match, so a caller that follows next() never gets stuck.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace mx::grammar {

class Regex {
 public:
  static constexpr int kDead = -1;         // next() when no continuation can match any more
  static constexpr int kMaxStates = 2000;  // larger DFAs are refused ("pattern too complex")
  static constexpr int kMaxRepeat = 64;    // largest n, m in {n}, {n,}, {n,m}

  // The characters a text may contain at all. kJsonUnescaped leaves out those a JSON string must
  // escape (U+0000..U+001F, '"', '\\'), for callers that emit constrained strings without escapes:
  // then every state next() hands out can finish without them ('.' and [^...] never match them).
  enum class Alphabet { kAnyText, kJsonUnescaped };

  // ECMA-262 subset used by JSON Schema patterns: UTF-8 literals, identity escapes (\. \- \/ ...),
  // \n \r \t \f \v \0 \cX \xHH \uHHHH \u{H..}, \d \D \w \W \s \S, '.', classes [a-z0-9_] and
  // [^...] with escapes inside, groups (...) (?:...) (?<name>...), alternation |, quantifiers
  // * + ? {n} {n,} {n,m} (lazy forms accepted: same language), anchors ^ and $ (anywhere, with
  // their non-multiline meaning). Unanchored like JSON Schema: without ^ any text may precede the
  // match, without $ any text may follow it. Backreferences, lookaround, \b \B, inline flags and
  // \p{...} are errors naming the construct. Characters are code points: '.', negated classes and
  // \D \W \S match whole UTF-8 sequences, and no state accepts or continues into invalid UTF-8.
  static Result<Regex> compile(std::string_view pattern, Alphabet alphabet = Alphabet::kAnyText);
  // The regex of a JSON Schema "format": date-time, date, time (RFC 3339; time needs an offset),
  // uuid, email (local@domain.tld), ipv4, ipv6 (no embedded IPv4 form). Other names are errors.
  static Result<Regex> for_format(std::string_view format, Alphabet alphabet = Alphabet::kAnyText);

  int start() const { return 0; }
  // state must be kDead or in [0, num_states()); kDead stays kDead.
  int next(int state, uint8_t byte) const {
    return state < 0 ? kDead : table_[static_cast<size_t>(state) * num_classes_ + byte_class_[byte]];
  }
  bool accepting(int state) const { return state >= 0 && accepting_[state] != 0; }
  // Some continuation (possibly empty) is accepted: true for every state next() returns but kDead.
  bool can_accept_more(int state) const { return state >= 0 && state < num_states(); }
  int num_states() const { return static_cast<int>(accepting_.size()); }
  // The fewest bytes from `state` to a full match (0 when accepting; -1 for kDead).
  int distance(int state) const { return state < 0 ? -1 : distance_[static_cast<size_t>(state)]; }
  // The whole of text is a match (runs next() from start()).
  bool matches(std::string_view text) const;

 private:
  std::array<uint8_t, 256> byte_class_{};  // byte -> column of table_ (bytes alike in every state)
  int num_classes_ = 0;
  std::vector<int32_t> table_;       // (num_states, num_classes) next state or kDead
  std::vector<uint8_t> accepting_;
  std::vector<int32_t> distance_;  // (num_states) see distance()
  void compute_distances();  // (num_states) 1 when the bytes so far are a full match
};

}  // namespace mx::grammar
