// EAGLE-3 draft config (native and speculators formats), tensor checks and placement.
#include "model/eagle3.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "kernels/owned_tensor.h"
#include "model/forward.h"
#include "model/json_keys.h"
#include "model/model_path.h"
#include "model/rope.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace mx {

using nlohmann::json;

std::optional<AuxLayerIds> parse_aux_layer_ids(std::string_view name) {
  if (name == "literal") return AuxLayerIds::Literal;
  if (name == "plus_one") return AuxLayerIds::PlusOne;
  return std::nullopt;
}

namespace {

// The llama fields every format has (native: top level; speculators: transformer_layer_config).
Status read_llama_fields(const json& j, Eagle3Config& c) {
  MX_TRY(require_key(j, "hidden_size", c.hidden_size));
  MX_TRY(require_key(j, "intermediate_size", c.intermediate_size));
  MX_TRY(require_key(j, "num_attention_heads", c.num_attention_heads));
  c.num_key_value_heads = c.num_attention_heads;
  MX_TRY(read_key(j, "num_key_value_heads", c.num_key_value_heads));
  MX_CHECK(c.num_attention_heads > 0, "config.json: num_attention_heads must be positive");
  c.head_dim = c.hidden_size / c.num_attention_heads;  // llama's default; gpt-oss drafts state 64
  MX_TRY(read_key(j, "head_dim", c.head_dim));
  MX_TRY(read_key(j, "num_hidden_layers", c.num_hidden_layers));
  MX_TRY(read_key(j, "rms_norm_eps", c.rms_norm_eps));
  MX_TRY(require_key(j, "vocab_size", c.vocab_size));
  MX_TRY(read_key(j, "rope_theta", c.rope_theta));
  MX_TRY(read_key(j, "max_position_embeddings", c.max_position_embeddings));
  MX_TRY(read_key(j, "tie_word_embeddings", c.tie_word_embeddings));
  MX_TRY(read_key(j, "attention_bias", c.attention_bias));
  std::string act = "silu";
  MX_TRY(read_key(j, "hidden_act", act));
  MX_CHECK(act == "silu", "config.json: hidden_act '{}' is not supported (EAGLE-3 drafts use silu)", act);
  bool mlp_bias = false;
  MX_TRY(read_key(j, "mlp_bias", mlp_bias));
  MX_CHECK(!mlp_bias, "config.json: mlp_bias is not supported (no gpt-oss draft has MLP biases)");
  if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    const json& r = j["rope_scaling"];
    std::string type = "default";
    MX_TRY(read_key(r, "rope_type", type));
    if (!r.contains("rope_type")) MX_TRY(read_key(r, "type", type));
    if (type == "yarn") {
      RopeScaling s;
      s.truncate = true;  // vLLM's YaRN floors and ceils the ramp bounds unless told otherwise
      MX_TRY(read_key(r, "factor", s.factor));
      MX_TRY(read_key(r, "beta_fast", s.beta_fast));
      MX_TRY(read_key(r, "beta_slow", s.beta_slow));
      MX_TRY(read_key(r, "original_max_position_embeddings", s.original_max_position_embeddings));
      MX_TRY(read_key(r, "truncate", s.truncate));
      c.rope_scaling = s;
    } else {
      MX_CHECK(type == "default", "config.json: rope_scaling type '{}' is not supported for drafts (default, yarn)",
               type);
    }
  }
  return ok_status();
}

// The EAGLE-3 keys, read from `j` where present (later calls override earlier ones).
Status read_eagle_fields(const json& j, Eagle3Config& c) {
  if (j.contains("eagle_aux_hidden_state_layer_ids") && !j["eagle_aux_hidden_state_layer_ids"].is_null())
    MX_TRY(read_key(j, "eagle_aux_hidden_state_layer_ids", c.aux_layer_ids));
  MX_TRY(read_key(j, "use_aux_hidden_state", c.use_aux_hidden_state));
  MX_TRY(read_key(j, "norm_before_fc", c.norm_before_fc));
  MX_TRY(read_key(j, "norm_before_residual", c.norm_before_residual));
  MX_TRY(read_key(j, "norm_output", c.norm_output));
  bool fc_norm = false;
  MX_TRY(read_key(j, "fc_norm", fc_norm));
  MX_CHECK(!fc_norm, "config.json: fc_norm (one RMSNorm per aux state, Eagle 3.1) is not supported yet");
  return ok_status();
}

Result<std::string> architecture_of(const json& j) {
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    return j["architectures"][0].get<std::string>();
  if (j.value("speculators_model_type", "") == "eagle3") return std::string("Eagle3Speculator");
  return MX_ERROR("config.json: no 'architectures' naming an EAGLE-3 draft");
}

}  // namespace

Result<Eagle3Config> Eagle3Config::from_json(const json& j) {
  MX_CHECK(j.is_object(), "config.json: top level is not an object");
  Eagle3Config c;
  MX_ASSIGN(c.architecture, architecture_of(j));
  const std::string& a = c.architecture;
  if (a == "Eagle3Speculator") {
    MX_CHECK(j.contains("transformer_layer_config") && j["transformer_layer_config"].is_object(),
             "config.json: an Eagle3Speculator needs 'transformer_layer_config'");
    MX_TRY(read_llama_fields(j["transformer_layer_config"], c));
    c.norm_before_residual = true;  // the speculators format's default
    MX_TRY(read_eagle_fields(j, c));
  } else {
    MX_CHECK(a == "LlamaForCausalLMEagle3" || a == "Eagle3LlamaForCausalLM",
             "config.json: architecture '{}' is not an EAGLE-3 draft (LlamaForCausalLMEagle3, "
             "Eagle3LlamaForCausalLM, Eagle3Speculator)",
             a);
    MX_TRY(read_llama_fields(j, c));
    MX_TRY(read_eagle_fields(j, c));
    if (j.contains("eagle_config") && j["eagle_config"].is_object()) MX_TRY(read_eagle_fields(j["eagle_config"], c));
  }
  c.target_hidden_size = c.hidden_size;
  MX_TRY(read_key(j, "target_hidden_size", c.target_hidden_size));
  c.draft_vocab_size = c.vocab_size;
  MX_TRY(read_key(j, "draft_vocab_size", c.draft_vocab_size));
  c.num_aux_hidden_states = c.aux_layer_ids.empty() ? 3 : int(c.aux_layer_ids.size());
  MX_TRY(read_key(j, "num_aux_hidden_states", c.num_aux_hidden_states));
  return c;
}

std::vector<int> Eagle3Config::boundaries(int L, AuxLayerIds ids) const {
  if (!use_aux_hidden_state) return {kAuxFinalHidden};
  std::vector<int> b;
  if (aux_layer_ids.empty()) {
    b = {2, L / 2, L - 3};  // every tool's default names these states
  } else {
    for (int id : aux_layer_ids) b.push_back(ids == AuxLayerIds::PlusOne ? id + 1 : id);
  }
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  return b;
}

Status Eagle3Config::validate(const ModelConfig& t, AuxLayerIds ids) const {
  MX_CHECK(num_hidden_layers == 1, "draft: {} layers; only single-layer EAGLE-3 drafts are supported (every "
           "published gpt-oss draft has one)", num_hidden_layers);
  MX_CHECK(hidden_size == t.hidden_size, "draft: hidden_size {} differs from the target's {}", hidden_size,
           t.hidden_size);
  MX_CHECK(target_hidden_size == t.hidden_size, "draft: target_hidden_size {} differs from the target's hidden_size {}",
           target_hidden_size, t.hidden_size);
  MX_CHECK(vocab_size == t.vocab_size, "draft: vocab_size {} differs from the target's {}", vocab_size, t.vocab_size);
  MX_CHECK(draft_vocab_size > 0 && draft_vocab_size <= vocab_size, "draft: draft_vocab_size {} outside 1..{}",
           draft_vocab_size, vocab_size);
  MX_CHECK(intermediate_size > 0, "draft: intermediate_size must be positive");
  MX_CHECK(num_key_value_heads > 0 && num_attention_heads % num_key_value_heads == 0,
           "draft: {} attention heads do not split into groups of {} kv heads", num_attention_heads,
           num_key_value_heads);
  MX_CHECK(head_dim > 0 && head_dim % 2 == 0, "draft: head_dim {} must be positive and even", head_dim);
  MX_CHECK(rms_norm_eps > 0, "draft: rms_norm_eps must be positive");
  MX_CHECK(rope_theta > 0, "draft: rope_theta must be positive");
  if (!use_aux_hidden_state) return ok_status();
  const std::vector<int> b = boundaries(t.num_hidden_layers, ids);
  for (int x : b)
    MX_CHECK(x >= 0 && x <= t.num_hidden_layers,
             "draft: aux layer ids [{}] name boundary {}, outside 0..{} (the target has {} layers; ids read as {})",
             fmt::join(aux_layer_ids, ", "), x, t.num_hidden_layers, t.num_hidden_layers,
             ids == AuxLayerIds::PlusOne ? "plus_one" : "literal");
  MX_CHECK(int(b.size()) == num_aux_hidden_states,
           "draft: {} distinct aux states [{}] for num_aux_hidden_states {}", b.size(), fmt::join(b, ", "),
           num_aux_hidden_states);
  return ok_status();
}

std::string Eagle3Config::summary(int L, AuxLayerIds ids) const {
  const std::vector<int> b = boundaries(L, ids);
  return fmt::format("EAGLE-3 draft ({}): {} wide, {}/{} heads of {}, MLP {}, draft vocabulary {}, features {}{}{}",
                     architecture, hidden_size, num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
                     draft_vocab_size,
                     use_aux_hidden_state ? fmt::format("from target boundaries [{}]", fmt::join(b, ", "))
                                          : std::string("= the target's final hidden state"),
                     norm_before_fc ? ", norm before fc" : "", norm_before_residual ? ", normed residual" : "");
}

namespace {

std::string shape_str(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// The draft's checkpoint: tensors looked up under any of their published names.
class DraftTensors {
 public:
  DraftTensors(const Checkpoint& ckpt, const std::filesystem::path& dir) : ckpt_(ckpt), dir_(dir) {}

  // The first of `names` the checkpoint has, or null.
  const Checkpoint::Entry* find(const std::vector<std::string>& names) const {
    for (const auto& n : names)
      if (const auto* e = ckpt_.find(n)) return e;
    return nullptr;
  }

  // A required tensor, checked against dtype and shape; errors name the file and tensor.
  Result<Tensor> get(const std::vector<std::string>& names, DType dtype, const std::vector<int64_t>& shape) const {
    const auto* e = find(names);
    MX_CHECK(e, "draft {}: missing tensor '{}'", dir_.string(), names.front());
    return checked(*e, dtype, shape);
  }

  Result<Tensor> checked(const Checkpoint::Entry& e, DType dtype, const std::vector<int64_t>& shape) const {
    const TensorInfo& i = *e.info;
    MX_CHECK(i.dtype == dtype, "draft {}: tensor '{}' in {} has dtype {}, expected {}", dir_.string(), i.name,
             e.file->path().filename().string(), dtype_name(i.dtype), dtype_name(dtype));
    MX_CHECK(i.shape == shape, "draft {}: tensor '{}' in {} has shape {}, expected {}", dir_.string(), i.name,
             e.file->path().filename().string(), shape_str(i.shape), shape_str(shape));
    return e.file->view(i);
  }

 private:
  const Checkpoint& ckpt_;
  std::filesystem::path dir_;
};

// Names of a layer tensor under the three published prefixes.
std::vector<std::string> layer_names(const std::string& suffix) {
  return {"midlayer." + suffix, "layers.0." + suffix, "model.layers.0." + suffix};
}

// Copies host bytes onto the device into owned storage.
class Uploader {
 public:
  explicit Uploader(Eagle3Weights& w) : w_(w) {}

  Result<Tensor> put(const Tensor& host) {
    MX_ASSIGN(Tensor t, ops::upload_tensor(w_.storage, w_.device, host));
    w_.bytes += t.nbytes();
    return t;
  }

  // Columns [c0, c0 + n) of the rows of several (N_i, K) 2-byte tensors, stacked: (ΣN_i, n).
  Result<Tensor> put_columns(const std::vector<Tensor>& parts, int64_t c0, int64_t n) {
    int64_t rows = 0;
    for (const Tensor& p : parts) rows += p.dim(0);
    std::vector<uint16_t> host(size_t(rows * n));
    int64_t r = 0;
    for (const Tensor& p : parts)
      for (int64_t i = 0; i < p.dim(0); ++i, ++r)
        std::memcpy(host.data() + r * n, p.ptr<const uint16_t>() + i * p.dim(1) + c0, size_t(n) * 2);
    return put(Tensor(host.data(), parts[0].dtype, {rows, n}));
  }

  template <typename T>
  Result<Tensor> put_vector(std::vector<T>& v, DType dtype) {
    return put(Tensor(v.data(), dtype, {int64_t(v.size())}));
  }

 private:
  Eagle3Weights& w_;
};

// Target id of each draft id: d + d2t[d] (int64 or int32 offsets), checked to lie in [0, V).
Result<std::vector<int32_t>> draft_to_target(const Tensor* d2t, int64_t Vd, int64_t V, const std::string& where) {
  std::vector<int32_t> map(static_cast<size_t>(Vd));
  for (int64_t d = 0; d < Vd; ++d) {
    int64_t off = 0;
    if (d2t) off = d2t->dtype == DType::I64 ? d2t->ptr<const int64_t>()[d] : d2t->ptr<const int32_t>()[d];
    const int64_t t = d + off;
    MX_CHECK(t >= 0 && t < V, "draft {}: d2t maps draft id {} to target id {}, outside 0..{}", where, d, t, V - 1);
    map[size_t(d)] = int32_t(t);
  }
  return map;
}

}  // namespace

Status place_eagle3_tables(Eagle3Draft& d, std::vector<int32_t> draft_to_target) {
  const Eagle3Config& c = d.config;
  Eagle3Weights& w = d.weights;
  Uploader up(w);
  MX_ASSIGN(w.draft_to_target, up.put_vector(draft_to_target, DType::I32));
  w.draft_to_target_host = std::move(draft_to_target);
  std::vector<float> sinks(size_t(c.num_attention_heads), -std::numeric_limits<float>::infinity());
  MX_ASSIGN(w.sinks, up.put_vector(sinks, DType::F32));
  std::vector<float> inv_freq(size_t(c.head_dim / 2));
  if (c.rope_scaling) {
    ModelConfig rc;
    rc.head_dim = c.head_dim;
    rc.rope_theta = c.rope_theta;
    rc.rope_scaling = *c.rope_scaling;
    const YarnRope r = compute_yarn_rope(rc);
    inv_freq = r.inv_freq;
    w.rope_concentration = r.concentration;
  } else {
    for (size_t i = 0; i < inv_freq.size(); ++i)  // θ^(-2i/Dh), the power in fp32 like the references
      inv_freq[i] = float(1.0 / double(std::pow(float(c.rope_theta), float(2 * i) / float(c.head_dim))));
  }
  MX_ASSIGN(w.inv_freq, up.put_vector(inv_freq, DType::F32));
  return ok_status();
}

Result<Eagle3Draft> load_eagle3(const std::filesystem::path& dir, const ModelConfig& target,
                                const ModelWeights& tw, AuxLayerIds ids) {
  Eagle3Draft d;
  d.dir = dir;
  std::ifstream f(dir / "config.json");
  MX_CHECK(f, "draft {}: no config.json", dir.string());
  const json j = json::parse(f, nullptr, /*allow_exceptions=*/false);
  MX_CHECK(!j.is_discarded(), "draft {}: config.json is not valid JSON", dir.string());
  auto cfg = Eagle3Config::from_json(j);
  MX_CHECK(cfg.ok(), "draft {}: {}", dir.string(), cfg.status().message());
  d.config = *cfg;
  const Eagle3Config& c = d.config;
  if (Status st = c.validate(target, ids); !st.ok()) return MX_ERROR("{} ({})", st.message(), dir.string());
  d.boundaries = c.boundaries(target.num_hidden_layers, ids);

  MX_ASSIGN(Checkpoint ckpt, Checkpoint::open(dir));
  const DraftTensors t(ckpt, dir);
  const int64_t D = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, Vd = c.draft_vocab_size;
  const int64_t Hq = c.q_width(), Hkv = c.kv_width(), in2 = 2 * D;
  Eagle3Weights& w = d.weights;
  w.device = tw.device;
  Uploader up(w);
  auto layer = [&](const std::string& suffix, const std::vector<int64_t>& shape) {
    return t.get(layer_names(suffix), DType::BF16, shape);
  };
  if (c.use_aux_hidden_state) {
    MX_ASSIGN(Tensor fc, t.get({"fc.weight", "model.fc.weight"}, DType::BF16, {D, c.fc_in()}));
    MX_ASSIGN(w.fc, up.put(fc));
  }
  if (c.norm_before_fc) {
    MX_ASSIGN(Tensor x, t.get({"input_norm.weight", "model.input_norm.weight"}, DType::BF16, {c.fc_in()}));
    MX_ASSIGN(w.input_norm, up.put(x));
  }
  MX_ASSIGN(Tensor hidden_norm, layer("hidden_norm.weight", {D}));
  MX_ASSIGN(w.hidden_norm, up.put(hidden_norm));
  MX_ASSIGN(Tensor input_ln, layer("input_layernorm.weight", {D}));
  MX_ASSIGN(w.input_layernorm, up.put(input_ln));
  MX_ASSIGN(Tensor q, layer("self_attn.q_proj.weight", {Hq, in2}));
  MX_ASSIGN(Tensor k, layer("self_attn.k_proj.weight", {Hkv, in2}));
  MX_ASSIGN(Tensor v, layer("self_attn.v_proj.weight", {Hkv, in2}));
  MX_ASSIGN(w.qkv_w_embed, up.put_columns({q, k, v}, 0, D));
  MX_ASSIGN(w.qkv_w_hidden, up.put_columns({q, k, v}, D, D));
  MX_ASSIGN(Tensor o, layer("self_attn.o_proj.weight", {D, Hq}));
  MX_ASSIGN(w.o_w, up.put(o));
  if (c.attention_bias) {
    MX_ASSIGN(Tensor qb, layer("self_attn.q_proj.bias", {Hq}));
    MX_ASSIGN(Tensor kb, layer("self_attn.k_proj.bias", {Hkv}));
    MX_ASSIGN(Tensor vb, layer("self_attn.v_proj.bias", {Hkv}));
    std::vector<uint16_t> b(size_t(Hq + 2 * Hkv));
    std::memcpy(b.data(), qb.data, size_t(Hq) * 2);
    std::memcpy(b.data() + Hq, kb.data, size_t(Hkv) * 2);
    std::memcpy(b.data() + Hq + Hkv, vb.data, size_t(Hkv) * 2);
    MX_ASSIGN(w.qkv_b, up.put_vector(b, DType::BF16));
    MX_ASSIGN(Tensor ob, layer("self_attn.o_proj.bias", {D}));
    MX_ASSIGN(w.o_b, up.put(ob));
  }
  MX_ASSIGN(Tensor post_ln, layer("post_attention_layernorm.weight", {D}));
  MX_ASSIGN(w.post_attention_layernorm, up.put(post_ln));
  MX_ASSIGN(Tensor gate, layer("mlp.gate_proj.weight", {I, D}));
  MX_ASSIGN(Tensor upw, layer("mlp.up_proj.weight", {I, D}));
  MX_ASSIGN(w.gate_up_w, up.put_columns({gate, upw}, 0, D));
  MX_ASSIGN(Tensor down, layer("mlp.down_proj.weight", {D, I}));
  MX_ASSIGN(w.down_w, up.put(down));
  MX_ASSIGN(Tensor norm, t.get({"norm.weight", "model.norm.weight"}, DType::BF16, {D}));
  MX_ASSIGN(w.norm, up.put(norm));

  // Embedding and lm_head: the draft's own, else the target's (vLLM's rule).
  if (const auto* e = t.find({"embed_tokens.weight", "model.embed_tokens.weight"})) {
    MX_ASSIGN(Tensor x, t.checked(*e, DType::BF16, {V, D}));
    MX_ASSIGN(w.embed, up.put(x));
    w.own_embed = true;
  } else {
    MX_CHECK(ops::is_mxfp4(tw.embed_scales) == false,
             "draft {}: it has no embedding of its own and the target's is MXFP4 (--mxfp4-layers embed)", dir.string());
    w.embed = tw.embed;
  }
  if (const auto* e = t.find({"lm_head.weight", "model.lm_head.weight"})) {
    MX_ASSIGN(Tensor x, t.checked(*e, DType::BF16, {Vd, D}));
    MX_ASSIGN(w.lm_head, up.put(x));
    w.own_lm_head = true;
  } else if (c.tie_word_embeddings && Vd == V) {
    w.lm_head = w.embed;
  } else {
    MX_CHECK(Vd == V, "draft {}: no lm_head.weight, and its draft vocabulary ({}) is not the target's ({})",
             dir.string(), Vd, V);
    MX_CHECK(!ops::is_mxfp4(tw.lm_head_scales),
             "draft {}: it has no lm_head of its own and the target's is MXFP4 (--mxfp4-layers lm_head)", dir.string());
    w.lm_head = tw.lm_head;
  }
  Tensor d2t;
  const auto* d2t_entry = t.find({"d2t", "model.d2t"});
  if (d2t_entry) {
    const DType dt = d2t_entry->info->dtype == DType::I32 ? DType::I32 : DType::I64;
    MX_ASSIGN(d2t, t.checked(*d2t_entry, dt, {Vd}));
  } else {
    MX_CHECK(Vd == V, "draft {}: no d2t, and its draft vocabulary ({}) is not the target's ({})", dir.string(), Vd, V);
  }
  MX_ASSIGN(std::vector<int32_t> map, draft_to_target(d2t_entry ? &d2t : nullptr, Vd, V, dir.string()));
  MX_TRY(place_eagle3_tables(d, std::move(map)));
  return d;
}

Result<uint64_t> eagle3_weight_bytes(const std::string& arg, const ModelConfig& target) {
  if (arg.starts_with("synthetic:")) {  // make_synthetic_eagle3's shapes
    const uint64_t D = uint64_t(target.hidden_size), I = 17280, Vd = uint64_t(std::min(32000, target.vocab_size));
    const uint64_t q = 64 * 64, kv = 8 * 64;
    return 2 * (D * 3 * D + 2 * (q + 2 * kv) * D + D * q + 3 * I * D + Vd * D + 4 * D);
  }
  MX_ASSIGN(std::filesystem::path dir, resolve_model_path(arg));
  MX_ASSIGN(Checkpoint ckpt, Checkpoint::open(dir));
  return ckpt.total_bytes();
}

Result<Eagle3Draft> open_eagle3(const std::string& arg, const ModelConfig& target, const ModelWeights& tw,
                                AuxLayerIds ids) {
  if (arg.starts_with("synthetic:")) return make_synthetic_eagle3(arg, target, tw, ids);
  MX_ASSIGN(std::filesystem::path dir, resolve_model_path(arg));
  return load_eagle3(dir, target, tw, ids);
}

}  // namespace mx
