// EAGLE-3 drafts: both config formats, the aux-layer conventions, loading (prefixes, own or borrowed
// embedding / lm_head, d2t as I64 or I32, errors that name file and tensor), and the draft step over
// the ops against a plain reference written from docs/spec/EAGLE3_SPEC.md §3 (CPU), and CUDA against
// the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "kernels/ops.h"
#include "model/eagle3.h"
#include "model/eagle3_forward.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/random_eagle3.h"
#include "model/random_model.h"
#include "model/safetensors.h"
#include "runtime/eagle3_drafter.h"
#include "runtime/kv_cache.h"
#include "test_util.h"
#include "test_context.h"

namespace mx {
namespace {

using nlohmann::json;

// A native config as SpecForge writes it for gpt-oss-120b (SpecForge configs/gpt-oss-120B-eagle3.json).
json specforge_120b() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 2880,
    "intermediate_size": 17280, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
    "num_hidden_layers": 1, "rms_norm_eps": 1e-05, "hidden_act": "silu", "vocab_size": 201088,
    "draft_vocab_size": 32000, "max_position_embeddings": 4096, "tie_word_embeddings": false,
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 17, 33], "use_aux_hidden_state": true}})");
}

ModelConfig target_120b() {
  ModelConfig t;
  t.num_hidden_layers = 36;
  t.hidden_size = 2880;
  t.vocab_size = 201088;
  return t;
}

TEST(Eagle3Config, NativeFormatAndTheLayerIdConventions) {
  auto c = Eagle3Config::from_json(specforge_120b());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->draft_vocab_size, 32000);
  EXPECT_EQ(c->fc_in(), 3 * 2880);
  EXPECT_FALSE(c->norm_before_residual);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);  // absent: llama's default, not gpt-oss's
  EXPECT_FALSE(c->rope_scaling.has_value());
  EXPECT_EQ(c->boundaries(36, AuxLayerIds::Literal), (std::vector<int>{1, 17, 33}));
  EXPECT_EQ(c->boundaries(36, AuxLayerIds::PlusOne), (std::vector<int>{2, 18, 34}));
  EXPECT_TRUE(c->validate(target_120b(), AuxLayerIds::Literal).ok());
  // No ids listed: every tool's defaults name boundaries (2, L/2, L - 3) whatever the convention.
  json j = specforge_120b();
  j["eagle_config"].erase("eagle_aux_hidden_state_layer_ids");
  auto d = Eagle3Config::from_json(j);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->boundaries(36, AuxLayerIds::PlusOne), (std::vector<int>{2, 18, 33}));
  EXPECT_EQ(d->boundaries(24, AuxLayerIds::Literal), (std::vector<int>{2, 12, 21}));
  // nvidia v3 lists [24, 30, 36]: only the literal reading stays inside 0..L.
  j["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = {24, 30, 36};
  j["eagle_config"]["norm_before_fc"] = true;
  j.erase("draft_vocab_size");
  auto v3 = Eagle3Config::from_json(j);
  ASSERT_TRUE(v3.ok());
  EXPECT_TRUE(v3->norm_before_fc);
  EXPECT_EQ(v3->draft_vocab_size, 201088);
  EXPECT_TRUE(v3->validate(target_120b(), AuxLayerIds::Literal).ok());
  const Status bad = v3->validate(target_120b(), AuxLayerIds::PlusOne);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("boundary 37"), std::string::npos) << bad.message();
}

TEST(Eagle3Config, SpeculatorsFormatDefaultsToANormedResidual) {
  const json j = json::parse(R"({
    "architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "draft_vocab_size": 32000,
    "target_hidden_size": 2880, "eagle_aux_hidden_state_layer_ids": [2, 12, 21],
    "transformer_layer_config": {"hidden_size": 2880, "intermediate_size": 2880, "num_attention_heads": 64,
      "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 201088, "rope_theta": 500000.0,
      "rope_scaling": null, "rms_norm_eps": 1e-05}})");
  auto c = Eagle3Config::from_json(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->norm_before_residual);
  EXPECT_FALSE(c->norm_before_fc);
  EXPECT_DOUBLE_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(c->intermediate_size, 2880);
  ModelConfig t20 = target_120b();
  t20.num_hidden_layers = 24;
  EXPECT_TRUE(c->validate(t20, AuxLayerIds::Literal).ok());
}

TEST(Eagle3Config, RefusesWhatItCannotRun) {
  auto msg = [](json j) {
    auto c = Eagle3Config::from_json(j);
    if (!c.ok()) return c.status().message();
    const Status st = c->validate(target_120b(), AuxLayerIds::Literal);
    return st.ok() ? std::string() : st.message();
  };
  json j = specforge_120b();
  j["architectures"] = {"GptOssForCausalLM"};
  EXPECT_NE(msg(j).find("not an EAGLE-3 draft"), std::string::npos);
  j = specforge_120b();
  j["fc_norm"] = true;
  EXPECT_NE(msg(j).find("fc_norm"), std::string::npos);
  j = specforge_120b();
  j["num_hidden_layers"] = 2;
  EXPECT_NE(msg(j).find("single-layer"), std::string::npos);
  j = specforge_120b();
  j["vocab_size"] = 1000;
  EXPECT_NE(msg(j).find("vocab_size 1000"), std::string::npos);
  j = specforge_120b();
  j["hidden_size"] = 4096;
  EXPECT_NE(msg(j).find("hidden_size 4096"), std::string::npos);
  j = specforge_120b();
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  EXPECT_NE(msg(j).find("llama3"), std::string::npos);
  j = specforge_120b();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 4096}};
  auto yarn = Eagle3Config::from_json(j);
  ASSERT_TRUE(yarn.ok());
  ASSERT_TRUE(yarn->rope_scaling.has_value());
  EXPECT_TRUE(yarn->rope_scaling->truncate);  // vLLM's YaRN unless the config says otherwise
}

// ---- loading and the draft step ------------------------------------------------------------

// A small target (3 layers, 64 wide, vocabulary 301) whose embedding and lm_head drafts may borrow.
const std::filesystem::path& target_dir() {
  static const std::filesystem::path dir = [] {
    const auto d = test::temp_dir("eagle3_target");
    RandomModelSpec s{.layers = 3, .hidden = 64, .intermediate = 64, .heads = 4, .kv_heads = 2, .head_dim = 16,
                      .experts = 4, .vocab = 301, .seed = 21};
    EXPECT_TRUE(write_random_model(d, s).ok());
    return d;
  }();
  return dir;
}

const Model& target(Device device) {
  static std::map<Device, std::unique_ptr<Model>> models;
  auto& m = models[device];
  if (!m) {
    auto r = Model::load(target_dir().string(), device, ShowProgress::No);
    EXPECT_TRUE(r.ok()) << r.status().message();
    m = std::move(*r);
  }
  return *m;
}

TEST(Eagle3Loader, PrefixesSharedWeightsAndD2t) {
  const Model& t = target(Device::CPU);
  for (bool midlayer : {true, false})
    for (bool i32 : {false, true}) {
      const auto dir = test::temp_dir("eagle3_load");
      RandomEagle3Spec s{.draft_vocab = 40, .midlayer_prefix = midlayer, .d2t_int32 = i32};
      ASSERT_TRUE(write_random_eagle3(dir, s).ok());
      auto d = load_eagle3(dir, t.config, t.weights);
      ASSERT_TRUE(d.ok()) << d.status().message();
      const Eagle3Weights& w = d->weights;
      EXPECT_FALSE(w.own_embed);
      EXPECT_EQ(w.embed.data, t.weights.embed.data);  // the target's, not a copy
      EXPECT_TRUE(w.own_lm_head);
      EXPECT_EQ(w.lm_head.shape_str(), "[40, 64]");
      EXPECT_EQ(w.qkv_w_embed.shape_str(), "[128, 64]");  // q 64 + k 32 + v 32 rows over the first D columns
      EXPECT_EQ(w.gate_up_w.shape_str(), "[192, 64]");
      EXPECT_EQ(d->boundaries, (std::vector<int>{0, 1, 2}));
      // d2t: a sorted subset of the target ids, so the map is strictly increasing and in range.
      const int32_t* map = w.draft_to_target.ptr<const int32_t>();
      for (int i = 1; i < 40; ++i) EXPECT_LT(map[i - 1], map[i]);
      EXPECT_GE(map[0], 0);
      EXPECT_LT(map[39], 301);
      // The q rows over the hidden half are the stored q_proj's columns D..2D-1.
      auto ckpt = Checkpoint::open(dir);
      ASSERT_TRUE(ckpt.ok());
      const auto* q = ckpt->find(std::string(midlayer ? "midlayer." : "layers.0.") + "self_attn.q_proj.weight");
      ASSERT_NE(q, nullptr);
      const Tensor qt = q->file->view(*q->info);
      EXPECT_EQ(w.qkv_w_hidden.ptr<const uint16_t>()[5 * 64 + 7], qt.ptr<const uint16_t>()[5 * 128 + 64 + 7]);
    }
}

TEST(Eagle3Loader, ErrorsNameTheFileAndTensor) {
  const Model& t = target(Device::CPU);
  const auto dir = test::temp_dir("eagle3_bad");
  ASSERT_TRUE(write_random_eagle3(dir, {.draft_vocab = 40}).ok());
  // Rewrite the config with a wider MLP than the tensors have.
  std::ifstream in(dir / "config.json");
  json j = json::parse(in);
  j["intermediate_size"] = 128;
  std::ofstream(dir / "config.json") << j.dump();
  auto d = load_eagle3(dir, t.config, t.weights);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("midlayer.mlp.gate_proj.weight"), std::string::npos) << d.status().message();
  EXPECT_NE(d.status().message().find("model.safetensors"), std::string::npos) << d.status().message();
  // A draft vocabulary smaller than the target's needs its own lm_head and a d2t.
  const auto dir2 = test::temp_dir("eagle3_no_head");
  ASSERT_TRUE(write_random_eagle3(dir2, {.draft_vocab = 40, .own_lm_head = false}).ok());
  auto d2 = load_eagle3(dir2, t.config, t.weights);
  ASSERT_FALSE(d2.ok());
  EXPECT_NE(d2.status().message().find("no lm_head.weight"), std::string::npos) << d2.status().message();
}

// ---- the plain reference of spec §3 ----------------------------------------------------------

std::vector<float> floats(const Tensor& t) {
  std::vector<float> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.dtype == DType::BF16 ? bf16_to_f32(t.ptr<const bf16>()[i]) : t.ptr<const float>()[i];
  return v;
}

// One sequence's draft, straight from the stored tensors, with its own KV list.
class Reference {
 public:
  Reference(const std::filesystem::path& dir, const Eagle3Config& c, const Model& target) : c_(c) {
    auto ck = Checkpoint::open(dir);
    EXPECT_TRUE(ck.ok());
    ckpt_ = std::make_unique<Checkpoint>(std::move(*ck));
    const std::string p = ckpt_->find("midlayer.hidden_norm.weight") ? "midlayer." : "layers.0.";
    auto get = [&](const std::string& n) {
      const auto* e = ckpt_->find(n);
      EXPECT_NE(e, nullptr) << n;
      return e ? floats(e->file->view(*e->info)) : std::vector<float>();
    };
    if (c.use_aux_hidden_state) fc_ = get("fc.weight");
    if (c.norm_before_fc) input_norm_ = get("input_norm.weight");
    hidden_norm_ = get(p + "hidden_norm.weight");
    input_ln_ = get(p + "input_layernorm.weight");
    wq_ = get(p + "self_attn.q_proj.weight");
    wk_ = get(p + "self_attn.k_proj.weight");
    wv_ = get(p + "self_attn.v_proj.weight");
    wo_ = get(p + "self_attn.o_proj.weight");
    if (c.attention_bias) {
      bq_ = get(p + "self_attn.q_proj.bias");
      bk_ = get(p + "self_attn.k_proj.bias");
      bv_ = get(p + "self_attn.v_proj.bias");
      bo_ = get(p + "self_attn.o_proj.bias");
    }
    post_ln_ = get(p + "post_attention_layernorm.weight");
    gate_ = get(p + "mlp.gate_proj.weight");
    up_ = get(p + "mlp.up_proj.weight");
    down_ = get(p + "mlp.down_proj.weight");
    norm_ = get("norm.weight");
    lm_head_ = ckpt_->find("lm_head.weight") ? get("lm_head.weight") : floats(target.weights.lm_head);
    embed_ = ckpt_->find("embed_tokens.weight") ? get("embed_tokens.weight") : floats(target.weights.embed);
  }

  struct Out {
    std::vector<float> logits, hidden;  // (Vd), (D)
  };
  // One row: token x at position p (the next position of this sequence), incoming hidden h [D]
  // or features g [n·D].
  Out step(int32_t x, int p, std::vector<float> h, const std::vector<float>& g) {
    const int D = c_.hidden_size, H = c_.num_attention_heads, Hkv = c_.num_key_value_heads, Dh = c_.head_dim;
    EXPECT_EQ(p, int(keys_.size()));
    if (!g.empty()) h = matvec(fc_, c_.norm_before_fc ? rms(g, input_norm_) : g, D);
    const std::vector<float> e(embed_.begin() + int64_t(x) * D, embed_.begin() + int64_t(x + 1) * D);
    const std::vector<float> a = rms(e, input_ln_), b = rms(h, hidden_norm_);
    std::vector<float> u = a;
    u.insert(u.end(), b.begin(), b.end());
    std::vector<float> q = matvec(wq_, u, H * Dh), k = matvec(wk_, u, Hkv * Dh), v = matvec(wv_, u, Hkv * Dh);
    add(q, bq_), add(k, bk_), add(v, bv_);
    for (int hh = 0; hh < H; ++hh) rope(q.data() + hh * Dh, p);
    for (int hh = 0; hh < Hkv; ++hh) rope(k.data() + hh * Dh, p);
    keys_.push_back(k);
    values_.push_back(v);
    std::vector<float> attn(size_t(H * Dh));
    for (int hh = 0; hh < H; ++hh) {
      const int g2 = hh / (H / Hkv);
      std::vector<double> s(keys_.size());
      double m = -1e300;
      for (size_t j = 0; j < keys_.size(); ++j) {
        double dot = 0;
        for (int d = 0; d < Dh; ++d) dot += double(q[size_t(hh * Dh + d)]) * keys_[j][size_t(g2 * Dh + d)];
        s[j] = dot / std::sqrt(double(Dh));
        m = std::max(m, s[j]);
      }
      double den = 0;
      for (double& x2 : s) den += (x2 = std::exp(x2 - m));
      for (int d = 0; d < Dh; ++d) {
        double o = 0;
        for (size_t j = 0; j < keys_.size(); ++j) o += s[j] * values_[j][size_t(g2 * Dh + d)];
        attn[size_t(hh * Dh + d)] = float(o / den);
      }
    }
    std::vector<float> h1 = matvec(wo_, attn, D);
    add(h1, bo_);
    add(h1, c_.norm_before_residual ? b : h);
    const std::vector<float> m2 = rms(h1, post_ln_);
    const std::vector<float> gt = matvec(gate_, m2, c_.intermediate_size), upv = matvec(up_, m2, c_.intermediate_size);
    std::vector<float> act(gt.size());
    for (size_t i = 0; i < act.size(); ++i) act[i] = gt[i] / (1.0f + std::exp(-gt[i])) * upv[i];
    std::vector<float> h2 = h1;
    add(h2, matvec(down_, act, D));
    const std::vector<float> y = rms(h2, norm_);
    return {matvec(lm_head_, y, c_.draft_vocab_size), c_.norm_output ? y : h2};
  }

 private:
  std::vector<float> rms(const std::vector<float>& x, const std::vector<float>& w) const {
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double r = 1.0 / std::sqrt(ss / double(x.size()) + c_.rms_norm_eps);
    std::vector<float> o(x.size());
    for (size_t i = 0; i < x.size(); ++i) o[i] = float(x[i] * r) * w[i];
    return o;
  }
  static std::vector<float> matvec(const std::vector<float>& w, const std::vector<float>& x, int rows) {
    std::vector<float> o(static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) {
      double s = 0;
      for (size_t i = 0; i < x.size(); ++i) s += double(w[size_t(r) * x.size() + i]) * x[i];
      o[size_t(r)] = float(s);
    }
    return o;
  }
  static void add(std::vector<float>& x, const std::vector<float>& y) {
    for (size_t i = 0; i < y.size(); ++i) x[i] += y[i];
  }
  void rope(float* x, int p) const {  // rotate-half pairs (i, i + Dh/2), inv_freq θ^(-2i/Dh)
    const int half = c_.head_dim / 2;
    for (int i = 0; i < half; ++i) {
      const double f = double(p) / std::pow(c_.rope_theta, 2.0 * i / c_.head_dim);
      const double cs = std::cos(f), sn = std::sin(f), a = x[i], b = x[i + half];
      x[i] = float(a * cs - b * sn);
      x[i + half] = float(b * cs + a * sn);
    }
  }

  Eagle3Config c_;
  std::unique_ptr<Checkpoint> ckpt_;
  std::vector<float> fc_, input_norm_, hidden_norm_, input_ln_, wq_, wk_, wv_, wo_, bq_, bk_, bv_, bo_, post_ln_, gate_,
      up_, down_, norm_, lm_head_, embed_;
  std::vector<std::vector<float>> keys_, values_;
};

// ---- the ops version, two sequences in one paged cache -----------------------------------------

struct Rows {
  std::vector<float> logits, hidden;  // (R, Vd), (R, D) of the logit rows
};

// Runs `steps` draft steps on `device` for two sequences: pass 1 over prompts of P0 and P1 tokens
// with random features (or hidden states), then steps 2.. with one row per sequence, each fed its
// previous row's hidden output and a fixed token. Returns the logit rows of every step.
class OpsRun {
 public:
  OpsRun(const Eagle3Draft& d, Device dev) : d_(d), dev_(dev) {}

  std::vector<Rows> run(int P0, int P1, int steps, uint64_t seed) {
    const Eagle3Config& c = d_.config;
    const int64_t D = c.hidden_size, B = 4, blocks = 16, Hkv = c.num_key_value_heads, Dh = c.head_dim;
    const DType act = ops::act_dtype(dev_);
    auto ws = Eagle3Workspace::create(c, dev_, P0 + P1, 2);
    EXPECT_TRUE(ws.ok());
    auto kb = alloc(act, {blocks, B, Hkv, Dh}), vb = alloc(act, {blocks, B, Hkv, Dh});
    const ops::KvLayer cache{.k = kb, .v = vb};
    // Sequence 0 owns blocks 0..7, sequence 1 blocks 15..8 (not in order).
    std::vector<int32_t> table(2 * 8);
    for (int i = 0; i < 8; ++i) table[size_t(i)] = i, table[size_t(8 + i)] = 15 - i;
    const Tensor tables = upload_i32(table, {2, 8});
    std::vector<Rows> out;
    std::vector<float> hidden_rows;  // (2, D) from the step before
    for (int s = 0; s < steps; ++s) {
      std::vector<int32_t> tokens, pos, seq, rows;
      if (s == 0) {
        for (int i = 0; i < P0; ++i) tokens.push_back(int32_t((7 * i + 3) % c.vocab_size)), pos.push_back(i), seq.push_back(0);
        for (int i = 0; i < P1; ++i) tokens.push_back(int32_t((11 * i + 5) % c.vocab_size)), pos.push_back(i), seq.push_back(1);
        rows = {P0 - 1, P0 + P1 - 1};
      } else {
        tokens = {int32_t((13 * s) % c.vocab_size), int32_t((17 * s + 1) % c.vocab_size)};
        pos = {P0 - 1 + s, P1 - 1 + s};
        seq = {0, 1};
        rows = {0, 1};
      }
      const int64_t T = int64_t(tokens.size());
      Eagle3StepArgs a;
      a.tokens = upload_i32(tokens, {T});
      a.batch = {.positions = upload_i32(pos, {T}), .seq_index = upload_i32(seq, {T}), .block_tables = tables};
      a.cache = cache;
      a.logit_rows = upload_i32(rows, {2});
      a.logits = alloc(DType::F32, {2, c.draft_vocab_size});
      a.hidden_out = alloc(act, {T, D});
      if (s == 0) {
        const int64_t width = c.use_aux_hidden_state ? c.fc_in() : D;
        features_ = test::random_floats(size_t(T * width), seed, -2.0f, 2.0f);
        (c.use_aux_hidden_state ? a.features : a.hidden) = upload_act(features_, {T, width});
      } else {
        a.hidden = upload_act(hidden_rows, {T, D});
      }
      const Status st = eagle3_step(test::ctx(), d_, *ws, a);
      EXPECT_TRUE(st.ok()) << st.message();
      const std::vector<float> h = download(a.hidden_out);
      hidden_rows.clear();
      for (int32_t r : rows) hidden_rows.insert(hidden_rows.end(), h.begin() + r * D, h.begin() + (r + 1) * D);
      out.push_back({download(a.logits), hidden_rows});
    }
    return out;
  }
  const std::vector<float>& features() const { return features_; }

 private:
  Tensor alloc(DType dt, std::initializer_list<int64_t> shape) {
    Tensor probe(nullptr, dt, shape, dev_);
    auto b = ops::Buffer::allocate(dev_, probe.nbytes());
    EXPECT_TRUE(b.ok());
    storage_.push_back(std::move(*b));
    return storage_.back().view(dt, shape);
  }
  Tensor upload_i32(const std::vector<int32_t>& v, std::initializer_list<int64_t> shape) {
    Tensor t = alloc(DType::I32, shape);
    EXPECT_TRUE(ops::copy(t, Tensor(const_cast<int32_t*>(v.data()), DType::I32, shape)).ok());
    return t;
  }
  Tensor upload_act(const std::vector<float>& v, std::initializer_list<int64_t> shape) {
    Tensor t = alloc(ops::act_dtype(dev_), shape);
    if (t.dtype == DType::F32) {
      EXPECT_TRUE(ops::copy(t, Tensor(const_cast<float*>(v.data()), DType::F32, shape)).ok());
    } else {
      std::vector<bf16> b(v.size());
      for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_bf16(v[i]);
      EXPECT_TRUE(ops::copy(t, Tensor(b.data(), DType::BF16, shape)).ok());
    }
    return t;
  }
  std::vector<float> download(const Tensor& t) {
    EXPECT_TRUE(ops::synchronize(test::ctx()).ok());
    std::vector<float> v(size_t(t.numel()));
    std::vector<bf16> b(t.dtype == DType::BF16 ? v.size() : 0);
    Tensor host = t;
    host.device = Device::CPU;
    host.data = t.dtype == DType::BF16 ? static_cast<void*>(b.data()) : static_cast<void*>(v.data());
    EXPECT_TRUE(ops::copy(host, t).ok());
    for (size_t i = 0; i < b.size(); ++i) v[i] = bf16_to_f32(b[i]);
    return v;
  }

  const Eagle3Draft& d_;
  Device dev_;
  std::vector<ops::Buffer> storage_;
  std::vector<float> features_;
};

// The spec's draft options, each with its own random draft (head_dim 64: the CUDA attention's).
std::vector<RandomEagle3Spec> variants() {
  std::vector<RandomEagle3Spec> v = {
      {.draft_vocab = 40},
      {.draft_vocab = 301, .aux_layer_ids = {}, .own_embedding = true, .own_lm_head = false, .norm_before_fc = true},
      {.draft_vocab = 60, .format = Eagle3Format::Speculators, .midlayer_prefix = false, .norm_before_residual = true,
       .attention_bias = true, .rope_theta = 500000.0},
      {.draft_vocab = 50, .use_aux_hidden_state = false, .norm_output = true},
  };
  for (RandomEagle3Spec& s : v) s.head_dim = 64;
  return v;
}

TEST(Eagle3Forward, OpsMatchThePlainReference) {
  const Model& t = target(Device::CPU);
  int v = 0;
  for (const RandomEagle3Spec& spec : variants()) {
    const auto dir = test::temp_dir("eagle3_fwd");
    ASSERT_TRUE(write_random_eagle3(dir, spec).ok());
    auto d = load_eagle3(dir, t.config, t.weights);
    ASSERT_TRUE(d.ok()) << d.status().message();
    const int P0 = 5, P1 = 3, steps = 3;
    OpsRun ops_run(*d, Device::CPU);
    const std::vector<Rows> got = ops_run.run(P0, P1, steps, 700 + v);
    const int64_t D = d->config.hidden_size, W = d->config.use_aux_hidden_state ? d->config.fc_in() : D;
    const std::vector<float>& g = ops_run.features();
    for (int seq = 0; seq < 2; ++seq) {
      Reference ref(dir, d->config, t);
      const int P = seq == 0 ? P0 : P1, base = seq == 0 ? 0 : P0;
      Reference::Out o;
      for (int i = 0; i < P; ++i) {
        const std::vector<float> f(g.begin() + (base + i) * W, g.begin() + (base + i + 1) * W);
        const int32_t x = int32_t(((seq == 0 ? 7 : 11) * i + (seq == 0 ? 3 : 5)) % 301);
        o = d->config.use_aux_hidden_state ? ref.step(x, i, {}, f) : ref.step(x, i, f, {});
      }
      for (int s2 = 0; s2 < steps; ++s2) {
        if (s2 > 0) o = ref.step(int32_t(((seq == 0 ? 13 : 17) * s2 + seq) % 301), P - 1 + s2, o.hidden, {});
        const size_t Vd = size_t(d->config.draft_vocab_size);
        const std::span<const float> gl(got[size_t(s2)].logits.data() + seq * Vd, Vd);
        const std::span<const float> gh(got[size_t(s2)].hidden.data() + seq * D, size_t(D));
        EXPECT_TRUE(test::all_close(gl, o.logits, 2e-5, 2e-4)) << "variant " << v << " seq " << seq << " step " << s2;
        EXPECT_TRUE(test::all_close(gh, o.hidden, 2e-5, 2e-4)) << "variant " << v << " seq " << seq << " step " << s2;
      }
    }
    ++v;
  }
}

// A KV-only step (pass 1 of a step that drafts nothing) writes the KV of a full step, bit for bit,
// and nothing else.
TEST(Eagle3Forward, KvOnlyStepWritesTheSameCache) {
  const Model& t = target(Device::CPU);
  const auto dir = test::temp_dir("eagle3_kv_only");
  ASSERT_TRUE(write_random_eagle3(dir, {.draft_vocab = 40, .norm_before_fc = true}).ok());
  auto d = load_eagle3(dir, t.config, t.weights);
  ASSERT_TRUE(d.ok()) << d.status().message();
  const Eagle3Config& c = d->config;
  const int64_t T = 5, blocks = 4, B = 4, kvw = int64_t(c.num_key_value_heads) * c.head_dim;
  auto ws = Eagle3Workspace::create(c, Device::CPU, int(T), 1);
  ASSERT_TRUE(ws.ok());
  std::vector<int32_t> tokens = {3, 40, 7, 299, 12}, positions = {0, 1, 2, 3, 4}, seq(5, 0), table = {0, 1, 2, 3},
                       row = {4};
  std::vector<float> features = test::random_floats(size_t(T * c.fc_in()), 61, -2.0f, 2.0f);
  std::vector<float> kv[2][2];  // [full | kv only][k | v]
  std::vector<float> logits(size_t(c.draft_vocab_size)), hidden(size_t(T * c.hidden_size), 7.0f);
  for (int run = 0; run < 2; ++run) {
    for (auto& x : kv[run]) x.assign(size_t(blocks * B * kvw), 0.0f);
    Eagle3StepArgs a{.tokens = Tensor(tokens.data(), DType::I32, {T}),
                     .features = Tensor(features.data(), DType::F32, {T, c.fc_in()}),
                     .batch = {.positions = Tensor(positions.data(), DType::I32, {T}),
                               .seq_index = Tensor(seq.data(), DType::I32, {T}),
                               .block_tables = Tensor(table.data(), DType::I32, {1, blocks})},
                     .cache = {.k = Tensor(kv[run][0].data(), DType::F32, {blocks, B, c.num_key_value_heads, c.head_dim}),
                               .v = Tensor(kv[run][1].data(), DType::F32, {blocks, B, c.num_key_value_heads, c.head_dim})},
                     .kv_only = run == 1};
    if (run == 0) {
      a.logit_rows = Tensor(row.data(), DType::I32, {1});
      a.logits = Tensor(logits.data(), DType::F32, {1, c.draft_vocab_size});
      a.hidden_out = Tensor(hidden.data(), DType::F32, {T, c.hidden_size});
    } else {
      a.logit_rows = Tensor(row.data(), DType::I32, {0});
    }
    const Status st = eagle3_step(test::ctx(), *d, *ws, a);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  EXPECT_EQ(kv[1][0], kv[0][0]);
  EXPECT_EQ(kv[1][1], kv[0][1]);
  EXPECT_NE(kv[1][0], std::vector<float>(kv[1][0].size(), 0.0f)) << "the KV was written";
}

// The drafting loop (runtime/eagle3_drafter.h) against the spec's pairing, on the CPU: the target's
// forward over a prompt keeps the draft's features; the drafter's pass 1 (token of p + 1 at row p)
// and steps 2..3 must give the drafts that the plain reference gives when fed the same features
// and tokens, mapped to target ids through d2t.
TEST(Eagle3Drafter, DraftsFollowTheSpecsPairing) {
  const Model& t = target(Device::CPU);
  const auto dir = test::temp_dir("eagle3_drafter");
  ASSERT_TRUE(write_random_eagle3(dir, {.draft_vocab = 40, .aux_layer_ids = {0, 2, 3}, .seed = 31}).ok());
  auto d = load_eagle3(dir, t.config, t.weights);
  ASSERT_TRUE(d.ok()) << d.status().message();
  const int P = 7, B = 4, W = 8, k = 3;
  const std::vector<int32_t> prompt = {11, 200, 37, 5, 290, 64, 123};
  const int32_t sampled = 77;  // the target's sample after the prompt
  // The target's forward over the prompt, keeping the residual stream at boundaries 0, 2 and 3.
  auto kv = KvCache::create(t.config, Device::CPU, W + 1, B);
  ASSERT_TRUE(kv.ok());
  auto ws = Workspace::create(t.config, Device::CPU, P, 1);
  ASSERT_TRUE(ws.ok());
  std::vector<int32_t> positions(P), seq(P, 0), table(W), rows = {P - 1};
  for (int i = 0; i < P; ++i) positions[size_t(i)] = i;
  for (int i = 0; i < W; ++i) table[size_t(i)] = i + 1;
  std::vector<float> aux(size_t(P) * 3 * 64), logits(301);
  ForwardArgs fa{.tokens = Tensor(const_cast<int32_t*>(prompt.data()), DType::I32, {P}),
                 .batch = {.positions = Tensor(positions.data(), DType::I32, {P}),
                           .seq_index = Tensor(seq.data(), DType::I32, {P}),
                           .block_tables = Tensor(table.data(), DType::I32, {1, W})},
                 .cache = kv->layers(),
                 .logit_rows = Tensor(rows.data(), DType::I32, {1}),
                 .logits = Tensor(logits.data(), DType::F32, {1, 301}),
                 .aux_boundaries = d->boundaries,
                 .aux = Tensor(aux.data(), DType::F32, {P, 3 * 64})};
  ASSERT_TRUE(forward(test::ctx(), t, *ws, fa).ok());
  // The drafter: pass 1 over positions 0..P-1 with tokens prompt[1..] + the sample, then 2 steps.
  auto drafter = Eagle3Drafter::create(test::ctx(), *d, Device::CPU, {.seats = 2, .max_tokens = P, .max_blocks = W,
                                                         .num_blocks = W + 1, .block_size = B, .k = k});
  ASSERT_TRUE(drafter.ok()) << drafter.status().message();
  Eagle3Drafter::Pass pass{.seat = 1, .table = &table, .first_row = 0, .start = 0, .drafts = k};
  for (int i = 1; i < P; ++i) pass.tokens.push_back(prompt[size_t(i)]);
  pass.tokens.push_back(sampled);
  ASSERT_TRUE((*drafter)->run(Tensor(aux.data(), DType::F32, {P, 3 * 64}), std::span(&pass, 1)).ok());
  const std::span<const int32_t> got = (*drafter)->drafts(1);
  // The reference, row by row.
  Reference ref(dir, d->config, t);
  Reference::Out o;
  for (int p = 0; p < P; ++p)
    o = ref.step(pass.tokens[size_t(p)], p, {}, std::vector<float>(aux.begin() + p * 192, aux.begin() + (p + 1) * 192));
  std::vector<int32_t> want;
  const std::vector<int32_t>& d2t = d->weights.draft_to_target_host;
  for (int j = 0; j < k; ++j) {
    if (j > 0) o = ref.step(want.back(), P - 1 + j, o.hidden, {});
    const auto best = std::max_element(o.logits.begin(), o.logits.end()) - o.logits.begin();
    want.push_back(d2t[size_t(best)]);
  }
  EXPECT_EQ(std::vector<int32_t>(got.begin(), got.end()), want);
  // A second call for the same seat after the round (a new token at position P): only pass 1
  // writes KV, one draft asked; the table entries are already in place.
  Eagle3Drafter::Pass next{.seat = 1, .table = &table, .first_row = P - 1, .start = P - 1, .tokens = {sampled}, .drafts = 1};
  ASSERT_TRUE((*drafter)->run(Tensor(aux.data(), DType::F32, {P, 3 * 64}), std::span(&next, 1)).ok());
  EXPECT_EQ((*drafter)->drafts(1).size(), 1u);
  EXPECT_TRUE((*drafter)->drafts(0).empty());
}

TEST(CudaEagle3, DraftStepMatchesTheCpu) {
  if (!ops::cuda_available()) GTEST_SKIP() << "needs a GPU";
  int v = 0;
  for (const RandomEagle3Spec& spec : variants()) {
    const auto dir = test::temp_dir("eagle3_cuda");
    ASSERT_TRUE(write_random_eagle3(dir, spec).ok());
    auto cpu = load_eagle3(dir, target(Device::CPU).config, target(Device::CPU).weights);
    auto gpu = load_eagle3(dir, target(Device::CUDA).config, target(Device::CUDA).weights);
    ASSERT_TRUE(cpu.ok() && gpu.ok()) << (cpu.ok() ? gpu.status().message() : cpu.status().message());
    // T = 8 and 2: the cuBLASLt and the GEMV paths of the linears.
    const std::vector<Rows> ref = OpsRun(*cpu, Device::CPU).run(5, 3, 3, 900 + v);
    const std::vector<Rows> got = OpsRun(*gpu, Device::CUDA).run(5, 3, 3, 900 + v);
    for (size_t s = 0; s < ref.size(); ++s) {
      const double e = test::nmse(got[s].logits, ref[s].logits), h = test::nmse(got[s].hidden, ref[s].hidden);
      std::printf("variant %d step %zu: logits NMSE %.3g, hidden NMSE %.3g\n", v, s, e, h);
      EXPECT_LE(e, 1e-4) << "variant " << v << " step " << s;
      EXPECT_LE(h, 1e-4) << "variant " << v << " step " << s;
    }
    ++v;
  }
}

}  // namespace
}  // namespace mx
