// `mxserve info MODEL`: the config and a tensor summary of a checkpoint, validated like a load.
#pragma once

#include <string>

#include "cli/command.h"

namespace mx::cli {

struct InfoFlags {
  std::string model;  // folder or Hugging Face repo id
};

// Prints the summary; an error when a tensor is missing or has the wrong dtype or shape.
Status info(const InfoFlags& f);
Command register_info(CLI::App& app);

}  // namespace mx::cli
