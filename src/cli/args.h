// The command line before CLI11 parses it: llama-server's and vLLM's short forms rewritten, and
// the flags of `serve --config FILE.yaml` inserted.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace mx::cli {

// Rewrites `-np` -> `--parallel` and `-tp` -> `--tensor-parallel-size` (CLI11 takes one-letter
// short names only), and inserts the flags of a `serve --config FILE.yaml` after `serve` (so that
// explicit flags win).
Result<std::vector<std::string>> expand_args(std::vector<std::string> args);

}  // namespace mx::cli
