// Parsing and validation of config.json into ModelConfig.
#include "model/config.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "model/json_keys.h"

namespace mx {

using nlohmann::json;

Result<ModelConfig> ModelConfig::from_json(const json& j) {
  MX_CHECK(j.is_object(), "config.json: top level is not an object");
  ModelConfig c;
  MX_TRY(read_key(j, "model_type", c.model_type));
  MX_TRY(require_key(j, "num_hidden_layers", c.num_hidden_layers));
  if (j.contains("num_local_experts")) MX_TRY(read_key(j, "num_local_experts", c.num_local_experts));
  else MX_TRY(require_key(j, "num_experts", c.num_local_experts));  // original/ layout name
  if (j.contains("num_experts_per_tok")) MX_TRY(read_key(j, "num_experts_per_tok", c.num_experts_per_tok));
  else MX_TRY(read_key(j, "experts_per_token", c.num_experts_per_tok));
  MX_TRY(require_key(j, "hidden_size", c.hidden_size));
  MX_TRY(require_key(j, "intermediate_size", c.intermediate_size));
  MX_TRY(require_key(j, "num_attention_heads", c.num_attention_heads));
  MX_TRY(require_key(j, "num_key_value_heads", c.num_key_value_heads));
  MX_TRY(require_key(j, "head_dim", c.head_dim));
  MX_TRY(require_key(j, "vocab_size", c.vocab_size));
  MX_TRY(read_key(j, "rms_norm_eps", c.rms_norm_eps));
  MX_TRY(read_key(j, "sliding_window", c.sliding_window));
  MX_TRY(read_key(j, "rope_theta", c.rope_theta));
  MX_TRY(read_key(j, "initial_context_length", c.initial_context_length));
  MX_TRY(read_key(j, "max_position_embeddings", c.max_position_embeddings));
  MX_TRY(read_key(j, "swiglu_limit", c.swiglu_limit));
  MX_TRY(read_key(j, "swiglu_alpha", c.swiglu_alpha));
  MX_TRY(read_key(j, "attention_bias", c.attention_bias));
  MX_TRY(read_key(j, "tie_word_embeddings", c.tie_word_embeddings));
  MX_TRY(read_key(j, "pad_token_id", c.pad_token_id));

  if (j.contains("eos_token_id")) {
    const json& e = j["eos_token_id"];
    if (e.is_number_integer()) c.eos_token_ids = {e.get<int>()};
    else MX_TRY(read_key(j, "eos_token_id", c.eos_token_ids));
  }

  if (j.contains("layer_types")) {
    std::vector<std::string> types;
    MX_TRY(read_key(j, "layer_types", types));
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] == "sliding_attention") c.layer_types.push_back(AttentionType::Sliding);
      else if (types[i] == "full_attention") c.layer_types.push_back(AttentionType::Full);
      else return MX_ERROR("config.json: layer_types[{}] is '{}' (expected sliding_attention or full_attention)", i, types[i]);
    }
  } else {
    for (int l = 0; l < c.num_hidden_layers; ++l)
      c.layer_types.push_back(l % 2 == 0 ? AttentionType::Sliding : AttentionType::Full);
  }

  if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    const json& r = j["rope_scaling"];
    MX_TRY(read_key(r, "rope_type", c.rope_scaling.rope_type));
    if (!r.contains("rope_type")) MX_TRY(read_key(r, "type", c.rope_scaling.rope_type));
    MX_TRY(read_key(r, "factor", c.rope_scaling.factor));
    MX_TRY(read_key(r, "beta_fast", c.rope_scaling.beta_fast));
    MX_TRY(read_key(r, "beta_slow", c.rope_scaling.beta_slow));
    MX_TRY(read_key(r, "original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings));
    MX_TRY(read_key(r, "truncate", c.rope_scaling.truncate));
  }

  if (j.contains("quantization_config") && j["quantization_config"].is_object()) {
    std::string method;
    MX_TRY(read_key(j["quantization_config"], "quant_method", method));
    c.mxfp4_experts = method == "mxfp4";
  }
  MX_TRY(c.validate());
  return c;
}

Result<ModelConfig> ModelConfig::load(const std::filesystem::path& path) {
  std::ifstream in(path);
  MX_CHECK(in.good(), "cannot open {}", path.string());
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    return MX_ERROR("{} is not valid JSON: {}", path.string(), e.what());
  }
  auto c = from_json(j);
  if (!c.ok()) return c.status().with_context(path.string());
  return c;
}

Status ModelConfig::validate() const {
  MX_CHECK(model_type == "gpt_oss", "config.json: model_type is '{}', mxserve runs gpt_oss models", model_type);
  MX_CHECK(num_hidden_layers > 0, "config.json: num_hidden_layers must be positive (got {})", num_hidden_layers);
  MX_CHECK(hidden_size > 0 && hidden_size % 32 == 0,
           "config.json: hidden_size {} must be a positive multiple of 32 (MXFP4 block)", hidden_size);
  MX_CHECK(intermediate_size > 0 && intermediate_size % 32 == 0,
           "config.json: intermediate_size {} must be a positive multiple of 32 (MXFP4 block)", intermediate_size);
  MX_CHECK(num_attention_heads > 0 && num_key_value_heads > 0, "config.json: head counts must be positive");
  MX_CHECK(num_attention_heads % num_key_value_heads == 0,
           "config.json: num_attention_heads {} is not a multiple of num_key_value_heads {}", num_attention_heads,
           num_key_value_heads);
  MX_CHECK(head_dim > 0 && head_dim % 2 == 0, "config.json: head_dim {} must be positive and even", head_dim);
  MX_CHECK(num_local_experts > 0, "config.json: num_local_experts must be positive");
  MX_CHECK(num_experts_per_tok > 0 && num_experts_per_tok <= num_local_experts,
           "config.json: num_experts_per_tok {} must be in [1, num_local_experts={}]", num_experts_per_tok,
           num_local_experts);
  MX_CHECK(vocab_size > 0, "config.json: vocab_size must be positive");
  MX_CHECK(sliding_window > 0, "config.json: sliding_window must be positive (got {})", sliding_window);
  MX_CHECK(int(layer_types.size()) == num_hidden_layers, "config.json: layer_types has {} entries for {} layers",
           layer_types.size(), num_hidden_layers);
  MX_CHECK(rope_scaling.rope_type == "yarn", "config.json: rope_scaling.rope_type '{}' is not supported (yarn)",
           rope_scaling.rope_type);
  MX_CHECK(rope_scaling.factor >= 1.0, "config.json: rope_scaling.factor must be >= 1");
  MX_CHECK(rope_theta > 1.0, "config.json: rope_theta must be > 1");
  MX_CHECK(rms_norm_eps > 0, "config.json: rms_norm_eps must be positive");
  MX_CHECK(max_position_embeddings > 0, "config.json: max_position_embeddings must be positive");
  MX_CHECK(mxfp4_experts, "config.json: only MXFP4 expert checkpoints (quant_method mxfp4) are supported");
  MX_CHECK(!tie_word_embeddings, "config.json: tied embeddings are not used by gpt-oss");
  return ok_status();
}

std::string ModelConfig::summary() const {
  int sliding = 0;
  for (auto t : layer_types) sliding += t == AttentionType::Sliding;
  return fmt::format(
      "model_type           {}\n"
      "layers               {} ({} sliding window {}, {} full)\n"
      "hidden_size          {}\n"
      "experts              {} (top-{}), expert width {}\n"
      "attention heads      {} q, {} kv, head_dim {}\n"
      "vocab_size           {}\n"
      "rope                 theta {}, yarn factor {} (L0 {}, beta_fast {}, beta_slow {})\n"
      "max positions        {}\n"
      "swiglu_limit         {}\n",
      model_type, num_hidden_layers, sliding, sliding_window, num_hidden_layers - sliding, hidden_size,
      num_local_experts, num_experts_per_tok, intermediate_size, num_attention_heads, num_key_value_heads, head_dim,
      vocab_size, rope_theta, rope_scaling.factor, rope_scaling.original_max_position_embeddings,
      rope_scaling.beta_fast, rope_scaling.beta_slow, max_position_embeddings, swiglu_limit);
}

}  // namespace mx
