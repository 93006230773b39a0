// Model::load: resolve the folder, read config.json, open the checkpoint, place the weights.
#include "model/model.h"

#include "core/log.h"
#include "model/model_path.h"
#include "model/synthetic.h"

namespace mx {

namespace {
Result<std::unique_ptr<Model>> load_bf16(const std::string& arg, Device device, ShowProgress progress) {
  if (is_synthetic_name(arg)) return make_synthetic_model(arg, device);
  auto m = std::make_unique<Model>();
  MX_ASSIGN(m->path, resolve_model_path(arg));
  MX_ASSIGN(m->config, ModelConfig::load(m->path / "config.json"));
  MX_ASSIGN(Checkpoint ckpt, Checkpoint::open(m->path));
  m->checkpoint = std::make_unique<Checkpoint>(std::move(ckpt));
  auto w = load_weights(*m->checkpoint, m->config, device, progress);
  if (!w.ok()) return w.status().with_context("loading " + m->path.string());
  m->weights = std::move(w).value();
  for (const auto& line : ops::dispatch_summary(device)) log_info("dispatch: {}", line);
  log_info("loaded {} ({} layers, {} experts, {:.2f} GB of weights on {})", m->path.string(),
           m->config.num_hidden_layers, m->config.num_local_experts, double(m->weights.bytes) / 1e9,
           device == Device::CPU ? "cpu" : "cuda");
  return m;
}
}  // namespace

Result<std::unique_ptr<Model>> Model::load(const std::string& arg, Device device, ShowProgress progress,
                                           const Mxfp4Layers& mxfp4) {
  MX_ASSIGN(auto m, load_bf16(arg, device, progress));
  MX_ASSIGN(m->mxfp4_layers, quantize_dense_layers(m->weights, m->config, mxfp4, progress));
  return m;
}

}  // namespace mx
