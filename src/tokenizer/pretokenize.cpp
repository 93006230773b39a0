// PCRE2 compilation (UTF | UCP, JIT when available) and the match loop of the pre-tokenizer.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenize.h"

#include <pcre2.h>

namespace mx {

struct Pretokenizer::Code {
  pcre2_code* re = nullptr;
};

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

// JIT stack sizes: the 32 KiB machine-stack default suffices for ordinary text; a long run that
// backtracks (e.g. whitespace before the look-ahead) retries with a heap stack up to this size.
constexpr size_t kJitStackStart = 64 << 10;
constexpr size_t kJitStackMax = 64 << 20;

// Per-call match state: match data, and a JIT stack created only when the default is too small.
class Matcher {
 public:
  Matcher(const pcre2_code* re, bool jit) : re_(re), jit_(jit), data_(pcre2_match_data_create(1, nullptr)) {}
  ~Matcher() {
    pcre2_match_data_free(data_);
    if (ctx_) pcre2_match_context_free(ctx_);
    if (stack_) pcre2_jit_stack_free(stack_);
  }
  Matcher(const Matcher&) = delete;
  Matcher& operator=(const Matcher&) = delete;

  // Returns 1 with [begin, end) on a match, 0 when there is none, or a PCRE2 error code (< 0).
  int next(std::string_view text, size_t from, size_t& begin, size_t& end) {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    for (;;) {
      const int rc = jit_ ? pcre2_jit_match(re_, subject, text.size(), from, 0, data_, ctx_)
                          : pcre2_match(re_, subject, text.size(), from, PCRE2_NO_UTF_CHECK, data_, ctx_);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT && stack_size_ < kJitStackMax) {
        grow_stack();
        continue;
      }
      if (rc == PCRE2_ERROR_NOMATCH) return 0;
      if (rc < 0) return rc;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data_);
      begin = ov[0];
      end = ov[1];
      return 1;
    }
  }

 private:
  void grow_stack() {
    stack_size_ = stack_size_ ? stack_size_ * 4 : kJitStackStart;
    if (stack_) pcre2_jit_stack_free(stack_);
    stack_ = pcre2_jit_stack_create(kJitStackStart, stack_size_, nullptr);
    if (!ctx_) ctx_ = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(ctx_, nullptr, stack_);
  }

  const pcre2_code* re_;
  bool jit_;
  pcre2_match_data* data_;
  pcre2_match_context* ctx_ = nullptr;
  pcre2_jit_stack* stack_ = nullptr;
  size_t stack_size_ = 0;
};

// Byte length of the UTF-8 character starting with lead byte c.
size_t utf8_char_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

}  // namespace

Result<std::shared_ptr<const Pretokenizer>> Pretokenizer::create(std::string_view pattern) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                 PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
  if (!re) return MX_ERROR("pre-tokenizer regex: {} at offset {}", pcre2_message(err), err_offset);
  std::shared_ptr<Pretokenizer> p(new Pretokenizer());
  p->code_ = new Code{re};
  p->jit_ = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
  return std::shared_ptr<const Pretokenizer>(std::move(p));
}

Pretokenizer::~Pretokenizer() {
  if (code_) pcre2_code_free(code_->re);
  delete code_;
}

Status Pretokenizer::split(std::string_view text, const std::function<void(std::string_view)>& on_piece) const {
  Matcher m(code_->re, jit_);
  size_t from = 0, emitted = 0;  // emitted: everything before it has been handed out
  while (from < text.size()) {
    size_t begin = 0, end = 0;
    const int rc = m.next(text, from, begin, end);
    if (rc == 0) break;
    MX_CHECK(rc > 0, "pre-tokenizer regex failed at byte {}: {}", from, pcre2_message(rc));
    if (end == begin) {  // an empty match (not possible with o200k): look again one character on
      if (begin >= text.size()) break;
      from = begin + utf8_char_len(static_cast<unsigned char>(text[begin]));
      continue;
    }
    // Text the regex did not match is a piece of its own (Split's "Isolated" behaviour in a
    // tokenizer.json): dropping it lost input (found by fuzz_tokenizer_json; o200k matches all).
    if (begin > emitted) on_piece(text.substr(emitted, begin - emitted));
    on_piece(text.substr(begin, end - begin));
    from = emitted = end;
  }
  if (emitted < text.size()) on_piece(text.substr(emitted));
  return ok_status();
}

}  // namespace mx
