// Internal to the regex compiler (regex.cpp, regex_parse.cpp): code-point sets and the pattern's
// syntax tree, and the parser that builds it (ECMA-262 subset; see Regex::compile).
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace mx::grammar::regex_detail {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kUnbounded = -1;

using CharSet = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive code-point ranges
CharSet normalized(CharSet s);            // sorted, disjoint, non-adjacent
CharSet complement(const CharSet& s);     // s normalized

enum class AstKind { kConcat, kAlt, kSet, kRepeat, kBegin, kEnd };

struct Ast {
  AstKind kind = AstKind::kConcat;  // an empty concatenation matches the empty string
  CharSet set;                       // kSet: code points
  std::vector<Ast> kids;             // kConcat, kAlt; kRepeat: the one repeated node
  int min = 0, max = 0;              // kRepeat; max may be kUnbounded
};

inline Ast set_ast(CharSet set) { return Ast{.kind = AstKind::kSet, .set = std::move(set)}; }
inline Ast repeat_ast(Ast body, int min, int max) {
  Ast n{.kind = AstKind::kRepeat, .min = min, .max = max};
  n.kids.push_back(std::move(body));
  return n;
}

// The pattern's syntax tree; an error names the construct and its offset.
Result<Ast> parse_pattern(std::string_view pattern);

}  // namespace mx::grammar::regex_detail
