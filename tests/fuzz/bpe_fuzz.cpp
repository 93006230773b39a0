// Fuzz target: BPE encode/decode with the real o200k_harmony tokenizer. Valid UTF-8 must encode
// (specials as text or allowed) and decode back to the same bytes, through decode() and through
// the StreamDecoder one id at a time; invalid UTF-8 must be refused, not encoded.
#include "fuzz_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

MX_FUZZ_LOAD_TOKENIZER_FIRST()

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto tok = mx::fuzz::gptoss_tokenizer();
  mx::fuzz::Input in(data, size);
  const auto mode = in.byte() & 1 ? mx::SpecialTokens::Allow : mx::SpecialTokens::AsText;
  const std::string_view text = in.rest();
  auto ids = tok->encode(text, mode);
  FUZZ_CHECK(ids.ok() == !mx::utf8_first_invalid(text).has_value());
  if (!ids.ok()) return 0;
  for (int32_t id : *ids) FUZZ_CHECK(id >= 0 && id < tok->vocab_size());
  FUZZ_CHECK(tok->decode(*ids) == text);
  mx::StreamDecoder dec(tok);
  std::string streamed;
  for (int32_t id : *ids) streamed += dec.push(id);
  FUZZ_CHECK(streamed + dec.flush() == text);
  return 0;
}
