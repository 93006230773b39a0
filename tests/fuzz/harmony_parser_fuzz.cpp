// Fuzz target: the harmony streaming parser on token streams. Input bytes become ids (a byte
// below 16 picks a harmony marker, so that headers, channels and terminators are frequent;
// otherwise it and the next two bytes pick any id). Strict and lenient modes; lenient must never fail, and every
// content delta and message text must be whole, valid UTF-8.
#include "fuzz_util.h"
#include "tokenizer/harmony_parser.h"
#include "tokenizer/tokenizer.h"

namespace {

constexpr const char* kMarkers[] = {"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>",
                                    "<|return|>", "<|call|>", "<|endoftext|>"};

}  // namespace

MX_FUZZ_LOAD_TOKENIZER_FIRST()

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto tok = mx::fuzz::gptoss_tokenizer();
  mx::fuzz::Input in(data, size);
  const uint8_t flags = in.byte();
  const auto mode = flags & 1 ? mx::harmony::ParseMode::Lenient : mx::harmony::ParseMode::Strict;
  std::optional<mx::harmony::Role> role;
  if (flags & 2) role = mx::harmony::Role::Assistant;
  auto parser = mx::harmony::StreamParser::create(tok, {.role = role, .mode = mode});
  FUZZ_CHECK(parser.ok());
  while (!in.empty()) {
    const uint8_t b = in.byte();
    int32_t id = *tok->token_id(kMarkers[b % 8]);
    if (b >= 16) {
      const uint32_t hi = uint32_t(b - 16) << 16, mid = uint32_t(in.byte()) << 8;
      id = int32_t((hi | mid | in.byte()) % uint32_t(tok->vocab_size()));
    }
    const mx::Status st = parser->push(id);
    FUZZ_CHECK(st.ok() || mode == mx::harmony::ParseMode::Strict);
    const std::string& d = parser->last_content_delta();
    FUZZ_CHECK(mx::sanitize_utf8(d) == d);
  }
  const mx::Status end = parser->finish();
  FUZZ_CHECK(end.ok() || mode == mx::harmony::ParseMode::Strict);
  for (const auto& m : parser->messages()) FUZZ_CHECK(mx::sanitize_utf8(m.text()) == m.text());
  return 0;
}
