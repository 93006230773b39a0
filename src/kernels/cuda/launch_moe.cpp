// Launchers of the MoE CUDA ops: router_topk and moe (the MXFP4 expert GEMVs for a few tokens, from
// the ids or selecting from the router logits); each checks its kernel's contract first.
#include <cmath>

#include "kernels/cuda/launch_util.h"

namespace mx::cuda {
namespace {

Status launch_bf16_router_topk(const ops::RouterTopkArgs& a) {
  const int E = int(a.logits.dim(1)), K = int(a.ids.dim(1));
  MX_CHECK(E <= kern::kTopkMaxExperts && K <= kern::kTopkMaxK, "bf16_router_topk: E={} K={} beyond {} / {}", E, K,
           kern::kTopkMaxExperts, kern::kTopkMaxK);
  MX_CHECK(a.weights.dim(0) == a.ids.dim(0) && a.weights.dim(1) == K, "bf16_router_topk: weights {} vs ids {}",
           a.weights.shape_str(), a.ids.shape_str());
  const kern::RouterTopkParams p{.logits = a.logits.data, .logits_f32 = a.logits.dtype == DType::F32,
                                 .ids = a.ids.ptr<int32_t>(), .weights = a.weights.ptr<float>(),
                                 .T = a.logits.dim(0), .E = E, .K = K};
  return kernel_status("bf16_router_topk", kern::run_bf16_router_topk(p, stream()));
}

Status launch_bf16_mxfp4w_moe_gemv(const ops::MoeArgs& a) {
  const int64_t T = a.x.dim(0);
  const int D = int(a.x.dim(1)), K = int(a.ids.dim(1)), E = int(a.w.gate_up_blocks.dim(0));
  const int F = int(a.w.gate_up_blocks.dim(1) / 2);
  MX_CHECK(a.w.gate_up_blocks.dim(1) % 2 == 0 && a.w.gate_up_blocks.dim(3) == 16 && a.w.down_blocks.dim(3) == 16,
           "bf16_mxfp4w_moe_gemv: blocks {} / {} are not (E, N, G, 16)", a.w.gate_up_blocks.shape_str(),
           a.w.down_blocks.shape_str());
  MX_CHECK(D % 32 == 0 && F % 32 == 0 && K >= 1 && K <= kern::kMoeMaxK,
           "bf16_mxfp4w_moe_gemv: needs D, F multiples of 32 and 1 <= K <= {} (D={} F={} K={})", kern::kMoeMaxK, D, F,
           K);
  MX_CHECK(a.w.down_blocks.dim(0) == E && a.w.gate_up_scales.dim(0) == E && a.w.down_scales.dim(0) == E &&
               a.w.gate_up_bias.dim(0) == E && a.w.down_bias.dim(0) == E && a.w.gate_up_bias.dim(1) == 2 * F &&
               a.w.down_bias.dim(1) == D && a.w.gate_up_scales.dim(2) == D / 32 && a.w.down_scales.dim(2) == F / 32,
           "bf16_mxfp4w_moe_gemv: expert tensors disagree on E={} D={} F={}", E, D, F);
  MX_CHECK(a.weights.dim(0) == T && a.weights.dim(1) == K, "bf16_mxfp4w_moe_gemv: weights {} vs ids {}",
           a.weights.shape_str(), a.ids.shape_str());
  MX_CHECK(aligned16(a.x.data) && aligned16(a.w.gate_up_blocks.data) && aligned16(a.w.down_blocks.data),
           "bf16_mxfp4w_moe_gemv: x and the expert blocks must be 16-byte aligned");
  const size_t smem = kern::moe_gemv_smem_bytes(D, F, K);
  MX_CHECK(smem <= max_smem_per_block(), "bf16_mxfp4w_moe_gemv: needs {} bytes of shared memory, device has {}",
           smem, max_smem_per_block());
  MX_CHECK(std::isfinite(a.swiglu_limit) && a.swiglu_limit >= 0.0f && a.swiglu_alpha > 0.0f,
           "bf16_mxfp4w_moe_gemv: needs a finite swiglu_limit >= 0 and alpha > 0 (limit={} alpha={})",
           a.swiglu_limit, a.swiglu_alpha);
  if (T == 0) return ok_status();
  void* act;
  MX_ASSIGN(act, workspace(size_t(T) * K * F * 2));
  MX_CHECK(a.logits.empty() || moe_selects_supported(a.logits.dim(1)),
           "bf16_mxfp4w_moe_gemv: selects from at most {} experts' logits", kern::kTopkMaxExperts);
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
                          .sms = sm_count()};
  return kernel_status("bf16_mxfp4w_moe_gemv", kern::run_bf16_mxfp4w_moe_gemv(p, stream()));
}

}  // namespace

Status router_topk(const ops::RouterTopkArgs& a) { return launch_bf16_router_topk(a); }
Status moe(const ops::MoeArgs& a) { return launch_bf16_mxfp4w_moe_gemv(a); }
bool moe_selects_supported(int64_t E) { return E <= kern::kTopkMaxExperts; }

}  // namespace mx::cuda
