// Resolves a model argument: a local folder, or a Hugging Face repo id ("openai/gpt-oss-20b")
// found in the HF cache ($HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub).
#pragma once

#include <filesystem>
#include <string>

#include "core/status.h"

namespace mx {

Result<std::filesystem::path> resolve_model_path(const std::string& arg);

}  // namespace mx
