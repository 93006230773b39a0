// Synthetic model construction: config of the named size, every tensor of the spec's table
// allocated on the device and filled by ops::fill_random (dense BF16 ~U(±1/sqrt(fan_in)), norm
// gains 1±0.1, sinks ±1, MXFP4 nibbles uniform with E8M0 scale bytes 120..124 = 2^-7..2^-3).
#include "model/synthetic.h"

#include <cmath>

#include "core/log.h"
#include "model/random_model.h"
#include "model/tensor_parallel.h"

namespace mx {

bool is_synthetic_name(const std::string& arg) { return arg.starts_with("synthetic:"); }

Result<ModelConfig> synthetic_config(const std::string& arg) {
  const std::string size = arg.substr(std::string("synthetic:").size());
  RandomModelSpec s;
  if (size == "20b" || size == "120b") {
    s.layers = size == "20b" ? 24 : 36;
    s.experts = size == "20b" ? 32 : 128;
    s.hidden = 2880;
    s.intermediate = 2880;
    s.heads = 64;
    s.kv_heads = 8;
    s.head_dim = 64;
    s.vocab = 201088;
  } else if (size == "tiny") {
    s.vocab = 1024;
  } else {
    return MX_ERROR("unknown synthetic model '{}' (use synthetic:20b, synthetic:120b or synthetic:tiny)", arg);
  }
  return ModelConfig::from_json(nlohmann::json::parse(random_model_config(s).dump()));
}

namespace {

// Fills each tensor of the whole model in order (one seed each); with tensor parallelism it keeps
// the rank's part of it, so that every rank's shard holds the values of the one-GPU model.
struct Filler {
  ops::Context& cx;  // the fills queue on its stream
  Device device;
  uint64_t seed;
  ModelWeights& w;
  Progress* progress;
  TpShard shard;

  Result<Tensor> make(DType dt, std::initializer_list<int64_t> shape, float scale, float offset, int lo = 0,
                      int hi = 255, TpWeight kind = TpWeight::Replicated) {
    Tensor probe(nullptr, dt, shape, device);
    MX_ASSIGN(ops::Buffer b, ops::Buffer::allocate(device, probe.nbytes()));
    Tensor t = b.view(dt, shape);
    MX_TRY(ops::fill_random(cx, {.out = t, .seed = seed++, .scale = scale, .offset = offset, .byte_lo = lo, .byte_hi = hi}));
    if (progress) progress->advance(t.nbytes());
    if (shard.plan) {
      MX_ASSIGN(t, tp_slice(t, kind, *shard.plan, shard.rank, device, w.storage));  // b, the whole tensor, is freed
    } else {
      w.storage.push_back(std::move(b));
    }
    w.bytes += t.nbytes();
    return t;
  }
  Result<Tensor> dense(std::initializer_list<int64_t> shape, TpWeight kind = TpWeight::Replicated) {
    return make(DType::BF16, shape, 1.0f / std::sqrt(float(*(shape.end() - 1))), 0.0f, 0, 255, kind);
  }
  Result<Tensor> bias(std::initializer_list<int64_t> shape, TpWeight kind) {
    return make(DType::BF16, shape, 0.02f, 0.0f, 0, 255, kind);
  }
  Result<Tensor> gain(int64_t n) { return make(DType::BF16, {n}, 0.1f, 1.0f); }
  Result<Tensor> nibbles(std::initializer_list<int64_t> shape, TpWeight kind) {
    return make(DType::U8, shape, 0, 0, 0, 255, kind);
  }
  Result<Tensor> scales(std::initializer_list<int64_t> shape, TpWeight kind) {
    return make(DType::U8, shape, 0, 0, 120, 124, kind);
  }
};

uint64_t expected_bytes(const ModelConfig& c) {
  uint64_t n = 0;
  for (const auto& e : expected_tensors(c)) {
    uint64_t k = dtype_size(e.dtype);
    for (auto d : e.shape) k *= uint64_t(d);
    n += k;
  }
  return n;
}

}  // namespace

Result<std::unique_ptr<Model>> make_synthetic_model(const std::string& arg, Device device, uint64_t seed,
                                                    TpShard shard) {
  auto m = std::make_unique<Model>();
  MX_ASSIGN(m->config, synthetic_config(arg));
  m->path = arg;
  const ModelConfig& c = m->config;
  ModelWeights& w = m->weights;
  w.device = device;
  const int64_t D = c.hidden_size, F = c.intermediate_size, E = c.num_local_experts, V = c.vocab_size;
  Progress progress("Making " + arg, expected_bytes(c));
  MX_ASSIGN(auto cx, ops::Context::create(device));
  Filler f{*cx, device, seed, w, &progress, shard};
  MX_ASSIGN(w.embed, f.make(DType::BF16, {V, D}, 1.0f, 0.0f));
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    LayerWeights L;
    MX_ASSIGN(L.attn_norm, f.gain(D));
    MX_ASSIGN(L.qkv_w, f.dense({c.qkv_width(), D}, TpWeight::QkvRows));
    MX_ASSIGN(L.qkv_b, f.bias({c.qkv_width()}, TpWeight::QkvRows));
    MX_ASSIGN(L.o_w, f.dense({D, c.q_width()}, TpWeight::OColumns));
    MX_ASSIGN(L.o_b, f.bias({D}, TpWeight::RankZeroOnly));
    MX_ASSIGN(L.sinks, f.make(DType::BF16, {c.num_attention_heads}, 1.0f, 0.0f, 0, 255, TpWeight::Sinks));
    MX_ASSIGN(L.mlp_norm, f.gain(D));
    MX_ASSIGN(L.router_w, f.dense({E, D}));
    MX_ASSIGN(L.router_b, f.bias({E}, TpWeight::Replicated));
    MX_ASSIGN(L.experts.gate_up_blocks, f.nibbles({E, 2 * F, D / 32, 16}, TpWeight::GateUpRows));
    MX_ASSIGN(L.experts.gate_up_scales, f.scales({E, 2 * F, D / 32}, TpWeight::GateUpRows));
    MX_ASSIGN(L.experts.gate_up_bias, f.bias({E, 2 * F}, TpWeight::GateUpRows));
    MX_ASSIGN(L.experts.down_blocks, f.nibbles({E, D, F / 32, 16}, TpWeight::DownBlocks));
    MX_ASSIGN(L.experts.down_scales, f.scales({E, D, F / 32}, TpWeight::DownBlocks));
    MX_ASSIGN(L.experts.down_bias, f.bias({E, D}, TpWeight::RankZeroOnly));
    w.layers.push_back(L);
  }
  MX_ASSIGN(w.final_norm, f.gain(D));
  MX_ASSIGN(w.lm_head, f.dense({V, D}, TpWeight::VocabRows));
  MX_TRY(ops::synchronize(*cx));
  progress.finish();
  MX_TRY(place_rope_table(c, w));
  log_info("made {}{} on {}: {:.2f} GB of random weights", arg,
           shard.plan ? fmt::format(" (rank {})", shard.rank) : std::string(), device == Device::CPU ? "cpu" : "cuda",
           double(w.bytes) / 1e9);
  return m;
}

}  // namespace mx
