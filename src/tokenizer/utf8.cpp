// Strict UTF-8 decoder and validator, and lossy repair by maximal subparts (the well-formed
// byte sequences of Unicode Table 3-7).
#include "tokenizer/utf8.h"

#include <cstdint>
#include <cstring>

namespace mx {

std::optional<char32_t> utf8_next(std::string_view s, size_t& pos) {
  const size_t n = s.size() - pos;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data() + pos);
  if (n == 0) return std::nullopt;
  const unsigned c = p[0];
  if (c < 0x80) {
    pos += 1;
    return char32_t(c);
  }
  size_t len;
  char32_t cp, min;
  if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07, min = 0x10000;
  else return std::nullopt;  // continuation byte, overlong 2-byte lead, or above U+10FFFF
  if (n < len) return std::nullopt;
  for (size_t k = 1; k < len; ++k) {
    if ((p[k] & 0xC0) != 0x80) return std::nullopt;
    cp = (cp << 6) | (p[k] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
  pos += len;
  return cp;
}

std::optional<size_t> utf8_first_invalid(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    // Fast path: 8 ASCII bytes at a time.
    if (pos + 8 <= s.size()) {
      uint64_t w;
      std::memcpy(&w, s.data() + pos, 8);
      if ((w & 0x8080808080808080ull) == 0) {
        pos += 8;
        continue;
      }
    }
    if (!utf8_next(s, pos)) return pos;
  }
  return std::nullopt;
}

namespace {

// Table 3-7: the range of the second byte after each lead; later bytes are 80..BF. 0: not a lead.
struct LeadRule {
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // second byte
};

LeadRule lead_rule(unsigned char c) {
  if (c < 0x80) return {1};
  if (c >= 0xC2 && c <= 0xDF) return {2};
  if (c == 0xE0) return {3, 0xA0, 0xBF};
  if (c == 0xED) return {3, 0x80, 0x9F};  // no surrogates
  if (c >= 0xE1 && c <= 0xEF) return {3};
  if (c == 0xF0) return {4, 0x90, 0xBF};  // no overlongs
  if (c == 0xF4) return {4, 0x80, 0x8F};  // nothing above U+10FFFF
  if (c >= 0xF1 && c <= 0xF3) return {4};
  return {};
}

}  // namespace

size_t utf8_well_formed_prefix(std::string_view s, size_t pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const LeadRule r = lead_rule(p[pos]);
  if (r.len == 0) return 1;
  size_t k = 1;
  for (; k < r.len && pos + k < s.size(); ++k) {
    const unsigned char lo = k == 1 ? r.lo : 0x80, hi = k == 1 ? r.hi : 0xBF;
    if (p[pos + k] < lo || p[pos + k] > hi) break;
  }
  return k;
}

std::string sanitize_utf8(std::string_view s) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t k = utf8_well_formed_prefix(s, i);
    if (k == lead_rule(static_cast<unsigned char>(s[i])).len) out.append(s.substr(i, k));
    else out += kReplacement;  // one for the whole maximal subpart
    i += k;
  }
  return out;
}

size_t utf8_complete_prefix(std::string_view s) {
  // A character still open at the end starts at most 3 bytes back.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const size_t start = s.size() - back;
    const size_t len = lead_rule(static_cast<unsigned char>(s[start])).len;
    if (len == 0) continue;  // a continuation byte (or no lead at all): look further back
    const bool open = len > back && utf8_well_formed_prefix(s, start) == back;
    return open ? start : s.size();
  }
  return s.size();
}

}  // namespace mx
