// The regex parser: pattern text -> syntax tree (recursive descent over the ECMA-262 subset
// Regex::compile documents), with the code-point sets of classes and escapes.
#include "grammar/regex_parse.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>

#include "grammar/regex.h"
#include "tokenizer/utf8.h"

namespace mx::grammar::regex_detail {

// ---- Code-point sets ----


CharSet normalized(CharSet s) {  // sorted, disjoint, non-adjacent
  std::sort(s.begin(), s.end());
  CharSet out;
  for (auto [lo, hi] : s) {
    if (!out.empty() && lo <= out.back().second + 1) out.back().second = std::max(out.back().second, hi);
    else out.push_back({lo, hi});
  }
  return out;
}

CharSet complement(const CharSet& s) {  // s normalized
  CharSet out;
  uint32_t next = 0;
  for (auto [lo, hi] : s) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

CharSet digit_set() { return {{'0', '9'}}; }
CharSet word_set() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
CharSet space_set() {  // ECMA-262 WhiteSpace + LineTerminator
  return normalized({{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                     {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
                     {0xFEFF, 0xFEFF}});
}
CharSet dot_set() { return complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}); }

namespace {

struct Quant {
  int min, max;  // max may be kUnbounded
};

struct ClassAtom {
  CharSet set;
  bool is_char = false;  // one character, usable as a range bound
  uint32_t cp = 0;
};
ClassAtom char_atom(uint32_t cp) { return {{{cp, cp}}, true, cp}; }

class Parser {
 public:
  explicit Parser(std::string_view pattern) : p_(pattern) {}

  Result<Ast> parse() {
    MX_ASSIGN(Ast root, alternation());
    if (pos_ < p_.size()) return fail("unmatched ')'");
    return root;
  }

 private:
  bool at(char c) const { return pos_ < p_.size() && p_[pos_] == c; }
  bool starts(std::string_view s) const { return p_.substr(pos_).starts_with(s); }
  Status fail(std::string_view what) const { return MX_ERROR("{} at offset {}", what, pos_); }

  Result<Ast> alternation() {
    Ast alt{.kind = AstKind::kAlt};
    do {
      MX_ASSIGN(Ast seq, sequence());
      alt.kids.push_back(std::move(seq));
    } while (at('|') && ++pos_);
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  Result<Ast> sequence() {
    Ast seq{.kind = AstKind::kConcat};
    while (pos_ < p_.size() && !at('|') && !at(')')) {
      MX_ASSIGN(Ast item, atom());
      MX_ASSIGN(std::optional<Quant> q, quantifier());
      if (q && (item.kind == AstKind::kBegin || item.kind == AstKind::kEnd)) {
        return fail("quantifier after an anchor ^ or $");
      }
      seq.kids.push_back(q ? repeat_ast(std::move(item), q->min, q->max) : std::move(item));
    }
    return seq;
  }

  Result<Ast> atom() {
    switch (p_[pos_]) {
      case '(': return group();
      case '[': return char_class();
      case '.': ++pos_; return set_ast(dot_set());
      case '^': ++pos_; return Ast{.kind = AstKind::kBegin};
      case '$': ++pos_; return Ast{.kind = AstKind::kEnd};
      case '*': case '+': case '?': return fail("nothing to repeat before quantifier");
      case '\\': {
        ++pos_;
        MX_ASSIGN(ClassAtom a, escape(/*in_class=*/false));
        return set_ast(std::move(a.set));
      }
      case '{': {  // a literal '{' unless it reads as a quantifier (Annex B)
        MX_ASSIGN(std::optional<Quant> q, braces());
        if (q) return fail("nothing to repeat before quantifier");
        break;
      }
      default: break;
    }
    MX_ASSIGN(uint32_t cp, literal());
    return set_ast({{cp, cp}});
  }

  Result<Ast> group() {
    ++pos_;  // '('
    if (starts("?=") || starts("?!")) return fail("lookahead (?=...) / (?!...) is not supported");
    if (starts("?<=") || starts("?<!")) return fail("lookbehind (?<=...) / (?<!...) is not supported");
    if (starts("?:")) {
      pos_ += 2;
    } else if (starts("?<")) {  // named group: the name does not matter without backreferences
      const size_t close = p_.find('>', pos_);
      if (close == std::string_view::npos) return fail("unterminated group name (?<");
      pos_ = close + 1;
    } else if (at('?')) {
      return fail("inline flags or group modifiers (?...) are not supported");
    }
    MX_ASSIGN(Ast inner, alternation());
    if (!at(')')) return fail("unterminated group, missing ')'");
    ++pos_;
    return inner;
  }

  Result<Ast> char_class() {
    ++pos_;  // '['
    const bool negated = at('^') && ++pos_;
    CharSet set;
    auto add = [&set](const CharSet& s) { set.insert(set.end(), s.begin(), s.end()); };
    while (!at(']')) {
      if (pos_ >= p_.size()) return fail("unterminated character class, missing ']'");
      MX_ASSIGN(ClassAtom lo, class_atom());
      if (!at('-') || pos_ + 1 >= p_.size() || p_[pos_ + 1] == ']') {
        add(lo.set);
        continue;
      }
      ++pos_;  // '-'
      MX_ASSIGN(ClassAtom hi, class_atom());
      if (!lo.is_char || !hi.is_char) {  // [\w-.]: the '-' is a literal (Annex B)
        for (const CharSet& part : {lo.set, CharSet{{'-', '-'}}, hi.set}) add(part);
      } else if (lo.cp > hi.cp) {
        return fail("character class range out of order");
      } else {
        set.push_back({lo.cp, hi.cp});
      }
    }
    ++pos_;  // ']'
    set = normalized(std::move(set));
    return set_ast(negated ? complement(set) : set);
  }

  Result<ClassAtom> class_atom() {
    if (at('\\')) return ++pos_, escape(/*in_class=*/true);
    MX_ASSIGN(uint32_t cp, literal());
    return char_atom(cp);
  }

  // A quantifier at pos_ (consumed with a lazy '?' after it: same strings), or nullopt.
  Result<std::optional<Quant>> quantifier() {
    std::optional<Quant> q;
    if (at('*') || at('+') || at('?')) {
      q = at('*') ? Quant{0, kUnbounded} : at('+') ? Quant{1, kUnbounded} : Quant{0, 1};
      ++pos_;
    } else if (at('{')) {
      MX_ASSIGN(q, braces());
    }
    if (q && at('?')) ++pos_;
    return q;
  }

  // {n}, {n,} or {n,m} at pos_, or nullopt (nothing consumed) when the brace is not a quantifier.
  Result<std::optional<Quant>> braces() {
    size_t p = pos_ + 1;
    auto number = [&](int& v) {
      const size_t begin = p;
      for (v = 0; p < p_.size() && std::isdigit(static_cast<unsigned char>(p_[p])); ++p) {
        v = std::min(v * 10 + (p_[p] - '0'), 1000000);
      }
      return p > begin;
    };
    Quant q{};
    if (!number(q.min)) return std::optional<Quant>();
    q.max = q.min;
    if (p < p_.size() && p_[p] == ',' && (++p, !number(q.max))) q.max = kUnbounded;
    if (p >= p_.size() || p_[p] != '}') return std::optional<Quant>();
    if (q.min > Regex::kMaxRepeat || q.max > Regex::kMaxRepeat) {
      return fail(fmt::format("repetition count above {} in {}", Regex::kMaxRepeat, p_.substr(pos_, p + 1 - pos_)));
    }
    if (q.max != kUnbounded && q.max < q.min) return fail("repetition {n,m} with m < n");
    pos_ = p + 1;
    return std::optional<Quant>(q);
  }

  Result<ClassAtom> escape(bool in_class) {
    if (pos_ >= p_.size()) return fail("pattern ends with a lone backslash");
    const char c = p_[pos_++];
    if (const size_t i = std::string_view("dwsDWS").find(c); i != std::string_view::npos) {
      const CharSet set = i % 3 == 0 ? digit_set() : i % 3 == 1 ? word_set() : space_set();
      return ClassAtom{i < 3 ? set : complement(set)};
    }
    if (const size_t i = std::string_view("nrtfv").find(c); i != std::string_view::npos) return char_atom("\n\r\t\f\v"[i]);
    if (c == 'b' && in_class) return char_atom('\b');
    if (c == 'b' || c == 'B') return fail(fmt::format("word boundary \\{} is not supported", c));
    if (c == 'p' || c == 'P') return fail("unicode property escape \\p{...} is not supported");
    if (c == 'k' || (c >= '1' && c <= '9')) return fail("backreference \\1..\\9 / \\k<name> is not supported");
    if (c == '0' && (pos_ >= p_.size() || !std::isdigit(static_cast<unsigned char>(p_[pos_])))) return char_atom(0);
    if (c == '0') return fail("octal escape is not supported");
    if (c == 'c' && pos_ < p_.size() && std::isalpha(static_cast<unsigned char>(p_[pos_]))) return char_atom(p_[pos_++] % 32);
    if (c == 'x') {
      const int64_t v = hex(2, 2);
      return v < 0 ? Result<ClassAtom>(fail("\\x needs two hex digits")) : char_atom(static_cast<uint32_t>(v));
    }
    if (c == 'u') return unicode_escape();
    if (std::isalnum(static_cast<unsigned char>(c))) return fail(fmt::format("unknown escape \\{}", c));
    --pos_;  // identity escape (\. \- \/ \" ...), also of a non-ASCII character
    MX_ASSIGN(uint32_t cp, literal());
    return char_atom(cp);
  }

  // After "\u": HHHH, a surrogate pair \uHHHH\uHHHH, or {H...}.
  Result<ClassAtom> unicode_escape() {
    int64_t cp = -1;
    if (at('{')) {
      ++pos_;
      cp = hex(1, 6);
      if (cp < 0 || cp > kMaxCodePoint || !at('}')) return fail("invalid \\u{...} escape");
      ++pos_;
    } else if ((cp = hex(4, 4)) < 0) {
      return fail("\\u needs four hex digits");
    } else if (cp >= 0xD800 && cp <= 0xDBFF && starts("\\u")) {
      const size_t saved = pos_;
      pos_ += 2;
      const int64_t low = hex(4, 4);
      if (low >= 0xDC00 && low <= 0xDFFF) return char_atom(static_cast<uint32_t>(0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)));
      pos_ = saved;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) return fail("lone surrogate \\u escape cannot match UTF-8 text");
    return char_atom(static_cast<uint32_t>(cp));
  }

  // Up to max_digits hex digits at pos_ (consumed); -1 (nothing consumed) when fewer than min_digits.
  int64_t hex(size_t min_digits, size_t max_digits) {
    size_t n = 0;
    int64_t v = 0;
    for (; n < max_digits && pos_ + n < p_.size() && std::isxdigit(static_cast<unsigned char>(p_[pos_ + n])); ++n) {
      const int c = std::tolower(static_cast<unsigned char>(p_[pos_ + n]));
      v = v * 16 + (c <= '9' ? c - '0' : c - 'a' + 10);
    }
    if (n < min_digits) return -1;
    pos_ += n;
    return v;
  }

  Result<uint32_t> literal() {  // one UTF-8 encoded character of the pattern
    const std::optional<char32_t> cp = utf8_next(p_, pos_);
    if (!cp) return fail("invalid UTF-8 in pattern");
    return static_cast<uint32_t>(*cp);
  }

  std::string_view p_;
  size_t pos_ = 0;
};

}  // namespace

Result<Ast> parse_pattern(std::string_view pattern) { return Parser(pattern).parse(); }

}  // namespace mx::grammar::regex_detail
