// Model: a loaded gpt-oss model (config, open checkpoint, weights on one device).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "model/config.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace mx {

struct Model {
  std::filesystem::path path;
  ModelConfig config;
  std::unique_ptr<Checkpoint> checkpoint;  // keeps the mmapped files alive for CPU views
  ModelWeights weights;

  // `arg` is a local folder or a Hugging Face repo id in the HF cache.
  static Result<std::unique_ptr<Model>> load(const std::string& arg, Device device,
                                             ShowProgress progress = ShowProgress::Yes);
};

}  // namespace mx
