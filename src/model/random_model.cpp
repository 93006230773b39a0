// Random checkpoint writer: dense weights ~U(-a, a) with a = 1/sqrt(fan_in) in BF16, norm gains
// near 1, sinks ~U(-1, 1), MXFP4 experts with random nibbles and scale bytes 121..124.
#include "model/random_model.h"

#include <cmath>
#include <fstream>
#include <random>

#include "model/safetensors_writer.h"
#include "model/weights.h"

namespace mx {

nlohmann::ordered_json random_model_config(const RandomModelSpec& s) {
  nlohmann::ordered_json layer_types = nlohmann::ordered_json::array();
  for (int l = 0; l < s.layers; ++l) layer_types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
  return {
      {"architectures", {"GptOssForCausalLM"}},
      {"model_type", "gpt_oss"},
      {"num_hidden_layers", s.layers},
      {"num_local_experts", s.experts},
      {"num_experts_per_tok", s.experts_per_token},
      {"experts_per_token", s.experts_per_token},
      {"hidden_size", s.hidden},
      {"intermediate_size", s.intermediate},
      {"num_attention_heads", s.heads},
      {"num_key_value_heads", s.kv_heads},
      {"head_dim", s.head_dim},
      {"vocab_size", s.vocab},
      {"rms_norm_eps", 1e-5},
      {"sliding_window", s.sliding_window},
      {"layer_types", layer_types},
      {"rope_theta", 150000},
      {"rope_scaling",
       {{"rope_type", "yarn"}, {"factor", 32.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0},
        {"original_max_position_embeddings", 4096}, {"truncate", false}}},
      {"initial_context_length", 4096},
      {"max_position_embeddings", 131072},
      {"swiglu_limit", 7.0},
      {"hidden_act", "silu"},
      {"attention_bias", true},
      {"attention_dropout", 0.0},
      {"tie_word_embeddings", false},
      {"eos_token_id", 200002},
      {"pad_token_id", 199999},
      {"quantization_config",
       {{"quant_method", "mxfp4"},
        {"modules_to_not_convert",
         {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}}}},
  };
}

Status write_random_model(const std::filesystem::path& dir, const RandomModelSpec& s) {
  std::filesystem::create_directories(dir);
  const auto cfg_json = random_model_config(s);
  MX_ASSIGN(ModelConfig cfg, ModelConfig::from_json(nlohmann::json::parse(cfg_json.dump())));
  std::mt19937_64 rng(s.seed);
  std::vector<TensorBlob> blobs;
  for (const auto& e : expected_tensors(cfg)) {
    TensorBlob b{e.name, e.dtype, e.shape, {}};
    int64_t numel = 1;
    for (auto d : e.shape) numel *= d;
    b.bytes.resize(size_t(numel) * dtype_size(e.dtype));
    const bool is_scale = e.name.ends_with("_scales");
    if (e.dtype == DType::U8) {
      std::uniform_int_distribution<int> nib(0, 255), sc(121, 124);
      for (auto& x : b.bytes) x = uint8_t(is_scale ? sc(rng) : nib(rng));
    } else {
      const bool is_norm = e.name.ends_with("norm.weight");
      const bool is_sink = e.name.ends_with("sinks");
      const bool is_embed = e.name == "model.embed_tokens.weight";
      const float fan_in = float(e.shape.back());
      const float a = is_sink ? 1.0f : is_norm ? 0.1f : is_embed ? 1.0f : 1.0f / std::sqrt(fan_in);
      std::uniform_real_distribution<float> u(-a, a);
      auto* out = reinterpret_cast<bf16*>(b.bytes.data());
      for (int64_t i = 0; i < numel; ++i) out[i] = f32_to_bf16(is_norm ? 1.0f + u(rng) : u(rng));
    }
    blobs.push_back(std::move(b));
  }
  MX_TRY(write_safetensors(dir / "model.safetensors", blobs));
  std::ofstream(dir / "config.json") << cfg_json.dump(2) << "\n";
  return ok_status();
}

}  // namespace mx
