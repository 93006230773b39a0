// `mxserve tokenize`: encodes text with a model's tokenizer.json and prints the ids as a JSON
// array; --bench times encode throughput (MB/s) over the input instead.
#pragma once

#include <string>

#include "cli/command.h"

namespace mx::cli {

struct TokenizeFlags {
  std::string model;      // model folder holding tokenizer.json, or the file itself
  std::string text_file;  // read the text from this file
  std::string prompt;     // or take it from the command line
  bool allow_special = false;
  int bench_runs = 0;     // > 0: time this many encodes of the text, print MB/s
};

Status tokenize(const TokenizeFlags& f);
Command register_tokenize(CLI::App& app);

}  // namespace mx::cli
