// EAGLE-3 draft models (docs/SPECULATIVE.md, docs/spec/EAGLE3_SPEC.md §2): the two published config
// formats, the draft's tensors checked by name, dtype and shape and placed on the target's device,
// and which target residual-stream states (boundaries) feed it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "kernels/ops.h"
#include "model/config.h"
#include "model/weights.h"

namespace mx {

// How a draft's listed aux-layer ids name target states. Boundary j is the residual stream after j
// decoder layers (0: the embedding, L: the last layer's output before the final norm).
//   Literal: id j is boundary j (vLLM's reading, the default; speculators drafts).
//   PlusOne: id j is boundary j + 1 (how SpecForge and ModelOpt drafts were trained: the output of
//            layer j).
enum class AuxLayerIds { Literal, PlusOne };
std::optional<AuxLayerIds> parse_aux_layer_ids(std::string_view name);  // "literal" | "plus_one"

struct Eagle3Config {
  std::string architecture;  // "LlamaForCausalLMEagle3" (native) or "Eagle3Speculator" (speculators)
  int hidden_size = 0;          // D (the target's width)
  int target_hidden_size = 0;   // width of each aux state (= D when absent)
  int intermediate_size = 0;    // I: the SiLU-gated MLP
  int num_attention_heads = 0, num_key_value_heads = 0, head_dim = 0;
  int num_hidden_layers = 1;
  double rms_norm_eps = 1e-5;
  int vocab_size = 0;        // V: the target's vocabulary (embedding rows)
  int draft_vocab_size = 0;  // Vd: lm_head rows (= V when absent)
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;  // YaRN only (vLLM's: truncated ramp bounds by default)
  int max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  std::vector<int> aux_layer_ids;  // as listed; empty: the default boundaries (2, L/2, L - 3)
  bool use_aux_hidden_state = true;  // false: the feature is the target's final post-norm hidden, no fc
  bool norm_before_fc = false;       // RMSNorm over the concatenated aux states (input_norm.weight)
  bool norm_before_residual = false; // the residual is the normed hidden (speculators: default true)
  bool norm_output = false;          // the hidden handed on is the final-normed one (Eagle 3.1)
  int num_aux_hidden_states = 3;

  int q_width() const { return num_attention_heads * head_dim; }
  int kv_width() const { return num_key_value_heads * head_dim; }
  int qkv_width() const { return q_width() + 2 * kv_width(); }
  int fc_in() const { return num_aux_hidden_states * target_hidden_size; }

  static Result<Eagle3Config> from_json(const nlohmann::json& j);
  // Checks the draft against the target it drafts for (widths, vocabulary, aux ids in range).
  Status validate(const ModelConfig& target, AuxLayerIds ids) const;
  // The target boundaries whose states feed the draft, ascending and distinct; without aux states
  // {kAuxFinalHidden} (model/forward.h: the final post-norm hidden state).
  std::vector<int> boundaries(int target_layers, AuxLayerIds ids) const;
  std::string summary(int target_layers, AuxLayerIds ids) const;  // one line, for the start-up log
};

// The draft's weights on the target's device (BF16 as stored). The first linear's input is
// [RMS(embedding); RMS(hidden)] (2D wide): its weight is split by columns into the embedding's and
// the hidden's halves, so that the two halves are two linears into the same output and the 2D
// input is never built.
struct Eagle3Weights {
  Device device = Device::CPU;
  Tensor fc;                // (D, n·Dt), empty without aux states
  Tensor input_norm;        // (n·Dt) with norm_before_fc, else empty
  Tensor input_layernorm;   // (D): norms the token embedding
  Tensor hidden_norm;       // (D): norms the incoming hidden state
  Tensor qkv_w_embed;       // (H·Dh + 2·Hkv·Dh, D): q, k, v rows over the embedding half
  Tensor qkv_w_hidden;      // (H·Dh + 2·Hkv·Dh, D): the same rows over the hidden half
  Tensor qkv_b;             // (H·Dh + 2·Hkv·Dh) with attention_bias, else empty
  Tensor o_w;               // (D, H·Dh)
  Tensor o_b;               // (D) with attention_bias, else empty
  Tensor post_attention_layernorm;  // (D)
  Tensor gate_up_w;         // (2I, D): gate rows, then up rows (ops::silu_mul's layout)
  Tensor down_w;            // (D, I)
  Tensor norm;              // (D): the final norm
  Tensor lm_head;           // (Vd, D): the draft's own, or the target's when it has none (Vd = V)
  Tensor embed;             // (V, D): the draft's own, or the target's
  Tensor draft_to_target;   // (Vd) i32 on the device: target id of draft id d (d + d2t[d]; identity without d2t)
  std::vector<int32_t> draft_to_target_host;  // the same on the host
  Tensor sinks;             // (H) f32, all -inf: the attention op's sinks, i.e. none
  Tensor inv_freq;          // (Dh/2) f32: the draft's RoPE
  float rope_concentration = 1.0f;
  std::vector<ops::Buffer> storage;
  uint64_t bytes = 0;
  bool own_embed = false, own_lm_head = false;
};

struct Eagle3Draft {
  Eagle3Config config;
  Eagle3Weights weights;
  std::vector<int> boundaries;  // target states fed to fc, ascending
  std::filesystem::path dir;
};

// Loads the draft in `dir` (config.json + safetensors; tensor names with the `midlayer.`,
// `layers.0.` or `model.layers.0.` layer prefix) for a target with config `target` and weights
// `target_weights` (whose embedding / lm_head it takes when it has none), onto their device. Errors
// name the file and the tensor.
Result<Eagle3Draft> load_eagle3(const std::filesystem::path& dir, const ModelConfig& target,
                                const ModelWeights& target_weights, AuxLayerIds ids = AuxLayerIds::Literal);
// `arg`: "synthetic:eagle3-120b" / "synthetic:eagle3-20b" (model/synthetic_eagle3.cpp), or a local
// folder / Hugging Face repo id in the cache, loaded with load_eagle3.
Result<Eagle3Draft> open_eagle3(const std::string& arg, const ModelConfig& target, const ModelWeights& target_weights,
                                AuxLayerIds ids = AuxLayerIds::Literal);
// A draft of the published SpecForge shape for the target (I 17280, draft vocabulary 32000, aux ids
// [1, L/2 - 1, L - 3]) with seeded random weights made on the target's device: the bytes and work of a
// real draft's step, for bench; it borrows the target's embedding.
Result<Eagle3Draft> make_synthetic_eagle3(const std::string& name, const ModelConfig& target,
                                          const ModelWeights& target_weights, AuxLayerIds ids, uint64_t seed = 7);
// The bytes open_eagle3 will place on the device for `arg` (its own tensors; a borrowed embedding
// is the target's): for sizing the KV cache before the draft is loaded.
Result<uint64_t> eagle3_weight_bytes(const std::string& arg, const ModelConfig& target);
// The draft-to-target ids, the -inf sinks and the RoPE table, placed on the draft's device (the
// last part of loading a draft, shared by both makers).
Status place_eagle3_tables(Eagle3Draft& d, std::vector<int32_t> draft_to_target);

}  // namespace mx
