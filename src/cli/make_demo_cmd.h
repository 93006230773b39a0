// `mxserve make-demo --out DIR`: writes the bundled demo model (tiny, random weights, the real
// gpt-oss format and the real tokenizer), so the pipeline runs with no GPU and no download.
#pragma once

#include <cstdint>
#include <string>

#include "cli/command.h"

namespace mx::cli {

struct MakeDemoFlags {
  std::string out;        // the model folder to write
  std::string tokenizer;  // tokenizer.json to copy in; empty: $MXSERVE_TOKENIZER, else none
  uint64_t seed = 1234;   // of the random weights
};

Status make_demo(const MakeDemoFlags& f);
Command register_make_demo(CLI::App& app);

}  // namespace mx::cli
