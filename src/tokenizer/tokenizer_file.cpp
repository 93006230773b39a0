// find_tokenizer_file: the --tokenizer flag, then <model>/tokenizer.json, then $MXSERVE_TOKENIZER.
#include "tokenizer/tokenizer_file.h"

#include <cstdlib>

namespace mx {
namespace fs = std::filesystem;

Result<std::optional<fs::path>> find_tokenizer_file(const TokenizerSearch& search) {
  std::error_code ec;
  if (!search.file.empty()) {
    MX_CHECK(fs::exists(search.file, ec), "{} {} does not exist", search.file_flag, search.file.string());
    return std::optional<fs::path>(search.file);
  }
  if (!search.model_dir.empty() && fs::exists(search.model_dir / "tokenizer.json", ec))
    return std::optional<fs::path>(search.model_dir / "tokenizer.json");
  if (const char* env = std::getenv(kTokenizerEnv); env && *env) {
    MX_CHECK(fs::exists(env, ec), "{}={} does not exist", kTokenizerEnv, env);
    return std::optional<fs::path>(env);
  }
  return std::optional<fs::path>();
}

}  // namespace mx
