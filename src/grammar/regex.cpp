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

#include "grammar/regex_parse.h"

namespace mx::grammar {
namespace {

using namespace regex_detail;

// Subset construction passes through states that minimisation later merges or drops (dead ones):
// this bounds its time and memory; Regex::kMaxStates bounds the result.
constexpr size_t kMaxBuildStates = 4 * Regex::kMaxStates;
// Nested counted repetition multiplies ((.{64}){64} is 4096 copies of '.'): bound the NFA too.
constexpr size_t kMaxNfaStates = 100000;

// ---- UTF-8 byte-range sequences ----

using ByteSeq = std::vector<std::pair<uint8_t, uint8_t>>;  // one byte range per position

int encode_utf8(uint32_t cp, uint8_t out[4]) {
  static constexpr uint8_t kLead[] = {0, 0, 0xC0, 0xE0, 0xF0};  // by encoded length
  const int n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  for (int i = n - 1; i > 0; --i, cp >>= 6) out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  out[0] = static_cast<uint8_t>(kLead[n] | cp);
  return n;
}

// Where [lo, hi] must be split so that each part's encodings have one length and range
// independently at each byte position (as RE2 and utf8-ranges split), or 0 when nowhere.
uint32_t utf8_cut(uint32_t lo, uint32_t hi) {
  for (uint32_t last : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= last && hi > last) return last + 1;
  }
  for (int i = 1; i < 4 && hi > 0x7F; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;  // the bits of the last i bytes
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) return (lo | m) + 1;
    if ((hi & m) != m) return hi & ~m;
  }
  return 0;
}

// Appends byte-range sequences matching exactly the UTF-8 encodings of [lo, hi] (no surrogates).
void split_utf8(uint32_t lo, uint32_t hi, std::vector<ByteSeq>& out) {
  if (const uint32_t cut = utf8_cut(lo, hi); cut != 0) {
    split_utf8(lo, cut - 1, out);
    split_utf8(cut, hi, out);
    return;
  }
  uint8_t a[4], b[4];
  const int n = encode_utf8(lo, a);
  encode_utf8(hi, b);
  ByteSeq seq;
  for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
  out.push_back(std::move(seq));
}

// Byte-range sequences for the code points of set that are also in text (normalized, no surrogates).
std::vector<ByteSeq> utf8_sequences(const CharSet& set, const CharSet& text) {
  std::vector<ByteSeq> out;
  for (auto [lo, hi] : set) {
    for (auto [vlo, vhi] : text) {
      if (std::max(lo, vlo) <= std::min(hi, vhi)) split_utf8(std::max(lo, vlo), std::min(hi, vhi), out);
    }
  }
  return out;
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
  explicit NfaBuilder(CharSet text) : text_(std::move(text)) {}

  std::vector<std::vector<Edge>> edges;  // (nfa states) outgoing edges

  Result<Fragment> build(const Ast& node) {
    if (edges.size() > kMaxNfaStates) return MX_ERROR("pattern too complex (NFA over {} states)", kMaxNfaStates);
    if (node.kind == AstKind::kSet) return set_fragment(node.set);
    if (node.kind == AstKind::kRepeat) return repeat_fragment(node);
    const Fragment f{add_state(), add_state()};
    if (node.kind == AstKind::kBegin || node.kind == AstKind::kEnd) {
      link(f.in, f.out, node.kind == AstKind::kBegin ? EdgeKind::kBegin : EdgeKind::kEnd);
      return f;
    }
    int out = f.in;
    for (const Ast& kid : node.kids) {
      MX_ASSIGN(Fragment k, build(kid));
      if (node.kind == AstKind::kAlt) {  // side by side
        link(f.in, k.in);
        link(k.out, f.out);
      } else {  // kConcat: one after another
        link(out, k.in);
        out = k.out;
      }
    }
    if (node.kind == AstKind::kConcat) link(out, f.out);
    return f;
  }

 private:
  int add_state() {
    edges.emplace_back();
    return static_cast<int>(edges.size()) - 1;
  }
  void link(int from, int to, EdgeKind kind = EdgeKind::kEpsilon) { edges[from].push_back({kind, 0, 0, to}); }

  Fragment set_fragment(const CharSet& set) {
    const Fragment f{add_state(), add_state()};
    for (const ByteSeq& seq : utf8_sequences(set, text_)) {
      for (size_t i = 0, from = f.in; i < seq.size(); ++i) {
        const int to = i + 1 == seq.size() ? f.out : add_state();
        edges[from].push_back({EdgeKind::kByte, seq[i].first, seq[i].second, to});
        from = to;
      }
    }
    return f;
  }

  // body{min} then body* or (max - min) times body?
  Result<Fragment> repeat_fragment(const Ast& node) {
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

  CharSet text_;  // the code points any character may be
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

// Marks the nodes from which one of `targets` is reachable, given each node's predecessors.
std::vector<uint8_t> reaching(const std::vector<std::vector<int>>& preds, const std::vector<int>& targets) {
  std::vector<uint8_t> mark(preds.size());
  std::vector<int> stack;
  for (int t : targets) {
    if (!mark[t]) mark[t] = 1, stack.push_back(t);
  }
  while (!stack.empty()) {
    const int t = stack.back();
    stack.pop_back();
    for (int s : preds[t]) {
      if (!mark[s]) mark[s] = 1, stack.push_back(s);
    }
  }
  return mark;
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
      : nfa_(nfa), whole_(whole), mark_(nfa.size()), reads_bytes_(nfa.size()) {
    std::vector<std::vector<int>> preds(nfa.size());  // over epsilon and $ edges
    for (size_t n = 0; n < nfa.size(); ++n) {
      for (const Edge& e : nfa[n]) {
        if (e.kind == EdgeKind::kByte) reads_bytes_[n] = 1;
        if (e.kind == EdgeKind::kEpsilon || e.kind == EdgeKind::kEnd) preds[e.to].push_back(static_cast<int>(n));
      }
    }
    accepts_at_end_ = reaching(preds, {whole.out});
  }

  // DFA state i stands for the NFA states of sets_[i] (those with byte edges) plus whether the
  // text read so far matches; any two with equal (set, accepting) behave alike.
  Result<Dfa> build() {
    Dfa dfa;
    assign_byte_classes(nfa_, dfa);
    intern({whole_.in}, /*at_begin=*/true, dfa);
    std::vector<std::vector<int>> seeds(dfa.num_classes);  // (classes) NFA states after one byte
    for (size_t s = 0; s < sets_.size(); ++s) {
      if (sets_.size() > kMaxBuildStates) return MX_ERROR("pattern too complex: DFA over {} states", kMaxBuildStates);
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
        if (it == by_seeds_.end()) it = by_seeds_.emplace(v, intern(v, /*at_begin=*/false, dfa)).first;
        dfa.table.push_back(it->second);
      }
    }
    return dfa;
  }

 private:
  // The DFA state for the closure of seeds (at_begin: at the start of the text, where ^ holds).
  int intern(const std::vector<int>& seeds, bool at_begin, Dfa& dfa) {
    std::vector<int> key;
    bool accepts = false;
    for (int n : closure(seeds, at_begin)) {
      if (reads_bytes_[n]) key.push_back(n);
      accepts = accepts || accepts_at_end_[n];
    }
    if (at_begin) {  // the empty text: ^ and $ edges may alternate
      const std::vector<int> both = closure(seeds, /*at_begin=*/true, /*at_end=*/true);
      accepts = std::binary_search(both.begin(), both.end(), whole_.out);
    }
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
  std::vector<std::vector<int>> preds(n);
  std::vector<int> accepting;
  for (int s = 0; s < n; ++s) {
    if (dfa.accepting[s]) accepting.push_back(s);
    for (int c = 0; c < nc; ++c) {
      if (const int t = dfa.table[s * nc + c]; t >= 0) preds[t].push_back(s);
    }
  }
  return reaching(preds, accepting);
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

Result<Dfa> compile_dfa(std::string_view pattern, Regex::Alphabet alphabet) {
  MX_ASSIGN(Ast root, parse_pattern(pattern));
  CharSet excluded = {{0xD800, 0xDFFF}};  // surrogates have no UTF-8
  if (alphabet == Regex::Alphabet::kJsonUnescaped) excluded.insert(excluded.end(), {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
  // JSON Schema patterns are unanchored: any text (valid UTF-8) may precede and follow the match.
  const Ast any_text = repeat_ast(set_ast({{0, kMaxCodePoint}}), 0, kUnbounded);
  Ast whole{.kind = AstKind::kConcat};
  whole.kids = {any_text, std::move(root), any_text};
  NfaBuilder nfa(complement(normalized(excluded)));
  MX_ASSIGN(Fragment f, nfa.build(whole));
  MX_ASSIGN(Dfa dfa, SubsetBuilder(nfa.edges, f).build());
  return minimised(dfa);
}

}  // namespace

Result<Regex> Regex::compile(std::string_view pattern, Alphabet alphabet) {
  Result<Dfa> dfa = compile_dfa(pattern, alphabet);
  if (!dfa.ok()) return dfa.status().with_context(fmt::format("regex /{}/", pattern));
  Regex r;
  r.byte_class_ = dfa->byte_class;
  r.num_classes_ = dfa->num_classes;
  r.table_ = std::move(dfa->table);
  r.accepting_ = std::move(dfa->accepting);
  r.compute_distances();
  return r;
}

// distance_[s]: the fewest bytes from s to a full match (relaxed until stable; states <= kMaxStates).
void Regex::compute_distances() {
  const int n = num_states();
  constexpr int32_t kFar = INT32_MAX / 2;
  distance_.assign(size_t(n), kFar);
  for (int s = 0; s < n; ++s)
    if (accepting_[size_t(s)]) distance_[size_t(s)] = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (int s = 0; s < n; ++s)
      for (int c = 0; c < num_classes_; ++c) {
        const int32_t t = table_[size_t(s) * size_t(num_classes_) + size_t(c)];
        if (t >= 0 && distance_[size_t(t)] + 1 < distance_[size_t(s)]) {
          distance_[size_t(s)] = distance_[size_t(t)] + 1;
          changed = true;
        }
      }
  }
}

Result<Regex> Regex::for_format(std::string_view format, Alphabet alphabet) {
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
  return compile(it->second, alphabet);
}

bool Regex::matches(std::string_view text) const {
  int state = start();
  for (char c : text) state = next(state, static_cast<uint8_t>(c));
  return accepting(state);
}

}  // namespace mx::grammar
