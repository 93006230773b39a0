// Tests of grammar::Regex: full-match tables for patterns JSON Schemas use, property tests against
// std::regex (ECMAScript, regex_search) and PCRE2 (UTF mode) on random patterns, liveness of every
// state, exhaustive UTF-8 checks of '.' and negated classes, errors, and the format regexes.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "grammar/regex.h"
#include "test_util.h"

namespace mx::grammar {
namespace {

std::optional<Regex> compiled(std::string_view pattern) {
  Result<Regex> r = Regex::compile(pattern);
  if (!r.ok()) {
    ADD_FAILURE() << "compile /" << pattern << "/: " << r.status().message();
    return std::nullopt;
  }
  return std::move(r).value();
}

// The state after text, through the interface the JSON matcher uses (kDead once dead).
int run(const Regex& re, std::string_view text) {
  int state = re.start();
  for (char c : text) state = re.next(state, static_cast<uint8_t>(c));
  return state;
}
bool full_match(const Regex& re, std::string_view text) { return re.accepting(run(re, text)); }

// Shortest bytes (over `bytes`) that take `state` to an accepting state, or nullopt.
std::optional<std::string> continuation(const Regex& re, int state, std::string_view bytes) {
  std::vector<int> parent(re.num_states(), -2), via(re.num_states(), 0);
  std::deque<int> queue{state};
  parent[state] = -1;
  while (!queue.empty()) {
    const int s = queue.front();
    queue.pop_front();
    if (re.accepting(s)) {
      std::string out;
      for (int t = s; parent[t] != -1; t = parent[t]) out.insert(out.begin(), static_cast<char>(via[t]));
      return out;
    }
    for (char c : bytes) {
      const int t = re.next(s, static_cast<uint8_t>(c));
      if (t >= 0 && parent[t] == -2) parent[t] = s, via[t] = static_cast<uint8_t>(c), queue.push_back(t);
    }
  }
  return std::nullopt;
}

std::string all_bytes() {
  std::string s(256, '\0');
  for (int b = 0; b < 256; ++b) s[b] = static_cast<char>(b);
  return s;
}

// Every transition that does not return kDead leads to a state with an accepting continuation.
void expect_all_states_live(const Regex& re, std::string_view pattern) {
  const std::string bytes = all_bytes();
  for (int s = 0; s < re.num_states(); ++s) {
    EXPECT_TRUE(re.can_accept_more(s));
    ASSERT_TRUE(continuation(re, s, bytes)) << "/" << pattern << "/ state " << s << " cannot finish";
  }
  EXPECT_EQ(re.next(Regex::kDead, 'a'), Regex::kDead);
  EXPECT_FALSE(re.can_accept_more(Regex::kDead));
}

struct Case {
  std::string pattern;
  std::vector<std::string> match, no_match;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> kCases = {
      {R"(^\d{3}-\d{3}-\d{4}$)", {"555-123-4567"}, {"555-1234-567", "5551234567", "555-123-4567 ", "a555-123-4567"}},
      {R"(^\(\d{3}\) \d{3}-\d{4}$)", {"(555) 123-4567"}, {"555 123-4567", "(555)123-4567"}},
      {R"(^\+?[1-9]\d{1,14}$)", {"+14155552671", "14155552671", "12"}, {"+0123", "+", "1", "+1234567890123456"}},
      {R"(^[A-Z]{2}-\d{3,5}$)", {"AB-123", "XY-12345"}, {"AB-12", "AB-123456", "ab-123", "A-123", "ABC-123", ""}},
      {"^(cat|dog|bird)s?$", {"cat", "dogs", "bird"}, {"cow", "catss", "", "catdog"}},
      {"^((ab|cd)+x)?(y|z)$", {"y", "abcdxz", "ababxy"}, {"x", "abxyz", "abx", "xy"}},
      {R"(^[a-z0-9_\-\.]+$)", {"a.b-c_9", "-"}, {"A", "a b", ""}},
      {R"(^[\w.+-]+@[\w-]+\.[\w.]+$)", {"john.doe+x@mail-srv.example.com"}, {"john@example", "@a.b", "a b@c.d"}},
      {"^é+$", {"é", "ééé"}, {"", "e", "\xC3", "é e", "\xC3\xC3"}},
      {"^[α-ω]+$", {"αβγ", "ω"}, {"abc", "Ω"}},
      {"^.$", {"a", "é", "€", "😀", " "}, {"", "ab", "\n", "\r", "\u2028", "\xFF", "\xC0\x80", "\xED\xA0\x80"}},
      {"ab", {"ab", "xxabyy", "éab", "a\nab"}, {"a", "ba", "a b", ""}},
      {"^ab", {"ab", "abzzz"}, {"zab", "a"}},
      {"ab$", {"zzab", "ab"}, {"abz", "b"}},
      {"", {"", "anything", "é"}, {"\xFF"}},
      {"^$", {""}, {"a"}},
      {"^a*?b+?c??$", {"b", "aabbc"}, {"ac", ""}},
      {"^[^0-9]+$", {"abc", "é", "\n"}, {"a1", ""}},
      {R"(^\u00e9\x41\u{1F600}\uD83D\uDE00$)", {"éA😀😀"}, {"eA😀😀"}},
      {R"(^\S+\s\S+$)", {"a b", "a\tb", "a\u00a0b", "a\u3000b"}, {"ab", "a  b"}},
      {R"(^(?:\d{1,3}\.){3}\d{1,3}$)", {"192.168.0.1"}, {"1.2.3", "1.2.3.4.5", "1234.1.1.1"}},
      {"^a{2,}$", {"aa", "aaaa"}, {"a", ""}},
      {"^(a|b)*abb$", {"abb", "aababb"}, {"ab", "abba"}},
      {R"(^[\]\[]+$)", {"[]]["}, {"[a]"}},
      {"^[-a]+$", {"-a-"}, {"b"}},
      {"^[a-]+$", {"a-"}, {"b"}},
      {R"(^\$\d+(\.\d{2})?$)", {"$10", "$10.25"}, {"$10.2", "10"}},
      {"^a|b$", {"ab", "xb", "a", "axx"}, {"xa", "bx"}},
      {R"(^(?<year>\d{4})-(?<mon>\d\d)$)", {"2024-01"}, {"2024-1"}},
      {"^x{0}y$", {"y"}, {"xy"}},
      {"^[^]$", {"\n", "a"}, {""}},
      {R"(^\/\"\-\.\\$)", {R"(/"-.\)"}, {"/"}},
      {R"(^[\d\s]+\D$)", {"1 2x"}, {"12"}},
      {R"(^\W\w$)", {"-a", "é_"}, {"aa"}},
      {"^(a|ab)(c|bcd)(d*)$", {"abcd", "abcdd", "acd"}, {"ab"}},
      {"^((a*)*|b)+$", {"", "aab", "bbaa"}, {"c"}},
      {"^a.c$", {"abc", "a€c"}, {"a\nc", "ac"}},
      {"^{a}$", {"{a}"}, {"a"}},  // '{' that cannot be a quantifier is a literal (Annex B)
  };
  return kCases;
}

TEST(Regex, FullMatchTable) {
  for (const Case& c : cases()) {
    if (c.match.empty()) continue;
    auto re = compiled(c.pattern);
    ASSERT_TRUE(re);
    for (const auto& s : c.match) EXPECT_TRUE(full_match(*re, s)) << "/" << c.pattern << "/ should match \"" << s << "\"";
    for (const auto& s : c.no_match) EXPECT_FALSE(full_match(*re, s)) << "/" << c.pattern << "/ should not match \"" << s << "\"";
    for (const auto& s : c.match) EXPECT_TRUE(re->matches(s));
    expect_all_states_live(*re, c.pattern);
  }
}

TEST(Regex, DeadBytesAndMinimalSize) {
  auto re = compiled(R"(^[A-Z]{2}-\d{3,5}$)");
  ASSERT_TRUE(re);
  // start, A, AB, AB-, 1, 2, 3 digits (accepting), 4, 5: dead states removed, the rest minimal.
  EXPECT_EQ(re->num_states(), 9);
  EXPECT_EQ(re->next(re->start(), 'a'), Regex::kDead);
  EXPECT_EQ(run(*re, "AB-1x"), Regex::kDead);
  const int full = run(*re, "AB-12345");
  ASSERT_TRUE(re->accepting(full));
  for (int b = 0; b < 256; ++b) EXPECT_EQ(re->next(full, static_cast<uint8_t>(b)), Regex::kDead) << b;
  const int partial = run(*re, "AB-12");
  EXPECT_FALSE(re->accepting(partial));
  EXPECT_TRUE(re->can_accept_more(partial));
  // Unanchored: a match anywhere, so after one every valid continuation stays accepting.
  auto ab = compiled("ab");
  ASSERT_TRUE(ab);
  EXPECT_TRUE(ab->accepting(run(*ab, "xaby")));
  EXPECT_EQ(run(*ab, "xab\xFF"), Regex::kDead);  // never invalid UTF-8
  EXPECT_FALSE(ab->accepting(run(*ab, "xab\xC3")));  // inside a character
}

// The JSON matcher emits pattern-constrained strings without escapes: with kJsonUnescaped, no state
// continues with '"', '\' or a control byte, and every state can still finish without them.
TEST(Regex, JsonUnescapedAlphabet) {
  std::string allowed_bytes;
  for (int b = 0x20; b < 256; ++b) {
    if (b != '"' && b != '\\') allowed_bytes += static_cast<char>(b);
  }
  for (const char* pattern : {"^a.b$", R"(^(a|")b$)", R"(^a[^x]*$)", R"(\S+)", "", R"(^a(\\|b)$)", R"(^\W$)"}) {
    Result<Regex> re = Regex::compile(pattern, Regex::Alphabet::kJsonUnescaped);
    ASSERT_TRUE(re.ok()) << pattern << ": " << re.status().message();
    for (int s = 0; s < re->num_states(); ++s) {
      for (int b = 0; b < 0x20; ++b) EXPECT_EQ(re->next(s, static_cast<uint8_t>(b)), Regex::kDead) << pattern;
      EXPECT_EQ(re->next(s, '"'), Regex::kDead) << pattern;
      EXPECT_EQ(re->next(s, '\\'), Regex::kDead) << pattern;
      EXPECT_TRUE(continuation(*re, s, allowed_bytes)) << "/" << pattern << "/ state " << s;
    }
  }
  auto dot = Regex::compile("^a.b$", Regex::Alphabet::kJsonUnescaped);
  EXPECT_TRUE(full_match(*dot, "a€b"));
  EXPECT_FALSE(full_match(*dot, "a\"b"));
  auto any = compiled("^a.b$");  // the default alphabet keeps ECMAScript's '.'
  ASSERT_TRUE(any);
  EXPECT_TRUE(full_match(*any, "a\"b"));
  Result<Regex> quote_only = Regex::compile(R"(^"$)", Regex::Alphabet::kJsonUnescaped);
  ASSERT_FALSE(quote_only.ok());
  EXPECT_NE(quote_only.status().message().find("matches no string"), std::string::npos);
}

// ---- Random patterns against std::regex ----

class PatternGen {
 public:
  explicit PatternGen(uint64_t seed, std::vector<std::string> atoms) : rng_(seed), atoms_(std::move(atoms)) {}

  std::string pattern() {
    std::string p = pick(3) == 0 ? "^" : "";
    p += alternation(2);
    return p + (pick(3) == 0 ? "$" : "");
  }
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

 private:
  std::string alternation(int depth) {
    std::string s = sequence(depth);
    while (pick(4) == 0) s.append("|").append(sequence(depth));
    return s;
  }
  std::string sequence(int depth) {
    std::string s;
    for (int n = 1 + pick(3); n > 0; --n) {
      if (pick(25) == 0) {  // an anchor inside the pattern (never quantified)
        s += pick(2) ? "^" : "$";
        continue;
      }
      s += atom(depth) + quantifier();
    }
    return s;
  }
  std::string atom(int depth) {
    if (depth > 0 && pick(5) == 0) return (pick(2) ? "(" : "(?:") + alternation(depth - 1) + ")";
    return atoms_[pick(static_cast<int>(atoms_.size()))];
  }
  std::string quantifier() {
    static const char* kQuant[] = {"", "", "", "", "*", "+", "?", "{2}", "{0,2}", "{1,3}", "{2,}", "*?", "+?", "??"};
    return kQuant[pick(sizeof(kQuant) / sizeof(kQuant[0]))];
  }

  std::mt19937_64 rng_;
  std::vector<std::string> atoms_;
};

// Random texts over `alphabet` (each entry one character, perhaps several bytes), up to 6 long.
std::string random_text(PatternGen& gen, const std::vector<std::string>& alphabet) {
  std::string s;
  for (int n = gen.pick(7); n > 0; --n) s += alphabet[gen.pick(static_cast<int>(alphabet.size()))];
  return s;
}

// Compares full matches of the DFA with `oracle_search` (an unanchored search by another engine)
// on random texts; where the DFA dies, extensions must not match either; where it lives, the
// shortest continuation it offers over the alphabet's bytes must match.
template <typename Oracle>
void compare_with_oracle(uint64_t seed, const std::vector<std::string>& atoms,
                         const std::vector<std::string>& alphabet, Oracle&& oracle_search) {
  PatternGen gen(seed, atoms);
  std::string alphabet_bytes;
  for (const auto& a : alphabet) alphabet_bytes += a;
  int compared = 0, no_match_patterns = 0, too_complex = 0;
  for (int p = 0; p < 1000; ++p) {
    const std::string pattern = gen.pattern();
    auto search = [&](const std::string& text) { return oracle_search(pattern, text); };
    Result<Regex> re = Regex::compile(pattern);
    if (!re.ok() && re.status().message().find("too complex") != std::string::npos) {
      ++too_complex;  // an unanchored pattern's DFA can be exponential
      continue;
    }
    if (!re.ok()) {
      ASSERT_NE(re.status().message().find("matches no string"), std::string::npos) << re.status().message();
      for (int i = 0; i < 20; ++i) EXPECT_FALSE(search(random_text(gen, alphabet))) << "/" << pattern << "/";
      ++no_match_patterns;
      continue;
    }
    for (int i = 0; i < 20; ++i) {
      const std::string text = random_text(gen, alphabet);
      const int state = run(*re, text);
      ASSERT_EQ(re->accepting(state), search(text)) << "/" << pattern << "/ on \"" << text << "\"";
      ++compared;
      if (state == Regex::kDead) {
        for (int k = 0; k < 3; ++k) {
          const std::string longer = text + random_text(gen, alphabet);
          EXPECT_FALSE(search(longer)) << "/" << pattern << "/ died on a prefix of \"" << longer << "\"";
        }
      } else if (auto more = continuation(*re, state, alphabet_bytes)) {
        EXPECT_TRUE(search(text + *more)) << "/" << pattern << "/ offered \"" << text << *more << "\"";
      }
    }
    if (p % 100 == 0) expect_all_states_live(*re, pattern);
  }
  EXPECT_GT(compared, 17000);
  EXPECT_LT(no_match_patterns, 100);
  EXPECT_LT(too_complex, 50);
}

TEST(Regex, RandomPatternsAgreeWithStdRegex) {
  const std::vector<std::string> atoms = {"a", "b", "c", "1", ".", "\\.", "\\d", "\\D", "\\w", "\\W", "\\s",
                                          "[ab]", "[^a]", "[a-c]", "[^\\d ]", "[.1]", "[\\w.]", "\\S"};
  const std::vector<std::string> alphabet = {"a", "b", "c", "1", ".", " ", "\t", "-"};
  compare_with_oracle(/*seed=*/20240131, atoms, alphabet, [](const std::string& pattern, const std::string& text) {
    // libstdc++'s backtracking executor is exponential on nested quantifiers ((a*)*); its
    // documented __polynomial extension picks the breadth-first one (same matches, no backrefs).
#ifdef __GLIBCXX__
    constexpr auto kFlags = std::regex::ECMAScript | std::regex_constants::__polynomial;
#else
    constexpr auto kFlags = std::regex::ECMAScript;
#endif
    thread_local std::string last;
    thread_local std::regex re;
    if (pattern != last) re = std::regex(pattern, kFlags), last = pattern;
    return std::regex_search(text, re);
  });
}

// std::regex works on bytes; PCRE2 in UTF mode works on code points like the DFA does.
TEST(Regex, RandomUtf8PatternsAgreeWithPcre2) {
  const std::vector<std::string> atoms = {"a", "é", "€", "😀", ".", "[^a]", "[é€]", "[a-é]", "[^é-😀]", "\\d", "\\D", "1"};
  const std::vector<std::string> alphabet = {"a", "é", "€", "😀", "1", "z"};
  compare_with_oracle(/*seed=*/7, atoms, alphabet, [](const std::string& pattern, const std::string& text) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF,
                                     &err, &offset, nullptr);
    EXPECT_NE(code, nullptr) << pattern;
    if (code == nullptr) return false;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
    const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0, md, nullptr);
    pcre2_match_data_free(md);
    pcre2_code_free(code);
    return rc >= 0;
  });
}

// ---- UTF-8 ----

// UTF-8 of one code point, written for the test independently of regex.cpp.
std::string encode(uint32_t cp) {
  auto byte = [](uint32_t v) { return static_cast<char>(v); };
  if (cp < 0x80) return {byte(cp)};
  if (cp < 0x800) return {byte(0xC0 | cp >> 6), byte(0x80 | (cp & 0x3F))};
  if (cp < 0x10000) return {byte(0xE0 | cp >> 12), byte(0x80 | (cp >> 6 & 0x3F)), byte(0x80 | (cp & 0x3F))};
  return {byte(0xF0 | cp >> 18), byte(0x80 | (cp >> 12 & 0x3F)), byte(0x80 | (cp >> 6 & 0x3F)), byte(0x80 | (cp & 0x3F))};
}

// The code point whose UTF-8 is exactly s, or nullopt (invalid, overlong, surrogate): decodes
// loosely, then requires the test's own encoder to give back the same bytes.
std::optional<uint32_t> decode_exact(const std::string& s) {
  const auto lead = static_cast<uint8_t>(s[0]);
  const size_t n = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
  if (s.size() != n) return std::nullopt;
  uint32_t cp = n == 1 ? lead : lead & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) cp = cp << 6 | (static_cast<uint8_t>(s[i]) & 0x3F);
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || encode(cp) != s) return std::nullopt;
  return cp;
}

struct Walk {
  size_t accepted = 0, wrong = 0;  // wrong: accepted but not the UTF-8 of an allowed code point
  std::string first_wrong;
};

// Walks every byte string the DFA keeps alive (up to 5 bytes), checking each accepted one.
void walk_accepted(const Regex& re, int state, std::string& prefix, const std::function<bool(uint32_t)>& allowed,
                   Walk& walk) {
  if (re.accepting(state)) {
    const std::optional<uint32_t> cp = decode_exact(prefix);
    ++walk.accepted;
    if (!cp || !allowed(*cp)) {
      if (walk.wrong++ == 0) walk.first_wrong = prefix;
    }
  }
  if (prefix.size() == 5 || walk.wrong > 0) return;  // after a failure, stop (a broken DFA may live on)
  for (int b = 0; b < 256; ++b) {
    const int t = re.next(state, static_cast<uint8_t>(b));
    if (t == Regex::kDead) continue;
    prefix.push_back(static_cast<char>(b));
    walk_accepted(re, t, prefix, allowed, walk);
    prefix.pop_back();
  }
}

// For a one-character pattern the accepted byte strings are exactly the encodings of the code points
// `allowed` admits (surrogates excluded): no invalid or overlong sequence, nothing missing.
void expect_exact_code_points(std::string_view pattern, const std::function<bool(uint32_t)>& allowed) {
  auto re = compiled(pattern);
  ASSERT_TRUE(re);
  size_t expected = 0;
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) expected += (cp < 0xD800 || cp > 0xDFFF) && allowed(cp);
  std::string prefix;
  Walk walk;
  walk_accepted(*re, re->start(), prefix, allowed, walk);
  EXPECT_EQ(walk.wrong, 0u) << "/" << pattern << "/ accepts " << ::testing::PrintToString(walk.first_wrong);
  EXPECT_EQ(walk.accepted, expected) << "/" << pattern << "/";
}

TEST(Regex, Utf8CodePointsExactly) {
  auto not_line_end = [](uint32_t cp) { return cp != '\n' && cp != '\r' && cp != 0x2028 && cp != 0x2029; };
  expect_exact_code_points("^.$", not_line_end);
  expect_exact_code_points("^[^a]$", [](uint32_t cp) { return cp != 'a'; });
  expect_exact_code_points("^[^]$", [](uint32_t) { return true; });
  expect_exact_code_points("^[\\u0800-\\uFFFF]$", [](uint32_t cp) { return cp >= 0x800 && cp <= 0xFFFF; });
  expect_exact_code_points("^[\\x7F-\\u{10000}é]$", [](uint32_t cp) { return (cp >= 0x7F && cp <= 0x10000) || cp == 0xE9; });
  expect_exact_code_points("^\\S$", [](uint32_t cp) {
    const bool space = (cp >= 9 && cp <= 13) || cp == ' ' || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
                       cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
    return !space;
  });
}

// ---- Errors ----

TEST(Regex, ErrorsNameTheConstruct) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"((a)\1)", "backreference"}, {R"((?<n>a)\k<n>)", "backreference"}, {"(?=a)", "lookahead"},
      {"a(?!b)", "lookahead"}, {"(?<=a)b", "lookbehind"}, {"(?<!a)b", "lookbehind"},
      {R"(\bfoo)", "word boundary \\b"}, {R"(\Bx)", "word boundary \\B"}, {"(?i)abc", "inline flags"},
      {R"(\p{L})", "unicode property"}, {"(ab", "missing ')'"}, {"ab)", "unmatched ')'"},
      {"[ab", "missing ']'"}, {"*a", "nothing to repeat"}, {"a**", "nothing to repeat"},
      {"a{2}{3}", "nothing to repeat"}, {"[z-a]", "out of order"}, {"a{65}", "above 64"},
      {"a{1,65}", "above 64"}, {"a{3,2}", "m < n"}, {R"(\q)", "unknown escape \\q"},
      {"a\\", "lone backslash"}, {"^*", "quantifier after an anchor"}, {R"(\u12)", "four hex digits"},
      {R"(\uD800)", "lone surrogate"}, {"a\xFF", "invalid UTF-8"}, {R"(\012)", "octal"},
      {"(a|b)*a(a|b){12}", "too complex"}, {"(.{64}){64}", "too complex"},
      {"a^b", "matches no string"}, {R"([^\s\S])", "matches no string"}, {"^[]$", "matches no string"},
  };
  for (const auto& [pattern, needle] : bad) {
    Result<Regex> re = Regex::compile(pattern);
    ASSERT_FALSE(re.ok()) << "/" << pattern << "/ compiled";
    const std::string msg = re.status().message();
    EXPECT_NE(msg.find(needle), std::string::npos) << "/" << pattern << "/: " << msg;
    EXPECT_NE(msg.find("regex /" + pattern + "/"), std::string::npos) << msg;
  }
}

TEST(Regex, ComplexButBoundedPatternsCompile) {
  auto re = compiled("(a|b)*a(a|b){8}");  // 2^9 states: under the limit
  ASSERT_TRUE(re);
  EXPECT_LE(re->num_states(), Regex::kMaxStates);
  EXPECT_TRUE(full_match(*re, "xxabbbbbbbb"));
  EXPECT_FALSE(full_match(*re, "xxbbbbbbbbb"));
  auto wide = compiled("^.{64}$");
  ASSERT_TRUE(wide);
  EXPECT_TRUE(full_match(*wide, std::string(63, 'x') + "é"));
  EXPECT_FALSE(full_match(*wide, std::string(63, 'x')));
}

// ---- Formats ----

void expect_format(std::string_view format, const std::vector<std::string>& good, const std::vector<std::string>& bad) {
  Result<Regex> re = Regex::for_format(format);
  ASSERT_TRUE(re.ok()) << format << ": " << re.status().message();
  for (const auto& s : good) EXPECT_TRUE(full_match(*re, s)) << format << " should accept \"" << s << "\"";
  for (const auto& s : bad) EXPECT_FALSE(full_match(*re, s)) << format << " should refuse \"" << s << "\"";
  expect_all_states_live(*re, format);
}

TEST(Regex, Formats) {
  expect_format("date-time", {"2024-01-31T12:34:56Z", "2024-01-31T12:34:56.123+02:00", "1999-12-31t23:59:60z"},
                {"2024-13-01T00:00:00Z", "2024-01-31 12:34", "2024-01-31T12:34", "2024-01-31T25:00:00Z",
                 "2024-01-31T12:34:56", "2024-01-32T12:34:56Z", "2024-01-31T12:34:56.Z"});
  expect_format("date", {"2024-02-29", "0001-01-01"}, {"2024-2-29", "2024-02-29T00:00:00Z", "24-02-29"});
  expect_format("time", {"12:34:56Z", "00:00:00.5-08:00"}, {"12:34", "24:00:00Z", "12:34:56"});
  expect_format("uuid", {"123e4567-e89b-12d3-a456-426614174000", "123E4567-E89B-12D3-A456-426614174000"},
                {"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g", "123e4567-e89b-12d3-a456-4266141740000"});
  expect_format("email", {"a.b+c@example.co.uk", "x@y.io"}, {"a@b", "@example.com", "a b@example.com", "a@@b.com"});
  expect_format("ipv4", {"192.168.0.1", "0.0.0.0", "255.255.255.255"}, {"256.1.1.1", "1.2.3", "01.2.3.4", "1.2.3.4."});
  expect_format("ipv6", {"::1", "::", "2001:db8::1", "fe80::1:2:3:4", "1:2:3:4:5:6:7:8", "1::", "1:2:3:4:5:6:7::"},
                {"1:2:3:4:5:6:7:8:9", ":::", "12345::", "1::2::3", "1:2:3:4:5:6:7", "g::1"});
  Result<Regex> unknown = Regex::for_format("hostname-ish");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown string format"), std::string::npos);
}

}  // namespace
}  // namespace mx::grammar
