// Fuzz target: tokenizer.json loading (vocab, merges, added tokens, pre-tokenizer regex). A
// tokenizer that loads must encode valid UTF-8 and decode it back unchanged.
#include "fuzz_util.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = mx::fuzz::scratch_dir() / "tokenizer.json";
  mx::fuzz::write_file(path, std::string_view(reinterpret_cast<const char*>(data), size));
  auto tok = mx::Tokenizer::load(path);
  if (!tok.ok()) return 0;
  for (std::string_view text : {"Hello world", "caf\xC3\xA9 \xF0\x9F\xA4\x96 123", "", "  \n\t x"}) {
    auto ids = (*tok)->encode(text);
    FUZZ_CHECK(ids.ok());
    FUZZ_CHECK((*tok)->decode(*ids) == text);
  }
  return 0;
}
