// StreamDecoder: accumulates token bytes and releases only complete UTF-8 characters.
#include "tokenizer/tokenizer.h"

namespace mx {
namespace {

// Length of the longest prefix of s that does not end inside an incomplete UTF-8 sequence.
size_t complete_prefix(const std::string& s) {
  const size_t n = s.size();
  // Look back at most 3 bytes for the start of the last sequence.
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    size_t need = 1;
    if ((c & 0xE0) == 0xC0) need = 2;
    else if ((c & 0xF0) == 0xE0) need = 3;
    else if ((c & 0xF8) == 0xF0) need = 4;
    return back >= need ? n : n - back;
  }
  return n;  // only continuation bytes: invalid, release them
}

std::string replace_invalid_utf8(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    bool ok = need > 0 && i + need <= s.size();
    for (size_t k = 1; ok && k < need; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok) {
      out.append(s, i, need);
      i += need;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

}  // namespace

std::string StreamDecoder::push(int32_t id) {
  pending_ += tok_->token_bytes(id);
  const size_t n = complete_prefix(pending_);
  std::string out = replace_invalid_utf8(pending_.substr(0, n));
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = replace_invalid_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace mx
