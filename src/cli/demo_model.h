// The bundled demo model: tiny random weights in the real gpt-oss checkpoint format with the real
// tokenizer.json, kept beside the binary (<build>/demo-model) and used when no model is given.
#pragma once

#include <filesystem>
#include <string>

#include "core/status.h"

namespace mx::cli {

// Writes the demo model into dir: config.json, model.safetensors, and a copy of the tokenizer.json
// that find_tokenizer_file gives (`tokenizer`, else $MXSERVE_TOKENIZER; none: the model has none).
Status write_demo_model(const std::filesystem::path& dir, uint64_t seed, const std::string& tokenizer = "");
// <binary dir>/demo-model, written on first use.
Result<std::string> demo_model_dir();

}  // namespace mx::cli
