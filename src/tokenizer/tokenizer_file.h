// Where a command's tokenizer.json comes from, first match wins: the --tokenizer flag, the model
// folder's tokenizer.json, $MXSERVE_TOKENIZER. Nothing else is searched (no source-tree paths).
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

#include "core/status.h"

namespace mx {

inline constexpr const char* kTokenizerEnv = "MXSERVE_TOKENIZER";

struct TokenizerSearch {
  std::filesystem::path file;                  // an explicit tokenizer.json; empty: not given
  std::string_view file_flag = "--tokenizer";  // the flag that gave `file`, for the error message
  std::filesystem::path model_dir;             // the model folder; empty: none (synthetic models)
};

// The tokenizer.json to load, or nullopt when none of the three gives one. An explicit file or a
// $MXSERVE_TOKENIZER that does not exist is an error, never skipped.
Result<std::optional<std::filesystem::path>> find_tokenizer_file(const TokenizerSearch& search);

}  // namespace mx
