// One EAGLE-3 draft step (docs/spec/EAGLE3_SPEC.md §3) over the ops, on any backend: the features
// (the target's aux states through fc, pass 1 of a round) or the previous step's hidden state, the
// token embedding, one llama decoder layer over the draft's own paged KV cache (RoPE of the draft's
// config, plain causal softmax: the attention op with -inf sinks and no window), the final norm and
// lm_head over the draft vocabulary.
#pragma once

#include "model/eagle3.h"

namespace mx {

// Activation buffers of the draft forward for up to max_tokens tokens and max_rows logit rows.
class Eagle3Workspace {
 public:
  static Result<Eagle3Workspace> create(const Eagle3Config& c, Device device, int max_tokens, int max_rows);
  int max_tokens() const { return max_tokens_; }
  int max_rows() const { return max_rows_; }

  Tensor features;  // (T, n·Dt) act: the normed aux states (norm_before_fc)
  Tensor h;         // (T, D) act: the incoming hidden state (fc output)
  Tensor b;         // (T, D) act: RMS(h) (norm_before_residual)
  Tensor embed;     // (T, D) act: the token embeddings
  Tensor qkv;       // (T, H·Dh + 2·Hkv·Dh) act
  Tensor attn;      // (T, H·Dh) act
  Tensor gate_up;   // (T, 2I) act
  Tensor act;       // (T, I) act
  Tensor rows_x;    // (R, D) act
  Tensor y;         // (T, D) act: RMS(h2; norm) (norm_output)

 private:
  int max_tokens_ = 0, max_rows_ = 0;
  std::vector<ops::Buffer> storage_;
};

struct Eagle3StepArgs {
  Tensor tokens;     // (T) i32, target ids: the token of position p + 1 for the row of position p
  Tensor features;   // (T, n·Dt) act: the target's aux states in ascending boundary order (pass 1), or empty
  Tensor hidden;     // (T, D) act: the hidden state of the step before, or (use_aux_hidden_state false, pass 1)
                     // the target's final post-norm hidden; used when features is empty
  ops::TokenBatch batch;
  ops::KvLayer cache;  // the draft's single layer
  Tensor logit_rows;   // (R) i32: rows of the T tokens that need logits
  Tensor logits;       // (R, Vd) f32 out
  Tensor hidden_out;   // (T, D) act out: h2 (pre-norm), or RMS(h2; norm) with norm_output; may alias hidden
  // Only the draft's KV at these positions (pass 1 of a step that drafts nothing): the step stops after
  // the KV write; no logits (logit_rows empty), hidden_out untouched (may be empty).
  bool kv_only = false;
};

Status eagle3_step(ops::Context& cx, const Eagle3Draft& d, Eagle3Workspace& ws, const Eagle3StepArgs& a);

}  // namespace mx
