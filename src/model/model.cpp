// Model::load: resolve the folder, read config.json, open the checkpoint, place the weights.
#include "model/model.h"

#include "core/log.h"
#include "model/model_path.h"
#include "model/synthetic.h"
#include "kernels/collective.h"

namespace mx {

namespace {
Result<std::unique_ptr<Model>> load_bf16(const std::string& arg, Device device, ShowProgress progress, TpShard shard) {
  if (is_synthetic_name(arg)) return make_synthetic_model(arg, device, 1, shard);
  auto m = std::make_unique<Model>();
  MX_ASSIGN(m->path, resolve_model_path(arg));
  MX_ASSIGN(m->config, ModelConfig::load(m->path / "config.json"));
  MX_ASSIGN(Checkpoint ckpt, Checkpoint::open(m->path));
  m->checkpoint = std::make_unique<Checkpoint>(std::move(ckpt));
  auto w = load_weights(*m->checkpoint, m->config, device, progress, shard);
  if (!w.ok()) return w.status().with_context("loading " + m->path.string());
  m->weights = std::move(w).value();
  log_info("loaded {}{} ({} layers, {} experts, {:.2f} GB of weights on {})", m->path.string(),
           shard.plan ? fmt::format(" rank {}", shard.rank) : std::string(), m->config.num_hidden_layers,
           m->config.num_local_experts, double(m->weights.bytes) / 1e9, device == Device::CPU ? "cpu" : "cuda");
  return m;
}

// Rank `rank` of `plan`: its shard, made on the current device, with its own dimensions.
Result<std::unique_ptr<Model>> load_rank(const std::string& arg, Device device, ShowProgress progress,
                                         const Mxfp4Layers& mxfp4, const TpPlan& plan, int rank) {
  MX_ASSIGN(auto m, load_bf16(arg, device, progress, {.plan = &plan, .rank = rank}));
  m->tp.rank = rank;
  m->tp.plan = plan;
  m->tp.config = plan.rank_config(rank);
  MX_ASSIGN(m->mxfp4_layers, quantize_dense_layers(m->weights, m->tp.config, mxfp4, progress));
  return m;
}

Result<ModelConfig> config_of(const std::string& arg) {
  if (is_synthetic_name(arg)) return synthetic_config(arg);
  MX_ASSIGN(auto path, resolve_model_path(arg));
  return ModelConfig::load(path / "config.json");
}
}  // namespace

Result<std::unique_ptr<Model>> Model::load(const std::string& arg, Device device, ShowProgress progress,
                                           const Mxfp4Layers& mxfp4, int tensor_parallel) {
  if (tensor_parallel <= 1) {
    MX_ASSIGN(auto m, load_bf16(arg, device, progress, {}));
    MX_ASSIGN(m->mxfp4_layers, quantize_dense_layers(m->weights, m->config, mxfp4, progress));
    return m;
  }
  MX_ASSIGN(ModelConfig c, config_of(arg));
  MX_ASSIGN(TpPlan plan, TpPlan::make(c, tensor_parallel));
  if (device == Device::CUDA)
    MX_CHECK(ops::gpu_count() >= tensor_parallel, "--tensor-parallel-size {} needs {} GPUs, {} visible", tensor_parallel,
             tensor_parallel, ops::gpu_count());
  log_info("tensor parallelism over {} {}: {}", tensor_parallel, device == Device::CPU ? "CPU ranks" : "GPUs",
           plan.describe());
  std::unique_ptr<Model> root;
  for (int r = 0; r < tensor_parallel; ++r) {
    auto m = ops::on_gpu(device, r, [&] { return load_rank(arg, device, progress, mxfp4, plan, r); });
    if (!m.ok()) return m.status().with_context(fmt::format("tensor-parallel rank {}", r));
    if (r == 0) root = std::move(*m);
    else root->tp.peers.push_back(std::move(*m));
  }
  return root;
}

}  // namespace mx
