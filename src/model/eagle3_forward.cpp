// The EAGLE-3 draft step over the ops (spec §3, in its order):
//   h = fc(RMS?(features)) | hidden;  e = Embed[x]
//   qkv = RMS(e; input_layernorm)·W_eᵀ + RMS(h; hidden_norm)·W_hᵀ (the [a; b]·Wᵀ of the spec, split by
//         columns so that the 2D input is never built), RoPE, KV write, causal attention
//   h1 = attn·W_oᵀ + r (r = h, or RMS(h) with norm_before_residual)
//   h2 = h1 + W_down(silu(W_gate m) ⊙ W_up m), m = RMS(h1; post_attention_layernorm)
//   logits = RMS(h2; norm)·lm_headᵀ at the logit rows; hidden out h2 (or RMS(h2; norm)).
#include "model/eagle3_forward.h"

#include <cmath>

#include "kernels/owned_tensor.h"

namespace mx {

Result<Eagle3Workspace> Eagle3Workspace::create(const Eagle3Config& c, Device device, int max_tokens, int max_rows) {
  Eagle3Workspace ws;
  ws.max_tokens_ = max_tokens;
  ws.max_rows_ = max_rows;
  const DType act = ops::act_dtype(device);
  const int64_t T = max_tokens, D = c.hidden_size;
  auto make = [&](Tensor& t, std::initializer_list<int64_t> shape) -> Status {
    MX_ASSIGN(t, ops::allocate_tensor(ws.storage_, device, act, shape));
    return ok_status();
  };
  MX_TRY(make(ws.h, {T, D}));
  MX_TRY(make(ws.b, {T, D}));
  MX_TRY(make(ws.embed, {T, D}));
  MX_TRY(make(ws.qkv, {T, c.qkv_width()}));
  MX_TRY(make(ws.attn, {T, c.q_width()}));
  MX_TRY(make(ws.gate_up, {T, 2 * int64_t(c.intermediate_size)}));
  MX_TRY(make(ws.act, {T, c.intermediate_size}));
  MX_TRY(make(ws.rows_x, {int64_t(max_rows), D}));
  MX_TRY(make(ws.y, {T, D}));
  return ws;
}

Status eagle3_step(ops::Context& cx, const Eagle3Draft& d, Eagle3Workspace& ws, const Eagle3StepArgs& a) {
  const Eagle3Config& c = d.config;
  const Eagle3Weights& w = d.weights;
  const int64_t T = a.tokens.dim(0), R = a.logit_rows.dim(0), D = c.hidden_size;
  MX_CHECK(T > 0 && T <= ws.max_tokens(), "eagle3_step: {} tokens, workspace holds {}", T, ws.max_tokens());
  MX_CHECK(R <= ws.max_rows(), "eagle3_step: {} logit rows, workspace holds {}", R, ws.max_rows());
  MX_CHECK(!a.kv_only || R == 0, "eagle3_step: a KV-only step has no logit rows ({} asked)", R);
  MX_CHECK(a.kv_only || (a.hidden_out.ndim == 2 && a.hidden_out.dim(0) == T && a.hidden_out.dim(1) == D),
           "eagle3_step: hidden_out {} for {} tokens of width {}", a.hidden_out.shape_str(), T, D);
  MX_CHECK(R == 0 || (a.logits.ndim == 2 && a.logits.dim(0) == R && a.logits.dim(1) == c.draft_vocab_size),
           "eagle3_step: logits {} for {} rows of the draft vocabulary {}", a.logits.shape_str(), R,
           c.draft_vocab_size);
  const float eps = float(c.rms_norm_eps);
  auto first = [T](const Tensor& t) { return t.rows(0, T); };

  // The incoming hidden state: the target's features through fc (pass 1), or given.
  Tensor h = a.hidden;
  if (!a.features.empty()) {
    MX_CHECK(c.use_aux_hidden_state, "eagle3_step: this draft takes the target's final hidden state, not aux features");
    h = first(ws.h);
    MX_TRY(ops::linear(cx, {.x = a.features, .w = w.fc, .out = h, .norm = {.weight = w.input_norm, .eps = eps}}));
  }
  MX_CHECK(h.ndim == 2 && h.dim(0) == T && h.dim(1) == D, "eagle3_step: hidden {} for {} tokens of width {}",
           h.shape_str(), T, D);

  // Attention over [RMS(e); RMS(h)].
  const Tensor e = first(ws.embed), qkv = first(ws.qkv), attn = first(ws.attn);
  MX_TRY(ops::embed(cx, {.ids = a.tokens, .table = w.embed, .out = e}));
  MX_TRY(ops::linear(cx, {.x = e, .w = w.qkv_w_embed, .bias = w.qkv_b, .out = qkv,
                      .norm = {.weight = w.input_layernorm, .eps = eps}}));
  MX_TRY(ops::linear(cx, {.x = h, .w = w.qkv_w_hidden, .out = qkv, .accumulate = ops::Accumulate::IntoOut,
                      .norm = {.weight = w.hidden_norm, .eps = eps}}));
  MX_TRY(ops::qkv_rope_cache(cx, {.qkv = qkv,
                              .n_heads = c.num_attention_heads,
                              .n_kv_heads = c.num_key_value_heads,
                              .head_dim = c.head_dim,
                              .rope = {.inv_freq = w.inv_freq, .concentration = w.rope_concentration},
                              .batch = a.batch,
                              .cache = a.cache}));
  if (a.kv_only) return ok_status();
  MX_TRY(ops::attention(cx, {.qkv = qkv,
                         .sinks = w.sinks,
                         .n_heads = c.num_attention_heads,
                         .n_kv_heads = c.num_key_value_heads,
                         .head_dim = c.head_dim,
                         .window = 0,
                         .scale = 1.0f / std::sqrt(float(c.head_dim)),
                         .batch = a.batch,
                         .cache = a.cache,
                         .out = attn}));

  // h1 = attn·W_oᵀ + r, built in h2's buffer (hidden_out, or y when the output is normed).
  const Tensor h2 = c.norm_output ? first(ws.y) : a.hidden_out;
  Tensor r = h;
  if (c.norm_before_residual) {
    r = first(ws.b);
    MX_TRY(ops::rmsnorm(cx, {.x = h, .weight = w.hidden_norm, .eps = eps, .out = r}));
  }
  if (r.data != h2.data) MX_TRY(ops::copy_async(cx, h2, r));
  MX_TRY(ops::linear(cx, {.x = attn, .w = w.o_w, .bias = w.o_b, .out = h2, .accumulate = ops::Accumulate::IntoOut}));
  // The gated MLP.
  const Tensor gate_up = first(ws.gate_up), act = first(ws.act);
  MX_TRY(ops::linear(cx, {.x = h2, .w = w.gate_up_w, .out = gate_up,
                      .norm = {.weight = w.post_attention_layernorm, .eps = eps}}));
  MX_TRY(ops::silu_mul(cx, {.gate_up = gate_up, .out = act}));
  MX_TRY(ops::linear(cx, {.x = act, .w = w.down_w, .out = h2, .accumulate = ops::Accumulate::IntoOut}));

  if (R > 0) {
    const Tensor rows_x = ws.rows_x.rows(0, R);
    MX_TRY(ops::gather_rows(cx, {.x = h2, .rows = a.logit_rows, .out = rows_x}));
    MX_TRY(ops::linear(cx, {.x = rows_x, .w = w.lm_head, .out = a.logits, .norm = {.weight = w.norm, .eps = eps}}));
  }
  if (c.norm_output) MX_TRY(ops::rmsnorm(cx, {.x = h2, .weight = w.norm, .eps = eps, .out = a.hidden_out}));
  return ok_status();
}

}  // namespace mx
