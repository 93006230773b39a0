// Random EAGLE-3 drafts in the published formats (config.json + model.safetensors), seeded: for the
// loader and draft-forward tests, and drafts of the published shapes for measuring.
#pragma once

#include <filesystem>
#include <vector>

#include "core/status.h"

namespace mx {

enum class Eagle3Format { Native, Speculators };  // LlamaForCausalLMEagle3 / Eagle3Speculator

struct RandomEagle3Spec {
  int hidden = 64, intermediate = 96, heads = 4, kv_heads = 2, head_dim = 16;
  int vocab = 301, draft_vocab = 301;  // draft_vocab < vocab: a d2t is written
  std::vector<int> aux_layer_ids = {0, 1, 2};  // empty: none listed (the defaults)
  Eagle3Format format = Eagle3Format::Native;
  bool midlayer_prefix = true;    // "midlayer." (SpecForge) or "layers.0." (ModelOpt, speculators)
  bool own_embedding = false;     // write embed_tokens.weight
  bool own_lm_head = true;        // write lm_head.weight (required when draft_vocab < vocab)
  bool d2t_int32 = false;         // d2t as I32 instead of I64
  bool use_aux_hidden_state = true, norm_before_fc = false, norm_before_residual = false, norm_output = false;
  bool attention_bias = false;
  double rope_theta = 10000.0;
  uint64_t seed = 99;
};

Status write_random_eagle3(const std::filesystem::path& dir, const RandomEagle3Spec& s);

}  // namespace mx
