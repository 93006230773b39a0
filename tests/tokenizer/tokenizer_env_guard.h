// EnvTokenizer: sets $MXSERVE_TOKENIZER for one test and restores it after (tokenizer file lookup
// tests, CLI command tests).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

#include "tokenizer/tokenizer_file.h"

namespace mx::test {

// Sets $MXSERVE_TOKENIZER for one test (empty: unset), restoring the old value after.
class EnvTokenizer {
 public:
  explicit EnvTokenizer(const std::string& value) {
    if (const char* old = std::getenv(kTokenizerEnv)) old_ = old;
    if (value.empty()) ::unsetenv(kTokenizerEnv);
    else ::setenv(kTokenizerEnv, value.c_str(), 1);
  }
  ~EnvTokenizer() {
    if (old_) ::setenv(kTokenizerEnv, old_->c_str(), 1);
    else ::unsetenv(kTokenizerEnv);
  }
  EnvTokenizer(const EnvTokenizer&) = delete;
  EnvTokenizer& operator=(const EnvTokenizer&) = delete;

 private:
  std::optional<std::string> old_;
};

}  // namespace mx::test
