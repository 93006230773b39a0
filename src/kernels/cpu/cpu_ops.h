// CPU reference backend: plain loops with fp32 accumulation and fp32 activations, multi-threaded
// with parallel_for. The oracle that the CUDA kernels are tested against. Shapes are validated
// by dispatch.cpp before these are called.
#pragma once

#include "kernels/ops.h"

namespace mx::cpu {

Status embed(const ops::EmbedArgs& a);
Status rmsnorm(const ops::RmsNormArgs& a);
Status linear(const ops::LinearArgs& a);
Status gather_rows(const ops::GatherRowsArgs& a);
Status silu_mul(const ops::SiluMulArgs& a);  // silu_mul.cpp
Status qkv_rope_cache(const ops::QkvRopeCacheArgs& a);
Status kv_scales(const ops::KvScalesArgs& a);
Status qkv_projection(const ops::QkvProjectionArgs& a);  // linear -> qkv_rope_cache
Status attention(const ops::AttentionArgs& a);
Status router_topk(const ops::RouterTopkArgs& a);
Status moe_router(const ops::MoeRouterArgs& a);  // rmsnorm -> linear -> router_topk
Status moe(const ops::MoeArgs& a);
Status fill_random(const ops::FillRandomArgs& a);
Status sample(const ops::SampleArgs& a);
Status logprobs_topk(const ops::LogprobsTopkArgs& a);  // logits.cpp: the sampling stage's logits ops
Status logits_process(const ops::LogitsProcessArgs& a);
Status logprobs_chosen(const ops::LogprobsChosenArgs& a);
Status add_i32(const ops::AddI32Args& a);
Status take_prev_tokens(const ops::TakePrevTokensArgs& a);
Status apply_table_updates(const ops::TableUpdatesArgs& a);

// Reads element i of a bf16 or f32 tensor as float (weights may be either on the CPU backend).
inline float load_f32(const Tensor& t, int64_t i) {
  return t.dtype == DType::BF16 ? bf16_to_f32(t.ptr<const bf16>()[i]) : t.ptr<const float>()[i];
}

}  // namespace mx::cpu
