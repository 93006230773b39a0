// StreamDecoder: accumulates token bytes and releases only complete UTF-8 characters; what can
// never be completed becomes U+FFFD, one per maximal subpart.
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace mx {

std::string StreamDecoder::push(int32_t id) {
  pending_ += tok_->token_bytes(id);
  const size_t n = utf8_complete_prefix(pending_);
  std::string out = sanitize_utf8(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = sanitize_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace mx
