// gpt-oss forward (GPTOSS_SPEC §4.1): embed -> per layer [RMSNorm -> qkv -> RoPE + cache write ->
// attention with sinks (window on sliding layers) -> o_proj + residual -> RMSNorm -> router top-k
// -> MXFP4 experts + residual] -> final RMSNorm -> lm_head. The attention norm + qkv + RoPE + cache
// write is one op (qkv_projection) and the MoE norm + router + top-k another (moe_router): decode
// runs each as one kernel; where the experts' decode kernels select from the router logits
// themselves (ops::moe_selects_from_logits), the router stops at the logits. With tensor parallelism (a.tp) each rank runs this
// over its shard: the o projection and the experts write partial sums that an all-reduce adds to
// the residual stream on every rank, and lm_head's vocabulary slices are gathered on rank 0.
#include "model/forward.h"

#include <algorithm>
#include <cmath>

#include "kernels/owned_tensor.h"

namespace mx {
namespace {

// First `rows` rows of a workspace buffer.
Tensor first(const Tensor& t, int64_t rows) { return t.rows(0, rows); }

}  // namespace

Result<Workspace> Workspace::create(const ModelConfig& c, Device device, int max_tokens, int max_logit_rows) {
  Workspace ws;
  ws.max_tokens_ = max_tokens;
  ws.max_rows_ = max_logit_rows;
  const DType act = ops::act_dtype(device);
  const int64_t T = max_tokens;
  auto make = [&](Tensor& t, DType dt, std::initializer_list<int64_t> shape) -> Status {
    MX_ASSIGN(t, ops::allocate_tensor(ws.storage_, device, dt, shape));
    return ok_status();
  };
  MX_TRY(make(ws.x, act, {T, c.hidden_size}));
  MX_TRY(make(ws.xn, act, {T, c.hidden_size}));
  MX_TRY(make(ws.qkv, act, {T, c.qkv_width()}));
  MX_TRY(make(ws.attn, act, {T, c.q_width()}));
  MX_TRY(make(ws.router, DType::F32, {T, c.num_local_experts}));
  MX_TRY(make(ws.top_ids, DType::I32, {T, c.num_experts_per_tok}));
  MX_TRY(make(ws.top_w, DType::F32, {T, c.num_experts_per_tok}));
  MX_TRY(make(ws.rows_x, act, {int64_t(max_logit_rows), c.hidden_size}));
  return ws;
}

ops::CallShapes forward_call_shapes(const ModelConfig& c, int64_t max_tokens, int64_t max_rows, int64_t max_keys,
                                    bool fp8_kv) {
  return {.max_tokens = max_tokens,
          .max_rows = max_rows,
          .max_in_features = std::max<int64_t>(c.hidden_size, c.q_width()),
          .max_keys = max_keys,
          .hidden = c.hidden_size,
          .heads = c.num_attention_heads,
          .kv_heads = c.num_key_value_heads,
          .experts = c.num_local_experts,
          .top_k = c.num_experts_per_tok,
          .expert_width = c.intermediate_size,
          .fp8_kv = fp8_kv};
}

Status forward(ops::Context& cx, const Model& m, Workspace& ws, const ForwardArgs& a) {
  const ModelConfig& c = m.rank_config();
  const ModelWeights& w = m.weights;
  const int64_t T = a.tokens.dim(0), R = a.logit_rows.dim(0);
  ops::Collective* tp = a.tp;
  MX_CHECK((tp != nullptr) == (m.tp_size() > 1), "forward: a model split over {} ranks needs {} collective",
           m.tp_size(), m.tp_size() > 1 ? "a" : "no");
  MX_CHECK(T > 0 && T <= ws.max_tokens(), "forward: {} tokens, workspace holds {}", T, ws.max_tokens());
  MX_CHECK(R <= ws.max_logit_rows(), "forward: {} logit rows, workspace holds {}", R, ws.max_logit_rows());
  MX_CHECK(!a.all_rows || R == T, "forward: all_rows with {} logit rows for {} tokens", R, T);
  MX_CHECK(int(a.cache.size()) == c.num_hidden_layers, "forward: {} cache layers for {} layers", a.cache.size(),
           c.num_hidden_layers);
  const Tensor x = first(ws.x, T), xn = first(ws.xn, T), qkv = first(ws.qkv, T), attn = first(ws.attn, T);
  const Tensor router = first(ws.router, T), top_ids = first(ws.top_ids, T), top_w = first(ws.top_w, T);
  const ops::RopeTable rope{.inv_freq = w.inv_freq, .concentration = w.rope_concentration};

  MX_TRY(ops::embed(cx, {.ids = a.tokens, .table = w.embed, .out = x, .table_scales = w.embed_scales}));
  // The draft's features: x at boundary j (after j layers) into the j-th aux column block.
  size_t next_aux = 0;
  auto capture = [&](int boundary) -> Status {
    if (next_aux < a.aux_boundaries.size() && a.aux_boundaries[next_aux] == boundary)
      return ops::copy_columns_async(cx, a.aux.rows(0, T), int64_t(next_aux++) * c.hidden_size, x);
    return ok_status();
  };
  MX_CHECK(a.aux_boundaries.empty() || (a.aux.ndim == 2 && a.aux.dim(0) >= T &&
                                        a.aux.dim(1) == int64_t(a.aux_boundaries.size()) * c.hidden_size),
           "forward: aux {} for {} tokens and {} boundaries", a.aux.shape_str(), T, a.aux_boundaries.size());
  MX_TRY(capture(0));
  ops::TokenBatch sliding_batch = a.batch;
  if (!a.sliding_block_tables.empty()) sliding_batch.block_tables = a.sliding_block_tables;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& L = w.layers[size_t(l)];
    const ops::TokenBatch& batch = c.window_of_layer(l) > 0 ? sliding_batch : a.batch;
    // Attention block.
    const float eps = float(c.rms_norm_eps);
    MX_TRY(ops::qkv_projection(cx, {.x = x,
                                .norm = {.weight = L.attn_norm, .eps = eps},
                                .w = L.qkv_w,
                                .w_scales = L.qkv_w_scales,
                                .bias = L.qkv_b,
                                .qkv = qkv,
                                .n_heads = c.num_attention_heads,
                                .n_kv_heads = c.num_key_value_heads,
                                .head_dim = c.head_dim,
                                .rope = rope,
                                .batch = batch,
                                .cache = a.cache[size_t(l)],
                                .calibrate_kv = a.calibrate_kv && a.cache[size_t(l)].fp8()}));
    MX_TRY(ops::attention(cx, {.qkv = qkv,
                           .sinks = L.sinks,
                           .n_heads = c.num_attention_heads,
                           .n_kv_heads = c.num_key_value_heads,
                           .head_dim = c.head_dim,
                           .window = c.window_of_layer(l),
                           .scale = 1.0f / std::sqrt(float(c.head_dim)),
                           .batch = batch,
                           .cache = a.cache[size_t(l)],
                           .out = attn}));
    if (tp) {
      MX_ASSIGN(const Tensor part, tp->partial(cx, ops::PartialSlot::Attention, T));
      MX_TRY(ops::linear(cx, {.x = attn, .w = L.o_w, .bias = L.o_b, .out = part, .w_scales = L.o_w_scales}));
      MX_TRY(ops::all_reduce_add(cx, *tp, ops::PartialSlot::Attention, x));
    } else {
      MX_TRY(ops::linear(cx, {.x = attn, .w = L.o_w, .bias = L.o_b, .out = x, .accumulate = ops::Accumulate::IntoOut,
                          .w_scales = L.o_w_scales}));
    }
    // MoE block: router -> top-k -> experts. Where the experts' kernels select from the logits
    // themselves (CUDA decode GEMVs), the router stops at the logits; else it writes the top-k.
    const bool experts_select = ops::moe_selects_from_logits(x.device, T, router.dim(1));
    MX_TRY(ops::moe_router(cx, {.x = x,
                            .norm_weight = L.mlp_norm,
                            .eps = eps,
                            .w = L.router_w,
                            .w_scales = L.router_w_scales,
                            .bias = L.router_b,
                            .xn = xn,
                            .logits = router,
                            .ids = experts_select ? Tensor() : top_ids,
                            .weights = experts_select ? Tensor() : top_w}));
    Tensor experts_out = x;
    if (tp) {
      MX_ASSIGN(experts_out, tp->partial(cx, ops::PartialSlot::Experts, T));
    }
    MX_TRY(ops::moe(cx, {.x = xn,
                     .routing = experts_select ? ops::MoeRouting::FromLogits : ops::MoeRouting::FromIds,
                     .ids = top_ids,
                     .weights = top_w,
                     .logits = experts_select ? router : Tensor(),
                     .w = L.experts,
                     .swiglu_limit = c.swiglu_limit,
                     .swiglu_alpha = c.swiglu_alpha,
                     .residual = experts_out}));
    if (tp) MX_TRY(ops::all_reduce_add(cx, *tp, ops::PartialSlot::Experts, x));
    MX_TRY(capture(l + 1));
  }
  if (next_aux < a.aux_boundaries.size() && a.aux_boundaries[next_aux] == kAuxFinalHidden) {
    MX_CHECK(a.aux_boundaries.size() == 1, "forward: the final hidden state is the only aux state of a draft");
    MX_TRY(ops::rmsnorm(cx, {.x = x, .weight = w.final_norm, .eps = float(c.rms_norm_eps), .out = a.aux.rows(0, T)}));
    ++next_aux;
  }
  MX_CHECK(next_aux == a.aux_boundaries.size(), "forward: aux boundaries must ascend within 0..{}",
           c.num_hidden_layers);
  if (R == 0) return ok_status();
  const Tensor rows_x = a.all_rows ? x : first(ws.rows_x, R);
  if (!a.all_rows) MX_TRY(ops::gather_rows(cx, {.x = x, .rows = a.logit_rows, .out = rows_x}));
  // The final norm fused into lm_head (one GEMV kernel for decode).
  Tensor logits = a.logits;
  if (tp) {
    MX_ASSIGN(logits, tp->local_logits(R));
  }
  MX_TRY(ops::linear(cx, {.x = rows_x, .w = w.lm_head, .out = logits,
                      .norm = {.weight = w.final_norm, .eps = float(c.rms_norm_eps)}, .w_scales = w.lm_head_scales}));
  return tp ? ops::gather_logits(cx, *tp, a.logits, R, x.device) : ok_status();
}

}  // namespace mx
