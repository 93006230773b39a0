// Model: a loaded gpt-oss model (config, open checkpoint, weights on one device).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/mxfp4_layers.h"
#include "model/safetensors.h"
#include "model/tensor_parallel.h"
#include "model/weights.h"

namespace mx {

struct Model;

// Tensor parallelism (model/tensor_parallel.h): this model is rank `rank` of `plan.size()`; its
// weights are that rank's shard (on GPU `rank` with CUDA) and `config` the dimensions its forward
// runs with. Rank 0 owns the other ranks' models.
struct ModelTp {
  int rank = 0;
  TpPlan plan;
  ModelConfig config;
  std::vector<std::unique_ptr<Model>> peers;  // rank 0: ranks 1..N-1
};

struct Model {
  std::filesystem::path path;
  ModelConfig config;
  std::unique_ptr<Checkpoint> checkpoint;  // keeps the mmapped files alive for CPU views
  ModelWeights weights;
  Mxfp4Layers mxfp4_layers;  // the dense weights stored in MXFP4 (--mxfp4-layers, as applied)
  ModelTp tp;

  int tp_size() const { return tp.plan.size(); }
  // The dimensions of this rank's forward and KV cache (`config` itself without tensor parallelism).
  const ModelConfig& rank_config() const { return tp_size() > 1 ? tp.config : config; }

  // `arg` is a local folder, a Hugging Face repo id in the HF cache, or a synthetic: name; the
  // dense weights named by `mxfp4` are quantized after loading (model/mxfp4_layers.h). With
  // tensor_parallel N > 1 the model is split over N ranks (GPUs 0..N-1 on CUDA, threads on the
  // CPU): the returned model is rank 0, owning the others.
  static Result<std::unique_ptr<Model>> load(const std::string& arg, Device device,
                                             ShowProgress progress = ShowProgress::Yes,
                                             const Mxfp4Layers& mxfp4 = {}, int tensor_parallel = 1);
};

}  // namespace mx
