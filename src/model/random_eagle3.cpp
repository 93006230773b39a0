// Random EAGLE-3 draft writer: linear weights ~U(-a, a) with a = 1/sqrt(fan_in), norm gains near 1,
// embedding ~U(-1, 1), d2t a sorted random subset of the target ids (SpecForge's construction).
#include "model/random_eagle3.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "model/safetensors_writer.h"

namespace mx {
namespace {

nlohmann::ordered_json llama_fields(const RandomEagle3Spec& s) {
  return {{"hidden_size", s.hidden},
          {"intermediate_size", s.intermediate},
          {"num_attention_heads", s.heads},
          {"num_key_value_heads", s.kv_heads},
          {"head_dim", s.head_dim},
          {"num_hidden_layers", 1},
          {"rms_norm_eps", 1e-5},
          {"hidden_act", "silu"},
          {"vocab_size", s.vocab},
          {"max_position_embeddings", 4096},
          {"rope_theta", s.rope_theta},
          {"rope_scaling", nullptr},
          {"tie_word_embeddings", false},
          {"attention_bias", s.attention_bias}};
}

nlohmann::ordered_json config(const RandomEagle3Spec& s) {
  nlohmann::ordered_json ids = s.aux_layer_ids.empty() ? nlohmann::ordered_json(nullptr)
                                                        : nlohmann::ordered_json(s.aux_layer_ids);
  if (s.format == Eagle3Format::Speculators) {
    return {{"architectures", {"Eagle3Speculator"}},
            {"speculators_model_type", "eagle3"},
            {"transformer_layer_config", llama_fields(s)},
            {"draft_vocab_size", s.draft_vocab},
            {"target_hidden_size", s.hidden},
            {"norm_before_residual", s.norm_before_residual},
            {"norm_before_fc", s.norm_before_fc},
            {"eagle_aux_hidden_state_layer_ids", ids}};
  }
  nlohmann::ordered_json c = llama_fields(s);
  c["architectures"] = {"LlamaForCausalLMEagle3"};
  c["model_type"] = "llama";
  c["draft_vocab_size"] = s.draft_vocab;
  c["norm_before_residual"] = s.norm_before_residual;
  c["norm_output"] = s.norm_output;
  c["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", ids},
                       {"use_aux_hidden_state", s.use_aux_hidden_state},
                       {"norm_before_fc", s.norm_before_fc}};
  return c;
}

}  // namespace

Status write_random_eagle3(const std::filesystem::path& dir, const RandomEagle3Spec& s) {
  std::filesystem::create_directories(dir);
  std::mt19937_64 rng(s.seed);
  std::vector<TensorBlob> blobs;
  auto bf16_tensor = [&](const std::string& name, std::vector<int64_t> shape, float scale, float offset) {
    TensorBlob b{name, DType::BF16, shape, {}};
    int64_t n = 1;
    for (int64_t x : shape) n *= x;
    b.bytes.resize(size_t(n) * 2);
    std::uniform_real_distribution<float> u(-scale, scale);
    auto* out = reinterpret_cast<bf16*>(b.bytes.data());
    for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(offset + u(rng));
    blobs.push_back(std::move(b));
  };
  auto linear = [&](const std::string& name, int64_t rows, int64_t cols) {
    bf16_tensor(name, {rows, cols}, 1.0f / std::sqrt(float(cols)), 0.0f);
  };
  auto norm = [&](const std::string& name, int64_t n) { bf16_tensor(name, {n}, 0.1f, 1.0f); };
  const int64_t D = s.hidden, I = s.intermediate, q = int64_t(s.heads) * s.head_dim, kv = int64_t(s.kv_heads) * s.head_dim;
  const int64_t n_aux = s.aux_layer_ids.empty() ? 3 : int64_t(s.aux_layer_ids.size());
  const std::string p = s.midlayer_prefix ? "midlayer." : "layers.0.";
  if (s.use_aux_hidden_state) linear("fc.weight", D, n_aux * D);
  if (s.norm_before_fc) norm("input_norm.weight", n_aux * D);
  norm(p + "hidden_norm.weight", D);
  norm(p + "input_layernorm.weight", D);
  linear(p + "self_attn.q_proj.weight", q, 2 * D);
  linear(p + "self_attn.k_proj.weight", kv, 2 * D);
  linear(p + "self_attn.v_proj.weight", kv, 2 * D);
  linear(p + "self_attn.o_proj.weight", D, q);
  if (s.attention_bias) {
    for (auto [name, n] : {std::pair{"q", q}, std::pair{"k", kv}, std::pair{"v", kv}})
      bf16_tensor(p + "self_attn." + name + "_proj.bias", {n}, 0.1f, 0.0f);
    bf16_tensor(p + "self_attn.o_proj.bias", {D}, 0.1f, 0.0f);
  }
  norm(p + "post_attention_layernorm.weight", D);
  linear(p + "mlp.gate_proj.weight", I, D);
  linear(p + "mlp.up_proj.weight", I, D);
  linear(p + "mlp.down_proj.weight", D, I);
  norm("norm.weight", D);
  if (s.own_lm_head) linear("lm_head.weight", s.draft_vocab, D);
  if (s.own_embedding) bf16_tensor("embed_tokens.weight", {s.vocab, D}, 1.0f, 0.0f);
  if (s.draft_vocab < s.vocab) {
    std::vector<int64_t> ids(size_t(s.vocab));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    ids.resize(size_t(s.draft_vocab));
    std::sort(ids.begin(), ids.end());
    TensorBlob b{"d2t", s.d2t_int32 ? DType::I32 : DType::I64, {s.draft_vocab}, {}};
    b.bytes.resize(size_t(s.draft_vocab) * (s.d2t_int32 ? 4 : 8));
    for (int64_t d = 0; d < s.draft_vocab; ++d) {
      const int64_t off = ids[size_t(d)] - d;
      if (s.d2t_int32) reinterpret_cast<int32_t*>(b.bytes.data())[d] = int32_t(off);
      else reinterpret_cast<int64_t*>(b.bytes.data())[d] = off;
    }
    blobs.push_back(std::move(b));
  }
  MX_TRY(write_safetensors(dir / "model.safetensors", blobs));
  std::ofstream(dir / "config.json") << config(s).dump(2) << "\n";
  return ok_status();
}

}  // namespace mx
