// Model: a loaded gpt-oss model (config, open checkpoint, weights on one device).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "model/config.h"
#include "model/mxfp4_layers.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace mx {

struct Model {
  std::filesystem::path path;
  ModelConfig config;
  std::unique_ptr<Checkpoint> checkpoint;  // keeps the mmapped files alive for CPU views
  ModelWeights weights;
  Mxfp4Layers mxfp4_layers;  // the dense weights stored in MXFP4 (--mxfp4-layers, as applied)

  // `arg` is a local folder, a Hugging Face repo id in the HF cache, or a synthetic: name; the
  // dense weights named by `mxfp4` are quantized after loading (model/mxfp4_layers.h).
  static Result<std::unique_ptr<Model>> load(const std::string& arg, Device device,
                                             ShowProgress progress = ShowProgress::Yes,
                                             const Mxfp4Layers& mxfp4 = {});
};

}  // namespace mx
