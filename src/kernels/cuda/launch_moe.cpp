// Launchers of the MoE CUDA ops: router_topk and moe (the MXFP4 expert GEMVs for a few tokens, from
// the ids or selecting from the router logits); each checks its kernel's contract first.
#include <string>

#include "kernels/cuda/launch_util.h"

namespace mx::cuda {
namespace {

// bf16_router_topk's contract, with the reason it fails (empty when the kernel can run).
std::string router_topk_contract_violation(const ops::RouterTopkArgs& a) {
  const int64_t E = a.logits.dim(1), K = a.ids.dim(1);
  if (E > kern::kTopkMaxExperts || K > kern::kTopkMaxK)
    return fmt::format("E={} K={} beyond {} / {}", E, K, kern::kTopkMaxExperts, kern::kTopkMaxK);
  if (a.weights.dim(0) != a.ids.dim(0) || a.weights.dim(1) != K)
    return fmt::format("weights {} vs ids {}", a.weights.shape_str(), a.ids.shape_str());
  return {};
}

Status launch_bf16_router_topk(Backend& b, const ops::RouterTopkArgs& a) {
  const std::string bad = router_topk_contract_violation(a);
  MX_CHECK(bad.empty(), "bf16_router_topk: {}", bad);
  const kern::RouterTopkParams p{.logits = a.logits.data, .logits_f32 = a.logits.dtype == DType::F32,
                                 .ids = a.ids.ptr<int32_t>(), .weights = a.weights.ptr<float>(),
                                 .T = a.logits.dim(0), .E = int(a.logits.dim(1)), .K = int(a.ids.dim(1))};
  return kernel_status("bf16_router_topk", kern::run_bf16_router_topk(p, b.stream()));
}

// bf16_mxfp4w_moe_gemv's contract: the experts' (shared with the grouped GEMMs), its shared memory,
// the router logits it selects from; the reason it fails (empty when the kernel can run).
std::string moe_gemv_contract_violation(const Backend& b, const ops::MoeArgs& a) {
  if (std::string bad = mxfp4_experts_contract_violation(a); !bad.empty()) return bad;
  const int D = int(a.x.dim(1)), K = int(a.ids.dim(1)), F = int(a.w.gate_up_blocks.dim(1) / 2);
  const size_t smem = kern::moe_gemv_smem_bytes(D, F, K);
  if (smem > b.max_smem_per_block())
    return fmt::format("needs {} bytes of shared memory (D={} F={} K={}), device has {}", smem, D, F, K,
                       b.max_smem_per_block());
  if (!a.logits.empty() && !moe_selects_supported(a.logits.dim(1)))
    return fmt::format("selects from at most {} experts' logits, got {}", kern::kTopkMaxExperts, a.logits.dim(1));
  return {};
}

Status launch_bf16_mxfp4w_moe_gemv(Backend& b, const ops::MoeArgs& a) {
  const std::string bad = moe_gemv_contract_violation(b, a);
  MX_CHECK(bad.empty(), "bf16_mxfp4w_moe_gemv: {}", bad);
  const int64_t T = a.x.dim(0);
  const int D = int(a.x.dim(1)), K = int(a.ids.dim(1)), E = int(a.w.gate_up_blocks.dim(0));
  const int F = int(a.w.gate_up_blocks.dim(1) / 2);
  if (T == 0) return ok_status();
  void* act;
  MX_ASSIGN(act, b.workspace(size_t(T) * K * F * 2, "bf16_mxfp4w_moe_gemv"));
  const kern::MoeParams p{.x = a.x.data, .ids = a.ids.ptr<int32_t>(), .weights = a.weights.ptr<float>(),
                          .logits = a.logits.empty() ? nullptr : a.logits.data,
                          .logits_f32 = a.logits.dtype == DType::F32,
                          .gu_blocks = a.w.gate_up_blocks.ptr<const uint8_t>(),
                          .gu_scales = a.w.gate_up_scales.ptr<const uint8_t>(), .gu_bias = a.w.gate_up_bias.data,
                          .dn_blocks = a.w.down_blocks.ptr<const uint8_t>(),
                          .dn_scales = a.w.down_scales.ptr<const uint8_t>(), .dn_bias = a.w.down_bias.data,
                          .act = act, .residual = a.residual.data, .T = T, .D = D, .F = F, .E = E,
                          .K = K, .limit = a.swiglu_limit, .alpha = a.swiglu_alpha,
                          .act_scale = kern::moe_gemv_act_scale(a.swiglu_limit, a.swiglu_alpha),
                          .sms = b.sm_count()};
  return kernel_status("bf16_mxfp4w_moe_gemv", kern::run_bf16_mxfp4w_moe_gemv(p, b.stream()));
}

}  // namespace

Status router_topk(Backend& b, const ops::RouterTopkArgs& a) { return launch_bf16_router_topk(b, a); }
Status moe(Backend& b, const ops::MoeArgs& a) { return launch_bf16_mxfp4w_moe_gemv(b, a); }
bool moe_selects_supported(int64_t E) { return E <= kern::kTopkMaxExperts; }

// The GEMVs' activations: (T, K, F) bf16 for the calls they take (T <= kMoeGemvMaxTokens).
size_t moe_scratch_bytes(const ops::CallShapes& s) {
  return size_t(std::min(s.max_tokens, heuristics::kMoeGemvMaxTokens)) * size_t(s.top_k) * size_t(s.expert_width) * 2;
}

}  // namespace mx::cuda
