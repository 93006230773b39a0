// Regex compilation: pattern -> AST (recursive descent) -> Thompson NFA over UTF-8 bytes (code-point
// ranges split into byte-range sequences) -> DFA by subset construction over byte classes -> dead
// states removed and Moore-minimised. Also the patterns behind the JSON Schema formats.
#include "grammar/regex.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "tokenizer/utf8.h"

namespace mx::grammar {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kUnbounded = -1;
// Subset construction passes through states that minimisation later merges or drops (dead ones):
// this bounds its time and memory; Regex::kMaxStates bounds the result.
constexpr int kMaxBuildStates = 4 * Regex::kMaxStates;
// Nested counted repetition multiplies ((.{64}){64} is 4096 copies of '.'): bound the NFA too.
constexpr size_t kMaxNfaStates = 100000;

// ---- Code-point sets ----

using CharSet = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive ranges

CharSet normalized(CharSet s) {  // sorted, disjoint, non-adjacent
  std::sort(s.begin(), s.end());
  CharSet out;
  for (auto [lo, hi] : s) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.push_back({lo, hi});
    }
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

// ---- UTF-8 byte-range sequences ----

using ByteSeq = std::vector<std::pair<uint8_t, uint8_t>>;  // one byte range per position

int encode_utf8(uint32_t cp, uint8_t out[4]) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  static constexpr uint8_t kLead[] = {0, 0, 0xC0, 0xE0, 0xF0};  // by encoded length
  const int n = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  for (int i = n - 1; i > 0; --i, cp >>= 6) out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  out[0] = static_cast<uint8_t>(kLead[n] | cp);
  return n;
}

// Appends byte-range sequences matching exactly the UTF-8 encodings of [lo, hi] (no surrogates
// inside): split until every position's bytes range independently (as RE2 and utf8-ranges do).
void split_utf8(uint32_t lo, uint32_t hi, std::vector<ByteSeq>& out) {
  for (uint32_t last : {0x7Fu, 0x7FFu, 0xFFFFu}) {  // one encoded length per range
    if (lo <= last && hi > last) {
      split_utf8(lo, last, out);
      split_utf8(last + 1, hi, out);
      return;
    }
  }
  if (hi <= 0x7F) {
    out.push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  for (int i = 1; i < 4; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;  // the low i continuation bytes
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      split_utf8(lo, lo | m, out);
      split_utf8((lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {
      split_utf8(lo, (hi & ~m) - 1, out);
      split_utf8(hi & ~m, hi, out);
      return;
    }
  }
  uint8_t a[4], b[4];
  const int n = encode_utf8(lo, a);
  encode_utf8(hi, b);
  ByteSeq seq;
  for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
  out.push_back(std::move(seq));
}

std::vector<ByteSeq> utf8_sequences(const CharSet& set) {
  const CharSet valid = {{0, 0xD7FF}, {0xE000, kMaxCodePoint}};  // surrogates have no UTF-8
  std::vector<ByteSeq> out;
  for (auto [lo, hi] : set) {
    for (auto [vlo, vhi] : valid) {
      if (std::max(lo, vlo) <= std::min(hi, vhi)) split_utf8(std::max(lo, vlo), std::min(hi, vhi), out);
    }
  }
  return out;
}

// ---- Parser: pattern -> AST ----

enum class NodeKind { kConcat, kAlt, kSet, kRepeat, kBegin, kEnd };

struct Node {
  NodeKind kind = NodeKind::kConcat;  // an empty concatenation matches the empty string
  CharSet set;                        // kSet: code points
  std::vector<Node> kids;             // kConcat, kAlt; kRepeat: the one repeated node
  int min = 0, max = 0;               // kRepeat; max may be kUnbounded
};

Node set_node(CharSet set) { return Node{.kind = NodeKind::kSet, .set = std::move(set)}; }
Node repeat_node(Node body, int min, int max) {
  Node n{.kind = NodeKind::kRepeat, .min = min, .max = max};
  n.kids.push_back(std::move(body));
  return n;
}

struct Quant {
  int min, max;
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

  Result<Node> parse() {
    MX_ASSIGN(Node root, alternation());
    if (pos_ < p_.size()) return fail("unmatched ')'");
    return root;
  }

 private:
  bool at(char c) const { return pos_ < p_.size() && p_[pos_] == c; }
  bool starts(std::string_view s) const { return p_.substr(pos_).starts_with(s); }
  Status fail(std::string_view what) const { return MX_ERROR("{} at offset {}", what, pos_); }

  Result<Node> alternation();
  Result<Node> sequence();
  Result<Node> atom();
  Result<Node> group();
  Result<Node> char_class();
  Result<std::optional<Quant>> quantifier();
  Result<std::optional<Quant>> braces();
  Result<ClassAtom> escape(bool in_class);
  Result<ClassAtom> unicode_escape();
  Result<uint32_t> literal();
  int64_t hex(size_t min_digits, size_t max_digits);

  std::string_view p_;
  size_t pos_ = 0;
};

Result<Node> Parser::alternation() {
  Node alt{.kind = NodeKind::kAlt};
  while (true) {
    MX_ASSIGN(Node seq, sequence());
    alt.kids.push_back(std::move(seq));
    if (!at('|')) break;
    ++pos_;
  }
  if (alt.kids.size() == 1) return std::move(alt.kids[0]);
  return alt;
}

Result<Node> Parser::sequence() {
  Node seq{.kind = NodeKind::kConcat};
  while (pos_ < p_.size() && !at('|') && !at(')')) {
    MX_ASSIGN(Node item, atom());
    MX_ASSIGN(std::optional<Quant> q, quantifier());
    if (q) {
      if (item.kind == NodeKind::kBegin || item.kind == NodeKind::kEnd) {
        return fail("quantifier after an anchor ^ or $");
      }
      item = repeat_node(std::move(item), q->min, q->max);
    }
    seq.kids.push_back(std::move(item));
  }
  return seq;
}

Result<Node> Parser::atom() {
  switch (p_[pos_]) {
    case '(': return group();
    case '[': return char_class();
    case '.': ++pos_; return set_node(dot_set());
    case '^': ++pos_; return Node{.kind = NodeKind::kBegin};
    case '$': ++pos_; return Node{.kind = NodeKind::kEnd};
    case '*': case '+': case '?': return fail("nothing to repeat before quantifier");
    case '\\': {
      ++pos_;
      MX_ASSIGN(ClassAtom a, escape(/*in_class=*/false));
      return set_node(std::move(a.set));
    }
    case '{': {  // a literal '{' unless it reads as a quantifier (Annex B)
      MX_ASSIGN(std::optional<Quant> q, braces());
      if (q) return fail("nothing to repeat before quantifier");
      break;
    }
    default: break;
  }
  MX_ASSIGN(uint32_t cp, literal());
  return set_node({{cp, cp}});
}

Result<Node> Parser::group() {
  ++pos_;  // '('
  if (starts("?:")) {
    pos_ += 2;
  } else if (starts("?=") || starts("?!")) {
    return fail("lookahead (?=...) / (?!...) is not supported");
  } else if (starts("?<=") || starts("?<!")) {
    return fail("lookbehind (?<=...) / (?<!...) is not supported");
  } else if (starts("?<")) {  // named group: the name does not matter without backreferences
    const size_t close = p_.find('>', pos_);
    if (close == std::string_view::npos) return fail("unterminated group name (?<");
    pos_ = close + 1;
  } else if (at('?')) {
    return fail("inline flags or group modifiers (?...) are not supported");
  }
  MX_ASSIGN(Node inner, alternation());
  if (!at(')')) return fail("unterminated group, missing ')'");
  ++pos_;
  return inner;
}

Result<Node> Parser::char_class() {
  ++pos_;  // '['
  const bool negated = at('^');
  if (negated) ++pos_;
  CharSet set;
  auto add = [&set](const CharSet& s) { set.insert(set.end(), s.begin(), s.end()); };
  auto class_atom = [this]() -> Result<ClassAtom> {
    if (!at('\\')) {
      MX_ASSIGN(uint32_t cp, literal());
      return char_atom(cp);
    }
    ++pos_;
    return escape(/*in_class=*/true);
  };
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
      add(lo.set);
      add({{'-', '-'}});
      add(hi.set);
    } else if (lo.cp > hi.cp) {
      return fail("character class range out of order");
    } else {
      set.push_back({lo.cp, hi.cp});
    }
  }
  ++pos_;  // ']'
  set = normalized(std::move(set));
  return set_node(negated ? complement(set) : set);
}

// A quantifier at pos_ (consumed with a lazy '?' after it), or nullopt.
Result<std::optional<Quant>> Parser::quantifier() {
  std::optional<Quant> q;
  if (at('*')) q = Quant{0, kUnbounded};
  if (at('+')) q = Quant{1, kUnbounded};
  if (at('?')) q = Quant{0, 1};
  if (q) {
    ++pos_;
  } else if (at('{')) {
    MX_ASSIGN(q, braces());
  }
  if (q && at('?')) ++pos_;  // lazy: matches the same strings
  return q;
}

// {n}, {n,} or {n,m} at pos_, or nullopt (nothing consumed) when the brace is not a quantifier.
Result<std::optional<Quant>> Parser::braces() {
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
  if (p < p_.size() && p_[p] == ',') {
    ++p;
    if (!number(q.max)) q.max = kUnbounded;
  }
  if (p >= p_.size() || p_[p] != '}') return std::optional<Quant>();
  if (q.min > Regex::kMaxRepeat || q.max > Regex::kMaxRepeat) {
    return fail(fmt::format("repetition count above {} in {}", Regex::kMaxRepeat, p_.substr(pos_, p + 1 - pos_)));
  }
  if (q.max != kUnbounded && q.max < q.min) return fail("repetition {n,m} with m < n");
  pos_ = p + 1;
  return std::optional<Quant>(q);
}

Result<ClassAtom> Parser::escape(bool in_class) {
  if (pos_ >= p_.size()) return fail("pattern ends with a lone backslash");
  const char c = p_[pos_++];
  switch (c) {
    case 'd': return ClassAtom{digit_set()};
    case 'D': return ClassAtom{complement(digit_set())};
    case 'w': return ClassAtom{word_set()};
    case 'W': return ClassAtom{complement(word_set())};
    case 's': return ClassAtom{space_set()};
    case 'S': return ClassAtom{complement(space_set())};
    case 'n': return char_atom('\n');
    case 'r': return char_atom('\r');
    case 't': return char_atom('\t');
    case 'f': return char_atom('\f');
    case 'v': return char_atom('\v');
    case 'b':
      if (in_class) return char_atom('\b');
      return fail("word boundary \\b is not supported");
    case 'B': return fail("word boundary \\B is not supported");
    case 'p': case 'P': return fail("unicode property escape \\p{...} is not supported");
    case 'k': return fail("named backreference \\k<...> is not supported");
    case '0':
      if (pos_ < p_.size() && std::isdigit(static_cast<unsigned char>(p_[pos_]))) {
        return fail("octal escape is not supported");
      }
      return char_atom(0);
    case 'c':
      if (pos_ < p_.size() && std::isalpha(static_cast<unsigned char>(p_[pos_]))) return char_atom(p_[pos_++] % 32);
      return fail("\\c must be followed by a letter");
    case 'x': {
      const int64_t v = hex(2, 2);
      if (v < 0) return fail("\\x needs two hex digits");
      return char_atom(static_cast<uint32_t>(v));
    }
    case 'u': return unicode_escape();
    default: break;
  }
  if (c >= '1' && c <= '9') return fail("backreference \\1..\\9 is not supported");
  if (std::isalnum(static_cast<unsigned char>(c))) return fail(fmt::format("unknown escape \\{}", c));
  --pos_;  // identity escape (\. \- \/ \" ...), also of a non-ASCII character
  MX_ASSIGN(uint32_t cp, literal());
  return char_atom(cp);
}

// After "\u": HHHH, a surrogate pair \uHHHH\uHHHH, or {H...}.
Result<ClassAtom> Parser::unicode_escape() {
  if (at('{')) {
    ++pos_;
    const int64_t v = hex(1, 6);
    if (v < 0 || v > kMaxCodePoint || !at('}')) return fail("invalid \\u{...} escape");
    ++pos_;
    if (v >= 0xD800 && v <= 0xDFFF) return fail("surrogate \\u{...} cannot match UTF-8 text");
    return char_atom(static_cast<uint32_t>(v));
  }
  const int64_t high = hex(4, 4);
  if (high < 0) return fail("\\u needs four hex digits");
  if (high >= 0xD800 && high <= 0xDBFF && starts("\\u")) {
    const size_t saved = pos_;
    pos_ += 2;
    const int64_t low = hex(4, 4);
    if (low >= 0xDC00 && low <= 0xDFFF) {
      return char_atom(static_cast<uint32_t>(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)));
    }
    pos_ = saved;
  }
  if (high >= 0xD800 && high <= 0xDFFF) return fail("lone surrogate \\u escape cannot match UTF-8 text");
  return char_atom(static_cast<uint32_t>(high));
}

// Up to max_digits hex digits at pos_ (consumed); -1 (nothing consumed) when fewer than min_digits.
int64_t Parser::hex(size_t min_digits, size_t max_digits) {
  size_t n = 0;
  int64_t v = 0;
  for (; n < max_digits && pos_ + n < p_.size(); ++n) {
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(p_[pos_ + n])));
    if (!std::isxdigit(static_cast<unsigned char>(c))) break;
    v = v * 16 + (c <= '9' ? c - '0' : c - 'a' + 10);
  }
  if (n < min_digits) return -1;
  pos_ += n;
  return v;
}

// One UTF-8 encoded character of the pattern.
Result<uint32_t> Parser::literal() {
  const std::optional<char32_t> cp = utf8_next(p_, pos_);
  if (!cp) return fail("invalid UTF-8 in pattern");
  return static_cast<uint32_t>(*cp);
}

// ---- Thompson NFA ----

enum class EdgeKind : uint8_t { kByte, kEpsilon, kBegin, kEnd };  // kBegin/kEnd: ^ and $

struct Edge {
  EdgeKind kind;
  uint8_t lo, hi;  // kByte: inclusive byte range
  int to;
};

struct Fragment {
  int in, out;
};

class NfaBuilder {
 public:
  std::vector<std::vector<Edge>> edges;  // (nfa states) outgoing edges

  Result<Fragment> build(const Node& node) {
    if (edges.size() > kMaxNfaStates) return MX_ERROR("pattern too complex (NFA over {} states)", kMaxNfaStates);
    switch (node.kind) {
      case NodeKind::kSet: return build_set(node.set);
      case NodeKind::kRepeat: return build_repeat(node);
      case NodeKind::kBegin: case NodeKind::kEnd: {
        const Fragment f{add_state(), add_state()};
        link(f.in, f.out, node.kind == NodeKind::kBegin ? EdgeKind::kBegin : EdgeKind::kEnd);
        return f;
      }
      case NodeKind::kConcat: {
        const Fragment f{add_state(), add_state()};
        int out = f.in;
        for (const Node& kid : node.kids) {
          MX_ASSIGN(Fragment k, build(kid));
          link(out, k.in);
          out = k.out;
        }
        link(out, f.out);
        return f;
      }
      case NodeKind::kAlt: {
        const Fragment f{add_state(), add_state()};
        for (const Node& kid : node.kids) {
          MX_ASSIGN(Fragment k, build(kid));
          link(f.in, k.in);
          link(k.out, f.out);
        }
        return f;
      }
    }
    return MX_ERROR("unknown regex node");
  }

 private:
  int add_state() {
    edges.emplace_back();
    return static_cast<int>(edges.size()) - 1;
  }
  void link(int from, int to, EdgeKind kind = EdgeKind::kEpsilon) { edges[from].push_back({kind, 0, 0, to}); }

  Result<Fragment> build_set(const CharSet& set) {
    const Fragment f{add_state(), add_state()};
    for (const ByteSeq& seq : utf8_sequences(set)) {
      int from = f.in;
      for (size_t i = 0; i < seq.size(); ++i) {
        const int to = i + 1 == seq.size() ? f.out : add_state();
        edges[from].push_back({EdgeKind::kByte, seq[i].first, seq[i].second, to});
        from = to;
      }
    }
    return f;
  }

  // body{min} then body* or (max - min) times body?
  Result<Fragment> build_repeat(const Node& node) {
    const int in = add_state();
    int out = in;
    for (int i = 0; i < node.min; ++i) {
      MX_ASSIGN(Fragment k, build(node.kids[0]));
      link(out, k.in);
      out = k.out;
    }
    const int optional_copies = node.max == kUnbounded ? 1 : node.max - node.min;
    for (int i = 0; i < optional_copies; ++i) {
      MX_ASSIGN(Fragment k, build(node.kids[0]));
      const int skip = add_state();
      link(out, k.in);
      link(out, skip);
      link(k.out, node.max == kUnbounded ? out : skip);  // unbounded: loop back for another copy
      out = skip;
    }
    return Fragment{in, out};
  }
};

// ---- DFA ----

struct Dfa {
  std::array<uint8_t, 256> byte_class{};
  int num_classes = 0;
  std::vector<int32_t> table;      // (states, num_classes) next state or kDead
  std::vector<uint8_t> accepting;  // (states)
  int num_states() const { return static_cast<int>(accepting.size()); }
};

// Bytes that no NFA edge tells apart share a class (a column of the table).
void assign_byte_classes(const std::vector<std::vector<Edge>>& nfa, Dfa& dfa) {
  std::array<bool, 257> boundary{};
  boundary[0] = true;
  for (const auto& out : nfa) {
    for (const Edge& e : out) {
      if (e.kind == EdgeKind::kByte) boundary[e.lo] = boundary[e.hi + 1] = true;
    }
  }
  int c = -1;
  for (int b = 0; b < 256; ++b) dfa.byte_class[b] = static_cast<uint8_t>(c += boundary[b] ? 1 : 0);
  dfa.num_classes = c + 1;
}

struct IntsHash {
  size_t operator()(const std::vector<int>& v) const {
    size_t h = v.size();
    for (int x : v) h = (h ^ static_cast<size_t>(x)) * 0x100000001B3ull;
    return h;
  }
};

class SubsetBuilder {
 public:
  SubsetBuilder(const std::vector<std::vector<Edge>>& nfa, Fragment whole)
      : nfa_(nfa), whole_(whole), mark_(nfa.size()), reads_bytes_(nfa.size()), accepts_at_end_(nfa.size()) {
    std::vector<std::vector<int>> into(nfa.size());  // reverse epsilon and $ edges
    for (size_t n = 0; n < nfa.size(); ++n) {
      for (const Edge& e : nfa[n]) {
        if (e.kind == EdgeKind::kByte) reads_bytes_[n] = 1;
        if (e.kind == EdgeKind::kEpsilon || e.kind == EdgeKind::kEnd) into[e.to].push_back(static_cast<int>(n));
      }
    }
    std::vector<int> stack{whole.out};
    for (accepts_at_end_[whole.out] = 1; !stack.empty();) {
      const int t = stack.back();
      stack.pop_back();
      for (int n : into[t]) {
        if (!accepts_at_end_[n]) accepts_at_end_[n] = 1, stack.push_back(n);
      }
    }
  }

  // DFA state i stands for the NFA states of sets_[i] (those with byte edges) plus whether the
  // text read so far matches; any two with equal (set, accepting) behave alike.
  Result<Dfa> build() {
    Dfa dfa;
    assign_byte_classes(nfa_, dfa);
    intern_start(dfa);
    std::vector<std::vector<int>> seeds(dfa.num_classes);  // (classes) NFA states after one byte
    for (size_t s = 0; s < sets_.size(); ++s) {
      if (sets_.size() > static_cast<size_t>(kMaxBuildStates)) {
        return MX_ERROR("pattern too complex: DFA over {} states", kMaxBuildStates);
      }
      for (auto& v : seeds) v.clear();
      for (int n : sets_[s]) {
        for (const Edge& e : nfa_[n]) {
          if (e.kind != EdgeKind::kByte) continue;
          for (int c = dfa.byte_class[e.lo]; c <= dfa.byte_class[e.hi]; ++c) seeds[c].push_back(e.to);
        }
      }
      for (auto& v : seeds) {
        std::sort(v.begin(), v.end());
        v.erase(std::unique(v.begin(), v.end()), v.end());
        auto it = by_seeds_.find(v);
        if (it == by_seeds_.end()) it = by_seeds_.emplace(v, intern(closure(v, /*at_begin=*/false), dfa)).first;
        dfa.table.push_back(it->second);
      }
    }
    return dfa;
  }

 private:
  // The start state: ^ edges may be taken, and $ edges too when the text stays empty.
  void intern_start(Dfa& dfa) {
    const std::vector<int> at_end = closure({whole_.in}, /*at_begin=*/true, /*at_end=*/true);
    const bool accepting = std::binary_search(at_end.begin(), at_end.end(), whole_.out);
    intern(closure({whole_.in}, /*at_begin=*/true), dfa, accepting);
  }

  // The DFA state of a closed set of NFA states; accepting unless told otherwise when $ edges lead
  // from one of them to the accept state.
  int intern(const std::vector<int>& states, Dfa& dfa, std::optional<bool> accepting = std::nullopt) {
    std::vector<int> key;
    bool accepts = false;
    for (int n : states) {
      if (reads_bytes_[n]) key.push_back(n);
      accepts = accepts || accepts_at_end_[n];
    }
    accepts = accepting.value_or(accepts);
    if (key.empty() && !accepts) return Regex::kDead;
    key.push_back(accepts ? -1 : -2);
    auto [it, fresh] = ids_.emplace(std::move(key), static_cast<int>(sets_.size()));
    if (fresh) {
      sets_.emplace_back(it->first.begin(), it->first.end() - 1);
      dfa.accepting.push_back(accepts);
    }
    return it->second;
  }

  // NFA states reachable from seeds over epsilon edges, ^ edges when at the start of the text and $
  // edges when at its end; sorted.
  std::vector<int> closure(const std::vector<int>& seeds, bool at_begin, bool at_end = false) {
    ++stamp_;
    std::vector<int> stack, out;
    for (int s : seeds) {
      if (mark_[s] != stamp_) mark_[s] = stamp_, stack.push_back(s);
    }
    while (!stack.empty()) {
      const int s = stack.back();
      stack.pop_back();
      out.push_back(s);
      for (const Edge& e : nfa_[s]) {
        const bool follow = e.kind == EdgeKind::kEpsilon || (e.kind == EdgeKind::kBegin && at_begin) ||
                            (e.kind == EdgeKind::kEnd && at_end);
        if (follow && mark_[e.to] != stamp_) mark_[e.to] = stamp_, stack.push_back(e.to);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  const std::vector<std::vector<Edge>>& nfa_;
  Fragment whole_;
  std::vector<uint32_t> mark_;           // (nfa states) == stamp_ when visited by the current closure
  uint32_t stamp_ = 0;
  std::vector<uint8_t> reads_bytes_;     // (nfa states) has a byte edge
  std::vector<uint8_t> accepts_at_end_;  // (nfa states) reaches the accept state over epsilon and $
  std::unordered_map<std::vector<int>, int, IntsHash> ids_;       // NFA set + accepting -> DFA state
  std::unordered_map<std::vector<int>, int, IntsHash> by_seeds_;  // NFA states after a byte -> DFA state
  std::vector<std::vector<int>> sets_;
};

// States from which some accepting state is reachable.
std::vector<uint8_t> live_states(const Dfa& dfa) {
  const int n = dfa.num_states(), nc = dfa.num_classes;
  std::vector<std::vector<int>> from(n);
  for (int s = 0; s < n; ++s) {
    for (int c = 0; c < nc; ++c) {
      if (const int t = dfa.table[s * nc + c]; t >= 0) from[t].push_back(s);
    }
  }
  std::vector<uint8_t> live(n);
  std::vector<int> stack;
  for (int s = 0; s < n; ++s) {
    if (dfa.accepting[s]) live[s] = 1, stack.push_back(s);
  }
  while (!stack.empty()) {
    const int t = stack.back();
    stack.pop_back();
    for (int s : from[t]) {
      if (!live[s]) live[s] = 1, stack.push_back(s);
    }
  }
  return live;
}

// Drops dead states (their transitions become kDead) and merges equivalent ones (Moore partition
// refinement); state 0 stays the start.
Result<Dfa> minimised(const Dfa& dfa) {
  const int n = dfa.num_states(), nc = dfa.num_classes;
  const std::vector<uint8_t> live = live_states(dfa);
  if (!live[0]) return MX_ERROR("pattern matches no string");
  std::vector<int> block(n, -1);
  for (int s = 0; s < n; ++s) block[s] = live[s] ? dfa.accepting[s] : -1;
  for (size_t count = 0;;) {
    std::unordered_map<std::vector<int>, int, IntsHash> ids;
    std::vector<int> refined(n, -1);
    for (int s = 0; s < n; ++s) {
      if (!live[s]) continue;
      std::vector<int> signature{block[s]};
      for (int c = 0; c < nc; ++c) {
        const int t = dfa.table[s * nc + c];
        signature.push_back(t < 0 ? -1 : block[t]);
      }
      refined[s] = ids.emplace(std::move(signature), static_cast<int>(ids.size())).first->second;
    }
    block = std::move(refined);
    if (ids.size() == count) break;  // refinement only splits: same count, same partition
    count = ids.size();
  }
  Dfa out{.byte_class = dfa.byte_class, .num_classes = nc};
  for (int s = 0; s < n; ++s) {
    if (block[s] != out.num_states()) continue;  // not the first state of a new block
    out.accepting.push_back(dfa.accepting[s]);
    for (int c = 0; c < nc; ++c) {
      const int t = dfa.table[s * nc + c];
      out.table.push_back(t < 0 ? Regex::kDead : block[t]);
    }
  }
  if (out.num_states() > Regex::kMaxStates) {
    return MX_ERROR("pattern too complex: DFA of {} states, over {}", out.num_states(), Regex::kMaxStates);
  }
  return out;
}

Result<Dfa> compile_dfa(std::string_view pattern) {
  MX_ASSIGN(Node root, Parser(pattern).parse());
  // JSON Schema patterns are unanchored: any text (valid UTF-8) may precede and follow the match.
  const Node any_text = repeat_node(set_node({{0, kMaxCodePoint}}), 0, kUnbounded);
  Node whole{.kind = NodeKind::kConcat};
  whole.kids = {any_text, std::move(root), any_text};
  NfaBuilder nfa;
  MX_ASSIGN(Fragment f, nfa.build(whole));
  MX_ASSIGN(Dfa dfa, SubsetBuilder(nfa.edges, f).build());
  return minimised(dfa);
}

}  // namespace

Result<Regex> Regex::compile(std::string_view pattern) {
  Result<Dfa> dfa = compile_dfa(pattern);
  if (!dfa.ok()) return dfa.status().with_context(fmt::format("regex /{}/", pattern));
  Regex r;
  r.byte_class_ = dfa->byte_class;
  r.num_classes_ = dfa->num_classes;
  r.table_ = std::move(dfa->table);
  r.accepting_ = std::move(dfa->accepting);
  return r;
}

Result<Regex> Regex::for_format(std::string_view format) {
  constexpr std::string_view kDate = R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))";
  constexpr std::string_view kTime = R"(([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d))";
  constexpr std::string_view kHex4 = "[0-9a-fA-F]{1,4}";  // one IPv6 group
  const std::map<std::string_view, std::string> patterns = {
      {"date-time", fmt::format("^{}[Tt]{}$", kDate, kTime)},
      {"date", fmt::format("^{}$", kDate)},
      {"time", fmt::format("^{}$", kTime)},
      {"uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"},
      {"email", R"(^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$)"},
      {"ipv4", R"(^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$)"},
      // Full form, or '::' standing for one or more zero groups (at most 7 groups written).
      {"ipv6", fmt::format("^(({0}:){{7}}{0}|({0}:){{1,7}}:|({0}:){{1,6}}:{0}|({0}:){{1,5}}(:{0}){{1,2}}|"
                           "({0}:){{1,4}}(:{0}){{1,3}}|({0}:){{1,3}}(:{0}){{1,4}}|({0}:){{1,2}}(:{0}){{1,5}}|"
                           "{0}:(:{0}){{1,6}}|:((:{0}){{1,7}}|:))$",
                           kHex4)},
  };
  const auto it = patterns.find(format);
  if (it == patterns.end()) {
    return MX_ERROR("unknown string format \"{}\" (supported: date-time, date, time, uuid, email, ipv4, ipv6)", format);
  }
  return compile(it->second);
}

bool Regex::matches(std::string_view text) const {
  int state = start();
  for (char c : text) state = next(state, static_cast<uint8_t>(c));
  return accepting(state);
}

}  // namespace mx::grammar
