// Strict UTF-8 decoder and validator (RFC 3629 well-formed byte sequences).
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

}  // namespace mx
