// Checkpoint -> ModelWeights: validation of every tensor against the spec's table, q/k/v fusion,
// YaRN table, upload to the target device with progress.
#include "model/weights.h"

#include <cstring>
#include <memory>
#include <set>

#include "core/log.h"
#include "kernels/owned_tensor.h"
#include "model/rope.h"
#include "model/tensor_parallel.h"

namespace mx {

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c) {
  const int64_t D = c.hidden_size, F = c.intermediate_size, E = c.num_local_experts, V = c.vocab_size;
  const int64_t Hq = c.q_width(), Hkv = c.kv_width();
  std::vector<ExpectedTensor> t = {{"model.embed_tokens.weight", DType::BF16, {V, D}}};
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    const std::vector<ExpectedTensor> layer = {
        {p + "input_layernorm.weight", DType::BF16, {D}},
        {p + "self_attn.q_proj.weight", DType::BF16, {Hq, D}},
        {p + "self_attn.q_proj.bias", DType::BF16, {Hq}},
        {p + "self_attn.k_proj.weight", DType::BF16, {Hkv, D}},
        {p + "self_attn.k_proj.bias", DType::BF16, {Hkv}},
        {p + "self_attn.v_proj.weight", DType::BF16, {Hkv, D}},
        {p + "self_attn.v_proj.bias", DType::BF16, {Hkv}},
        {p + "self_attn.o_proj.weight", DType::BF16, {D, Hq}},
        {p + "self_attn.o_proj.bias", DType::BF16, {D}},
        {p + "self_attn.sinks", DType::BF16, {c.num_attention_heads}},
        {p + "post_attention_layernorm.weight", DType::BF16, {D}},
        {p + "mlp.router.weight", DType::BF16, {E, D}},
        {p + "mlp.router.bias", DType::BF16, {E}},
        {p + "mlp.experts.gate_up_proj_blocks", DType::U8, {E, 2 * F, D / 32, 16}},
        {p + "mlp.experts.gate_up_proj_scales", DType::U8, {E, 2 * F, D / 32}},
        {p + "mlp.experts.gate_up_proj_bias", DType::BF16, {E, 2 * F}},
        {p + "mlp.experts.down_proj_blocks", DType::U8, {E, D, F / 32, 16}},
        {p + "mlp.experts.down_proj_scales", DType::U8, {E, D, F / 32}},
        {p + "mlp.experts.down_proj_bias", DType::BF16, {E, D}},
    };
    t.insert(t.end(), layer.begin(), layer.end());
  }
  t.push_back({"model.norm.weight", DType::BF16, {D}});
  t.push_back({"lm_head.weight", DType::BF16, {V, D}});
  return t;
}

namespace {

std::string shape_string(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

Status check_all(const Checkpoint& ckpt, const ModelConfig& c) {
  std::set<std::string> expected_names;
  for (const auto& e : expected_tensors(c)) {
    expected_names.insert(e.name);
    const auto* entry = ckpt.find(e.name);
    MX_CHECK(entry, "checkpoint is missing tensor '{}'", e.name);
    const TensorInfo& info = *entry->info;
    MX_CHECK(info.dtype == e.dtype, "tensor '{}' in {} has dtype {}, expected {}", e.name,
             entry->file->path().filename().string(), dtype_name(info.dtype), dtype_name(e.dtype));
    MX_CHECK(info.shape == e.shape, "tensor '{}' in {} has shape {}, expected {}", e.name,
             entry->file->path().filename().string(), shape_string(info.shape), shape_string(e.shape));
  }
  for (const auto& [name, entry] : ckpt.entries())
    if (!expected_names.count(name)) log_warn("checkpoint tensor '{}' is not used by gpt-oss; ignored", name);
  return ok_status();
}

// Places tensors on the target device: views stay views on the CPU, everything else is copied.
class Placer {
 public:
  Placer(const Checkpoint& ckpt, ModelWeights& w, ShowProgress show, TpShard shard)
      : ckpt_(ckpt), w_(w), shard_(shard),
        progress_(show == ShowProgress::Yes ? std::make_unique<Progress>("Loading weights", ckpt.total_bytes()) : nullptr) {}

  // The tensor, or with tensor parallelism the rank's part of it (`kind`).
  Result<Tensor> place(const std::string& name, TpWeight kind = TpWeight::Replicated) {
    const auto* e = ckpt_.find(name);
    Tensor host = e->file->view(*e->info);
    if (progress_) progress_->advance(host.nbytes());
    if (shard_.plan) return slice(host, kind);
    w_.bytes += host.nbytes();
    if (w_.device == Device::CPU) return host;
    return upload(host);
  }

  Result<Tensor> slice(const Tensor& full, TpWeight kind) {
    MX_ASSIGN(Tensor t, tp_slice(full, kind, *shard_.plan, shard_.rank, w_.device, w_.storage));
    w_.bytes += t.nbytes();
    return t;
  }

  Result<Tensor> upload(const Tensor& host) { return ops::upload_tensor(w_.storage, w_.device, host); }

  // Concatenates rows of several (N_i, D) bf16 tensors into one (ΣN_i, D) tensor on the device.
  Result<Tensor> concat_rows(const std::vector<std::string>& names) {
    std::vector<Tensor> parts;
    int64_t rows = 0;
    size_t bytes = 0;
    for (const auto& n : names) {
      const auto* e = ckpt_.find(n);
      parts.push_back(e->file->view(*e->info));
      rows += parts.back().dim(0);
      bytes += parts.back().nbytes();
      if (progress_) progress_->advance(parts.back().nbytes());
    }
    MX_ASSIGN(ops::Buffer host, ops::Buffer::allocate(Device::CPU, bytes));
    size_t off = 0;
    for (const auto& p : parts) {
      std::memcpy(static_cast<char*>(host.data()) + off, p.data, p.nbytes());
      off += p.nbytes();
    }
    Tensor t = parts[0];
    t.shape[0] = rows;
    t.data = host.data();
    if (shard_.plan) return slice(t, TpWeight::QkvRows);
    w_.bytes += bytes;
    if (w_.device == Device::CPU) {
      w_.storage.push_back(std::move(host));
      return t;
    }
    return upload(t);
  }

  void finish() {
    if (progress_) progress_->finish();
  }

 private:
  const Checkpoint& ckpt_;
  ModelWeights& w_;
  TpShard shard_;
  std::unique_ptr<Progress> progress_;
};

}  // namespace

Status place_rope_table(const ModelConfig& c, ModelWeights& w) {
  const YarnRope rope = compute_yarn_rope(c);
  Tensor host_freq(const_cast<float*>(rope.inv_freq.data()), DType::F32, {int64_t(rope.inv_freq.size())});
  MX_ASSIGN(ops::Buffer fb, ops::Buffer::allocate(w.device, host_freq.nbytes()));
  w.inv_freq = fb.view(DType::F32, {int64_t(rope.inv_freq.size())});
  MX_TRY(ops::copy(w.inv_freq, host_freq));
  w.storage.push_back(std::move(fb));
  w.rope_concentration = rope.concentration;
  return ok_status();
}

Result<ModelWeights> load_weights(const Checkpoint& ckpt, const ModelConfig& c, Device device, ShowProgress show,
                                  TpShard shard) {
  MX_TRY(check_all(ckpt, c));
  ModelWeights w;
  w.device = device;
  Placer put(ckpt, w, show, shard);
  MX_ASSIGN(w.embed, put.place("model.embed_tokens.weight"));
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    LayerWeights L;
    MX_ASSIGN(L.attn_norm, put.place(p + "input_layernorm.weight"));
    MX_ASSIGN(L.qkv_w, put.concat_rows({p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
                                        p + "self_attn.v_proj.weight"}));
    MX_ASSIGN(L.qkv_b, put.concat_rows({p + "self_attn.q_proj.bias", p + "self_attn.k_proj.bias",
                                        p + "self_attn.v_proj.bias"}));
    MX_ASSIGN(L.o_w, put.place(p + "self_attn.o_proj.weight", TpWeight::OColumns));
    MX_ASSIGN(L.o_b, put.place(p + "self_attn.o_proj.bias", TpWeight::RankZeroOnly));
    MX_ASSIGN(L.sinks, put.place(p + "self_attn.sinks", TpWeight::Sinks));
    MX_ASSIGN(L.mlp_norm, put.place(p + "post_attention_layernorm.weight"));
    MX_ASSIGN(L.router_w, put.place(p + "mlp.router.weight"));
    MX_ASSIGN(L.router_b, put.place(p + "mlp.router.bias"));
    const std::string x = p + "mlp.experts.";
    MX_ASSIGN(L.experts.gate_up_blocks, put.place(x + "gate_up_proj_blocks", TpWeight::GateUpRows));
    MX_ASSIGN(L.experts.gate_up_scales, put.place(x + "gate_up_proj_scales", TpWeight::GateUpRows));
    MX_ASSIGN(L.experts.gate_up_bias, put.place(x + "gate_up_proj_bias", TpWeight::GateUpRows));
    MX_ASSIGN(L.experts.down_blocks, put.place(x + "down_proj_blocks", TpWeight::DownBlocks));
    MX_ASSIGN(L.experts.down_scales, put.place(x + "down_proj_scales", TpWeight::DownBlocks));
    MX_ASSIGN(L.experts.down_bias, put.place(x + "down_proj_bias", TpWeight::RankZeroOnly));
    w.layers.push_back(L);
  }
  MX_ASSIGN(w.final_norm, put.place("model.norm.weight"));
  MX_ASSIGN(w.lm_head, put.place("lm_head.weight", TpWeight::VocabRows));
  put.finish();

  MX_TRY(place_rope_table(c, w));
  return w;
}

}  // namespace mx
