// ModelConfig: the model's config.json, key for key (GPTOSS_SPEC §1.1), plus validation.
// Glossary of dimension letters used across the model code:
//   T tokens, D hidden (2880), H q heads (64), Hkv kv heads (8), Dh head dim (64), E experts,
//   K experts per token (4), F expert width (2880), V vocab (201088), L layers.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace mx {

enum class AttentionType { Sliding, Full };

struct RopeScaling {
  std::string rope_type = "yarn";
  double factor = 32.0;                 // s: context extension factor
  double beta_fast = 32.0;              // β: high-frequency bound of the ramp
  double beta_slow = 1.0;               // α: low-frequency bound of the ramp
  int original_max_position_embeddings = 4096;  // L0
  bool truncate = false;                // false: no floor/ceil on the ramp bounds (§6.1)
};

struct ModelConfig {
  std::string model_type = "gpt_oss";
  int num_hidden_layers = 0;       // L: 24 (20b) / 36 (120b)
  int num_local_experts = 0;       // E: 32 / 128
  int num_experts_per_tok = 4;     // K (also "experts_per_token")
  int hidden_size = 0;             // D
  int intermediate_size = 0;       // F
  int num_attention_heads = 0;     // H
  int num_key_value_heads = 0;     // Hkv
  int head_dim = 0;                // Dh
  int vocab_size = 0;              // V
  double rms_norm_eps = 1e-5;
  int sliding_window = 128;        // keys seen on sliding layers, including the current token
  std::vector<AttentionType> layer_types;  // even = sliding, odd = full in the released models
  double rope_theta = 150000.0;
  RopeScaling rope_scaling;
  int initial_context_length = 4096;
  int max_position_embeddings = 131072;
  float swiglu_limit = 7.0f;
  float swiglu_alpha = 1.702f;     // not in config.json; hard-coded by every reference
  bool attention_bias = true;
  bool tie_word_embeddings = false;
  std::vector<int> eos_token_ids;  // eos_token_id (int or list)
  int pad_token_id = -1;
  bool mxfp4_experts = true;       // quantization_config.quant_method == "mxfp4"

  int q_width() const { return num_attention_heads * head_dim; }      // 4096
  int kv_width() const { return num_key_value_heads * head_dim; }     // 512
  int qkv_width() const { return q_width() + 2 * kv_width(); }        // 5120
  int window_of_layer(int layer) const {
    return layer_types[size_t(layer)] == AttentionType::Sliding ? sliding_window : 0;
  }

  static Result<ModelConfig> from_json(const nlohmann::json& j);
  static Result<ModelConfig> load(const std::filesystem::path& config_json);
  Status validate() const;
  std::string summary() const;  // multi-line, for `mxserve info`
};

}  // namespace mx
