// The gpt-oss forward pass, written once over the ops of kernels/ops.h for any backend:
// T tokens (one prefill chunk, or one decode token per sequence) in, logits for chosen rows out.
#pragma once

#include <span>

#include "kernels/collective.h"
#include "kernels/ops.h"
#include "model/model.h"

namespace mx {

// Activation buffers for up to max_tokens tokens and max_logit_rows logit rows, allocated once.
class Workspace {
 public:
  static Result<Workspace> create(const ModelConfig& c, Device device, int max_tokens, int max_logit_rows);
  int max_tokens() const { return max_tokens_; }
  int max_logit_rows() const { return max_rows_; }

  Tensor x;        // (T, D) act: residual stream
  Tensor xn;       // (T, D) act: normalised input of the MoE (written by moe_router)
  Tensor qkv;      // (T, (H + 2·Hkv)·Dh) act
  Tensor attn;     // (T, H·Dh) act
  Tensor router;   // (T, E) f32: BF16 logits would tie where FP32 ones differ and flip the top-k
  Tensor top_ids;  // (T, K) i32
  Tensor top_w;    // (T, K) f32
  Tensor rows_x;   // (R, D) act: final-normed rows that need logits

 private:
  std::vector<ops::Buffer> storage_;
  int max_tokens_ = 0, max_rows_ = 0;
};

// An aux boundary past every layer: the final RMSNorm's output (drafts without aux hidden states).
inline constexpr int kAuxFinalHidden = 1 << 30;

struct ForwardArgs {
  Tensor tokens;                        // (T) i32
  ops::TokenBatch batch;                // positions, sequences, block tables
  std::span<const ops::KvLayer> cache;  // one per layer
  Tensor sliding_block_tables;          // (S, max_blocks) i32, optional: sliding layers' tables (rings)
  Tensor logit_rows;                    // (R) i32: indices into the T tokens
  bool all_rows = false;                // logit_rows is 0..T-1: lm_head reads the tokens in place
  Tensor logits;                        // (R, V) f32
  bool calibrate_kv = false;            // FP8 cache: every layer sets its scales from this call
  ops::Collective* tp = nullptr;        // this rank's end of the group when the model is split (rank 0's
                                        // logits are the whole vocabulary; other ranks' are unused)
  // The residual stream at each of these boundaries (ascending; j = after j layers, 0 the embedding,
  // L before the final norm; kAuxFinalHidden, alone: the final post-norm hidden state) into aux's
  // columns [i·D, (i+1)·D), (T, n·D) act. Empty: none. An EAGLE-3 draft's features (model/eagle3.h);
  // all of 0..L: every layer's output, as tests/model/fixture_test.cpp compares them with HF's.
  std::span<const int> aux_boundaries;
  Tensor aux;
};

Status forward(ops::Context& cx, const Model& m, Workspace& ws, const ForwardArgs& a);

// The largest op calls a forward of up to max_tokens tokens and max_rows logit rows over a cache of
// max_keys positions makes (kernels/context.h): the engine sizes its context's scratch from them.
ops::CallShapes forward_call_shapes(const ModelConfig& c, int64_t max_tokens, int64_t max_rows, int64_t max_keys,
                                    bool fp8_kv);

}  // namespace mx
