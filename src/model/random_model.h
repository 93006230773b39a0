// Random gpt-oss checkpoints in the real format (config.json + safetensors with the exact tensor
// names, BF16 dense tensors and MXFP4 experts), seeded: the bundled demo model and test models.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "model/config.h"

namespace mx {

struct RandomModelSpec {
  int layers = 2, hidden = 64, intermediate = 64, heads = 4, kv_heads = 2, head_dim = 16;
  int experts = 8, experts_per_token = 4, vocab = 201088, sliding_window = 128;
  uint64_t seed = 1234;
};

// config.json of the real models with the spec's sizes.
nlohmann::ordered_json random_model_config(const RandomModelSpec& s);
// Writes config.json and model.safetensors into dir (created if missing).
Status write_random_model(const std::filesystem::path& dir, const RandomModelSpec& s);

}  // namespace mx
