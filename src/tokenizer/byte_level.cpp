// The GPT-2 byte <-> code point table and the conversion of byte-level vocab strings to bytes.
#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace mx {
namespace {

// Bytes that are printable Latin-1 keep their own code point; the other 68 bytes get 256, 257, ...
// in increasing byte order.
bool keeps_own_code_point(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

struct ByteTables {
  std::array<char32_t, 256> to_cp{};
  std::array<int16_t, 512> from_cp{};  // code point -> byte, -1 when not in the alphabet
  ByteTables() {
    from_cp.fill(-1);
    char32_t next = 256;
    for (unsigned b = 0; b < 256; ++b) {
      to_cp[b] = keeps_own_code_point(b) ? char32_t(b) : next++;
      from_cp[to_cp[b]] = int16_t(b);
    }
  }
};

const ByteTables& tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

char32_t byte_level_code_point(unsigned char b) { return tables().to_cp[b]; }

Result<std::string> byte_level_to_bytes(std::string_view text) {
  const ByteTables& t = tables();
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t at = pos;
    const std::optional<char32_t> cp = utf8_next(text, pos);
    MX_CHECK(cp.has_value(), "invalid UTF-8 at byte {} of byte-level token", at);
    MX_CHECK(*cp < t.from_cp.size() && t.from_cp[*cp] >= 0,
             "code point U+{:04X} of byte-level token is not a byte", uint32_t(*cp));
    out.push_back(char(t.from_cp[*cp]));
  }
  return out;
}

}  // namespace mx
