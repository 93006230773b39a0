// JsonMatcher: the byte steps of strings (escapes, strict UTF-8, lengths in code points, patterns),
// numbers (JSON's grammar, bounded digits; bounds checked ahead so that every accepted digit can
// still end inside them) and literal sets (enum, const, true/false/null).
#include <cmath>
#include <iterator>

#include "grammar/json_matcher.h"

namespace mx::grammar {
namespace {

bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

int32_t utf8_state(int rem, int lo, int hi) { return rem == 0 ? 0 : rem | lo << 8 | hi << 16; }

// The UTF-8 bytes still due after lead byte c and the range of the next one (rem 0: not a lead).
int32_t utf8_lead(uint8_t c) {
  if (c >= 0xC2 && c <= 0xDF) return utf8_state(1, 0x80, 0xBF);
  if (c == 0xE0) return utf8_state(2, 0xA0, 0xBF);
  if (c == 0xED) return utf8_state(2, 0x80, 0x9F);
  if (c >= 0xE1 && c <= 0xEF) return utf8_state(2, 0x80, 0xBF);
  if (c == 0xF0) return utf8_state(3, 0x90, 0xBF);
  if (c >= 0xF1 && c <= 0xF3) return utf8_state(3, 0x80, 0xBF);
  if (c == 0xF4) return utf8_state(3, 0x80, 0x8F);
  return 0;
}

// 10^n; exact in a double up to 10^22 (number_feasible calls it per digit of every token it walks).
double pow10(int n) {
  static constexpr double kExact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                      1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  if (n >= 0 && n < int(std::size(kExact))) return kExact[n];
  double p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

bool meets_bounds(const SchemaNode& n, double lo, double hi, bool lo_closed, bool hi_closed) {
  if (n.has_min && (n.minimum > lo || (n.minimum == lo && n.exclusive_min))) lo = n.minimum, lo_closed = !n.exclusive_min;
  if (n.has_max && (n.maximum < hi || (n.maximum == hi && n.exclusive_max))) hi = n.maximum, hi_closed = !n.exclusive_max;
  return lo < hi || (lo == hi && lo_closed && hi_closed);
}

}  // namespace

void JsonMatcher::step_string(const Stack* top, uint8_t c, Out& out) const {
  const Frame& f = top->f;
  const SchemaNode* n = f.node >= 0 ? &node(f.node) : nullptr;
  const Regex* re = n && n->regex >= 0 ? &schema_->regexes[size_t(n->regex)] : nullptr;
  const bool counted = n && (n->min_length > 0 || n->max_length >= 0);
  Frame g = f;
  auto feed_regex = [&] {
    if (re) g.d = re->next(f.d, c);
    return !re || g.d >= 0;
  };
  if (f.c != 0) {  // inside a multi-byte character
    const int rem = f.c & 0xFF, lo = (f.c >> 8) & 0xFF, hi = (f.c >> 16) & 0xFF;
    if (c < lo || c > hi || !feed_regex()) return;
    g.c = utf8_state(rem - 1, 0x80, 0xBF);
    return out.replace(top, g);
  }
  if (f.b == 1) {
    if (c == 'u') {
      g.b = 2;
    } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
      g.b = 0;
    } else {
      return;
    }
    return out.replace(top, g);
  }
  if (f.b >= 2) {
    if (!is_hex(c)) return;
    g.b = f.b == 5 ? 0 : f.b + 1;
    return out.replace(top, g);
  }
  if (c == '"') {
    if (n && f.a < n->min_length) return;
    if (re && !re->accepting(f.d)) return;
    if (f.stage == 1) return end_key(top, -1, out);
    return out.add(top->parent);
  }
  if (c < 0x20 || (c >= 0x80 && utf8_lead(c) == 0)) return;
  // Wrapping up: content only while the length needs it, or a byte nearer to the pattern's end.
  if (out.closing && !(n && f.a < n->min_length) && !(re && re->distance(re->next(f.d, c)) >= 0 &&
                                                       re->distance(re->next(f.d, c)) < re->distance(f.d)))
    return;
  if (counted) {
    if (n->max_length >= 0 && f.a >= n->max_length) return;
    g.a++;
  }
  if (c == '\\') {
    if (re) return;  // patterns match plain characters only
    g.b = 1;
    return out.replace(top, g);
  }
  if (!feed_regex()) return;
  g.c = c >= 0x80 ? utf8_lead(c) : 0;
  out.replace(top, g);
}

bool JsonMatcher::in_plain_string(const MatchState& s) const {
  if (s.n != 1) return false;
  const Frame& f = s.s[0]->f;
  return f.type == FrameType::String && f.b == 0 && f.c == 0 && (f.node < 0 || node(f.node).regex < 0);
}

bool JsonMatcher::number_complete(const Frame& f) const {
  if (f.stage != 2 && f.stage != 3 && f.stage != 5 && f.stage != 8) return false;
  const SchemaNode& n = node(f.node);
  if (!n.has_min && !n.has_max) return true;
  const double v = (f.v + f.w / pow10(f.b)) * (f.d ? -1 : 1);
  return meets_bounds(n, v, v, true, true);
}

// Some completion of the digits so far lies within the node's bounds.
bool JsonMatcher::number_feasible(const Frame& f) const {
  const SchemaNode& n = node(f.node);
  if (!n.has_min && !n.has_max) return true;
  const bool integer = n.kind == NodeKind::Integer;
  auto fits = [&](double lo, double hi, bool hi_closed) {  // the absolute values [lo, hi) or [lo, hi]
    if (f.d) return meets_bounds(n, -hi, -lo, hi_closed, true);
    return meets_bounds(n, lo, hi, true, hi_closed);
  };
  const double limit = pow10(kMaxIntDigits);
  switch (f.stage) {
    case 1: return fits(0, limit, false);
    case 2: return integer ? fits(0, 0, true) : fits(0, 1, false);
    case 3:
      for (int j = 0; j + f.a <= kMaxIntDigits; ++j) {
        const double s = pow10(j);
        if (integer ? fits(f.v * s, j == 0 ? f.v : (f.v + 1) * s - 1, true) : fits(f.v * s, (f.v + 1) * s, false))
          return true;
        // More digits only grow the magnitude: past the bound on this side, none fits.
        if (f.d ? n.has_min && -(f.v * s) < n.minimum : n.has_max && f.v * s > n.maximum) return false;
      }
      return false;
    case 4: return fits(f.v, f.v + 1, false);
    case 5: {
      const double unit = pow10(f.b);
      return fits(f.v + f.w / unit, f.v + (f.w + 1) / unit, false);
    }
    default: return false;  // exponents are refused with bounds
  }
}

void JsonMatcher::step_number(const Stack* top, uint8_t c, Out& out) const {
  const Frame& f = top->f;
  const SchemaNode& n = node(f.node);
  const bool integer = n.kind == NodeKind::Integer;
  const bool exponent = !integer && !n.has_min && !n.has_max;
  const int digit = is_digit(c) ? c - '0' : -1;
  Frame g = f;
  bool ok = true;
  switch (f.stage) {
    case 0:
      if (c == '-') g.stage = 1, g.d = 1;
      else if (digit == 0) g.stage = 2;
      else if (digit > 0) g.stage = 3, g.a = 1, g.v = digit;
      else ok = false;
      break;
    case 1:
      if (digit == 0) g.stage = 2;
      else if (digit > 0) g.stage = 3, g.a = 1, g.v = digit;
      else ok = false;
      break;
    case 2:
    case 3:
      if (digit >= 0 && f.stage == 3 && f.a < kMaxIntDigits) g.a++, g.v = f.v * 10 + digit;
      else if (c == '.' && !integer) g.stage = 4;
      else if ((c == 'e' || c == 'E') && exponent) g.stage = 6;
      else ok = false;
      break;
    case 4:
    case 5:
      if (digit >= 0 && f.b < kMaxFracDigits) g.stage = 5, g.b++, g.w = f.w * 10 + digit;
      else if ((c == 'e' || c == 'E') && f.stage == 5 && exponent) g.stage = 6;
      else ok = false;
      break;
    case 6:
      if (c == '+' || c == '-') g.stage = 7;
      else if (digit >= 0) g.stage = 8, g.c = 1;
      else ok = false;
      break;
    default:
      if (digit >= 0 && f.c < kMaxExpDigits) g.stage = 8, g.c++;
      else ok = false;
      break;
  }
  if (ok && out.closing && number_complete(f)) ok = false;  // wrapping up: no further digits
  if (ok) {
    if (number_feasible(g)) out.replace(top, g);
    return;
  }
  if (number_complete(f)) step(top->parent, c, out);  // the byte after the number
}

const ByteTrie& JsonMatcher::literal_trie(const Frame& f) const {
  const SchemaNode& n = node(f.node);
  return n.kind == NodeKind::Literals ? schema_->tries[size_t(n.literals)] : free_literals_;
}

bool JsonMatcher::literal_complete(const Frame& f) const { return literal_trie(f).nodes[size_t(f.a)].value >= 0; }

void JsonMatcher::step_literal(const Stack* top, uint8_t c, Out& out) const {
  const Frame& f = top->f;
  const ByteTrie& trie = literal_trie(f);
  const int32_t child = trie.child(f.a, c);
  if (child >= 0) {
    const auto& next = trie.nodes[size_t(child)];
    if (next.value >= 0 && next.next.empty()) return out.add(top->parent);  // the literal is complete
    Frame g = f;
    g.a = child;
    return out.replace(top, g);
  }
  if (literal_complete(f)) step(top->parent, c, out);  // a literal that is a prefix of another ended
}

}  // namespace mx::grammar
