// --mxfp4-layers: parsing the list and quantizing the chosen dense weights of a loaded model.
#include "model/mxfp4_layers.h"

#include <atomic>
#include <climits>
#include <cstring>
#include <memory>
#include <vector>

#include "core/log.h"
#include "core/parallel.h"

namespace mx {

std::string Mxfp4Layers::describe() const {
  std::string s = "moe";
  for (const auto& [on, name] : {std::pair{qkv, "qkv"}, {o, "o"}, {router, "router"}, {lm_head, "lm_head"},
                                 {embed, "embed"}})
    if (on) s += std::string(",") + name;
  return s;
}

Result<Mxfp4Layers> parse_mxfp4_layers(std::string_view list) {
  Mxfp4Layers m;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = list.find(',', start);
    std::string_view name = list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (name == "all") m = {.qkv = true, .o = true, .router = true, .lm_head = true, .embed = true};
    else if (name == "qkv") m.qkv = true;
    else if (name == "o") m.o = true;
    else if (name == "router") m.router = true;
    else if (name == "lm_head") m.lm_head = true;
    else if (name == "embed") m.embed = true;
    else if (name.empty())
      return MX_ERROR("--mxfp4-layers: an empty name in '{}' (use a comma-separated list of moe, qkv, o, router, "
                      "lm_head, embed, or all)", list);
    else if (name != "moe")
      return MX_ERROR("--mxfp4-layers: unknown layer '{}' (use a comma-separated list of moe, qkv, o, router, "
                      "lm_head, embed, or all)", name);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return m;
}

namespace {

// Replaces one BF16 weight (N, K) by its MXFP4 blocks (N, K/2) and scales (N, K/32) on the same
// device; the BF16 buffer (if the weights own it) is freed.
class Quantizer {
 public:
  explicit Quantizer(ModelWeights& w) : w_(w) {}

  Status run(const std::string& name, Tensor& t, Tensor& scales) {
    const int64_t N = t.dim(0), K = t.dim(1), G = K / 32;
    MX_CHECK(t.dtype == DType::BF16 && t.ndim == 2, "--mxfp4-layers: '{}' is not a 2-D bf16 weight", name);
    std::vector<uint8_t> staged;  // the BF16 values on the host
    const uint16_t* src = t.ptr<const uint16_t>();
    if (t.device != Device::CPU) {
      staged.resize(t.nbytes());
      MX_TRY(ops::copy(Tensor(staged.data(), t.dtype, {N, K}), t));
      src = reinterpret_cast<const uint16_t*>(staged.data());
    }
    std::vector<uint8_t> blocks(size_t(N * K / 2)), sc(size_t(N * G));
    std::atomic<int64_t> bad_row{INT64_MAX};  // the first row with a NaN or Inf
    parallel_for(N, 64, [&](int64_t n0, int64_t n1) {
      float in[32];
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t g = 0; g < G; ++g) {
          for (int i = 0; i < 32; ++i) in[i] = bf16_to_f32(bf16{src[n * K + g * 32 + i]});
          if (!quantize_mxfp4_block(in, &blocks[size_t((n * G + g) * 16)], &sc[size_t(n * G + g)])) {
            int64_t seen = bad_row.load();
            while (n < seen && !bad_row.compare_exchange_weak(seen, n)) {
            }
          }
        }
    });
    MX_CHECK(bad_row == INT64_MAX, "--mxfp4-layers: cannot quantize '{}': row {} holds a NaN or infinite value", name,
             bad_row.load());
    const uint64_t old_bytes = t.nbytes();
    release(t.data);
    MX_ASSIGN(t, place(blocks, DType::U8, {N, K / 2}));
    MX_ASSIGN(scales, place(sc, DType::U8, {N, G}));
    w_.bytes = w_.bytes - old_bytes + t.nbytes() + scales.nbytes();
    return ok_status();
  }

 private:
  Result<Tensor> place(const std::vector<uint8_t>& host, DType dt, std::initializer_list<int64_t> shape) {
    MX_ASSIGN(ops::Buffer b, ops::Buffer::allocate(w_.device, host.size()));
    Tensor t = b.view(dt, shape);
    MX_TRY(ops::copy(t, Tensor(const_cast<uint8_t*>(host.data()), dt, shape)));
    w_.storage.push_back(std::move(b));
    return t;
  }
  // Frees the buffer that holds `data`, if the weights own one (CPU views into the checkpoint's
  // mapped files have none).
  void release(const void* data) {
    for (auto& b : w_.storage)
      if (b.data() == data) b = ops::Buffer();
  }
  ModelWeights& w_;
};

// Weight bytes a batch-1 decode step reads (one expert set of K per layer, one embedding row).
double step_weight_bytes(const ModelWeights& w, const ModelConfig& c) {
  double b = 0;
  auto add = [&](const Tensor& t) { b += t.empty() ? 0.0 : double(t.nbytes()); };
  for (const LayerWeights& L : w.layers) {
    for (const Tensor* t : {&L.attn_norm, &L.qkv_w, &L.qkv_w_scales, &L.qkv_b, &L.o_w, &L.o_w_scales, &L.o_b,
                            &L.sinks, &L.mlp_norm, &L.router_w, &L.router_w_scales, &L.router_b})
      add(*t);
    const ops::MoeWeights& x = L.experts;
    double experts = 0;
    for (const Tensor* t : {&x.gate_up_blocks, &x.gate_up_scales, &x.gate_up_bias, &x.down_blocks, &x.down_scales,
                            &x.down_bias})
      experts += t->empty() ? 0.0 : double(t->nbytes());
    b += experts * c.num_experts_per_tok / c.num_local_experts;
  }
  add(w.final_norm);
  add(w.lm_head);
  add(w.lm_head_scales);
  b += double(w.embed.nbytes() + (w.embed_scales.empty() ? 0 : w.embed_scales.nbytes())) / double(c.vocab_size);
  return b;
}

}  // namespace

Result<Mxfp4Layers> quantize_dense_layers(ModelWeights& w, const ModelConfig& c, const Mxfp4Layers& want,
                                          ShowProgress show) {
  Mxfp4Layers done;
  if (!want.any()) return done;
  const double before = step_weight_bytes(w, c);
  Mxfp4Layers todo = want;
  if ((todo.lm_head || todo.embed) && w.lm_head.data == w.embed.data) {
    log_warn("--mxfp4-layers: lm_head is tied to the embedding (one tensor); both stay BF16 (quantizing one would "
             "change the other)");
    todo.lm_head = todo.embed = false;
  }
  auto fits = [&](const char* what, int64_t K) {
    if (K % 32 == 0) return true;
    log_warn("--mxfp4-layers: {} has {} input features, not a multiple of 32; it stays BF16", what, K);
    return false;
  };
  todo.qkv = todo.qkv && fits("qkv", c.hidden_size);
  todo.o = todo.o && fits("o", c.q_width());
  todo.router = todo.router && fits("router", c.hidden_size);
  todo.lm_head = todo.lm_head && fits("lm_head", c.hidden_size);
  todo.embed = todo.embed && fits("embed", c.hidden_size);
  Quantizer q(w);
  std::unique_ptr<Progress> progress;
  if (show == ShowProgress::Yes) progress = std::make_unique<Progress>("Quantizing to MXFP4", uint64_t(c.num_hidden_layers) + 2);
  auto advance = [&] {
    if (progress) progress->advance(1);
  };
  if (todo.embed) MX_TRY(q.run("model.embed_tokens.weight", w.embed, w.embed_scales));
  advance();
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    LayerWeights& L = w.layers[size_t(l)];
    const std::string p = fmt::format("model.layers.{}.", l);
    if (todo.qkv) MX_TRY(q.run(p + "self_attn.{q,k,v}_proj.weight", L.qkv_w, L.qkv_w_scales));
    if (todo.o) MX_TRY(q.run(p + "self_attn.o_proj.weight", L.o_w, L.o_w_scales));
    if (todo.router) MX_TRY(q.run(p + "mlp.router.weight", L.router_w, L.router_w_scales));
    advance();
  }
  if (todo.lm_head) MX_TRY(q.run("lm_head.weight", w.lm_head, w.lm_head_scales));
  if (progress) progress->finish();
  done = todo;
  const double after = step_weight_bytes(w, c);
  log_info("--mxfp4-layers {}: weights {:.2f} GB; a batch-1 decode step reads {:.2f} GB of weights (BF16 dense "
           "layers: {:.2f} GB)",
           done.describe(), double(w.bytes) / 1e9, after / 1e9, before / 1e9);
  return done;
}

}  // namespace mx
