// Shared by the libFuzzer targets: a scratch directory per process for targets whose API reads
// files, the real gpt-oss tokenizer loaded once, and a reader that splits the input into the
// choices a target makes. Every target aborts (a finding) on a crash, a sanitizer report or a
// broken invariant checked with FUZZ_CHECK.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace mx {
class Tokenizer;
}

namespace mx::fuzz {

// A directory of this process under $TMPDIR (removed at exit).
const std::filesystem::path& scratch_dir();
void write_file(const std::filesystem::path& path, std::string_view bytes);
// o200k_harmony from tests/js/node_modules (or $MXSERVE_TOKENIZER_JSON); aborts when missing.
std::shared_ptr<const Tokenizer> gptoss_tokenizer();

// Takes bytes from the front of the input.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : rest_(reinterpret_cast<const char*>(data), size) {}
  uint8_t byte() {
    if (rest_.empty()) return 0;
    const auto b = static_cast<uint8_t>(rest_.front());
    rest_.remove_prefix(1);
    return b;
  }
  std::string_view rest() const { return rest_; }
  bool empty() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

}  // namespace mx::fuzz

#define FUZZ_CHECK(cond, ...)                                          \
  do {                                                                 \
    if (!(cond)) {                                                     \
      std::fprintf(stderr, "FUZZ_CHECK failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                    \
    }                                                                  \
  } while (0)

// For targets that use gptoss_tokenizer(): it loads in LLVMFuzzerInitialize, before the first
// input (its seconds, ten under ASan, would otherwise count as that input's timeout).
#define MX_FUZZ_LOAD_TOKENIZER_FIRST()                      \
  extern "C" int LLVMFuzzerInitialize(int*, char***) {     \
    mx::fuzz::gptoss_tokenizer();                          \
    return 0;                                              \
  }
