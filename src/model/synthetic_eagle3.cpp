// Synthetic EAGLE-3 drafts: the SpecForge gpt-oss shape (configs/gpt-oss-{20B,120B}-eagle3.json:
// one llama layer of the target's width, 64/8 heads of 64, MLP 17280, draft vocabulary 32000,
// aux ids [1, L/2 - 1, L - 3]) for whatever target it drafts for, every weight made on the device
// by ops::fill_random (dense ~U(±1/sqrt(fan_in)), norm gains 1 ± 0.1), the target's embedding
// borrowed, and a d2t of evenly spaced target ids.
#include <algorithm>
#include <cmath>

#include "core/log.h"
#include "kernels/owned_tensor.h"
#include "model/eagle3.h"

namespace mx {

Result<Eagle3Draft> make_synthetic_eagle3(const std::string& name, const ModelConfig& target,
                                          const ModelWeights& tw, AuxLayerIds ids, uint64_t seed) {
  MX_CHECK(name == "synthetic:eagle3-120b" || name == "synthetic:eagle3-20b" || name == "synthetic:eagle3",
           "unknown synthetic draft '{}' (synthetic:eagle3, the SpecForge shape for the target; "
           "synthetic:eagle3-120b and synthetic:eagle3-20b name the same)", name);
  const int L = target.num_hidden_layers;
  Eagle3Draft d;
  d.dir = name;
  Eagle3Config& c = d.config;
  c.architecture = "LlamaForCausalLMEagle3";
  c.hidden_size = c.target_hidden_size = target.hidden_size;
  c.intermediate_size = 17280;
  c.num_attention_heads = 64;
  c.num_key_value_heads = 8;
  c.head_dim = 64;
  c.vocab_size = target.vocab_size;
  c.draft_vocab_size = std::min(32000, target.vocab_size);
  c.max_position_embeddings = 4096;
  c.aux_layer_ids = {1, L / 2 - 1, L - 3};
  if (L < 6) c.aux_layer_ids = {0, std::min(1, L), std::min(2, L)};  // small test targets
  c.num_aux_hidden_states = int(c.boundaries(L, ids).size());
  MX_TRY(c.validate(target, ids));
  d.boundaries = c.boundaries(L, ids);

  Eagle3Weights& w = d.weights;
  w.device = tw.device;
  MX_ASSIGN(auto cx, ops::Context::create(w.device));  // the fills queue on its stream
  auto make = [&](std::initializer_list<int64_t> shape, float scale, float offset) -> Result<Tensor> {
    MX_ASSIGN(Tensor t, ops::allocate_tensor(w.storage, w.device, DType::BF16, shape));
    MX_TRY(ops::fill_random(*cx, {.out = t, .seed = seed++, .scale = scale, .offset = offset}));
    w.bytes += t.nbytes();
    return t;
  };
  auto dense = [&](int64_t rows, int64_t cols) { return make({rows, cols}, 1.0f / std::sqrt(float(cols)), 0.0f); };
  auto gain = [&](int64_t n) { return make({n}, 0.1f, 1.0f); };
  const int64_t D = c.hidden_size, I = c.intermediate_size, N = c.qkv_width(), Vd = c.draft_vocab_size;
  MX_ASSIGN(w.fc, dense(D, c.fc_in()));
  MX_ASSIGN(w.input_layernorm, gain(D));
  MX_ASSIGN(w.hidden_norm, gain(D));
  MX_ASSIGN(w.qkv_w_embed, make({N, D}, 1.0f / std::sqrt(float(2 * D)), 0.0f));  // fan-in 2D, as stored
  MX_ASSIGN(w.qkv_w_hidden, make({N, D}, 1.0f / std::sqrt(float(2 * D)), 0.0f));
  MX_ASSIGN(w.o_w, dense(D, c.q_width()));
  MX_ASSIGN(w.post_attention_layernorm, gain(D));
  MX_ASSIGN(w.gate_up_w, dense(2 * I, D));
  MX_ASSIGN(w.down_w, dense(D, I));
  MX_ASSIGN(w.norm, gain(D));
  MX_ASSIGN(w.lm_head, dense(Vd, D));
  w.own_lm_head = true;
  MX_CHECK(!ops::is_mxfp4(tw.embed_scales), "{}: the target's embedding is MXFP4 (--mxfp4-layers embed)", name);
  w.embed = tw.embed;
  std::vector<int32_t> map(static_cast<size_t>(Vd));
  for (int64_t i = 0; i < Vd; ++i) map[size_t(i)] = int32_t(i * (int64_t(c.vocab_size) / Vd));
  MX_TRY(place_eagle3_tables(d, std::move(map)));
  return d;
}

}  // namespace mx
