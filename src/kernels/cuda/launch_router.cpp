// Launcher of the fused MoE router (moe_router's norm + router GEMV for decode:
// bf16_bf16w_norm_router); checks the kernel's contract. dispatch.cpp routes larger T, or shapes
// outside the contract, through rmsnorm -> linear instead, and runs router_topk after either when
// the call asks for the top-k.
#include "kernels/cuda/launch_util.h"

namespace mx::cuda {
namespace {

// bf16_bf16w_norm_router's contract, with the reason it fails (empty when the kernel can run).
std::string norm_router_contract_violation(const ops::MoeRouterArgs& a) {
  const int64_t T = a.x.dim(0), D = a.x.dim(1);
  if (T > kern::kRouterFusedMaxTokens) return fmt::format("{} tokens > {}", T, kern::kRouterFusedMaxTokens);
  if (D % 8 != 0 || D > kern::kRouterFusedMaxD)
    return fmt::format("D={} (needs D % 8 == 0, D <= {})", D, kern::kRouterFusedMaxD);
  if (a.norm_weight.dtype != DType::BF16) return "the norm weight is not bf16";
  if (!aligned16(a.x.data) || !aligned16(a.norm_weight.data) || !aligned16(a.w.data) || !aligned16(a.xn.data))
    return "x, norm weight, w and xn must be 16-byte aligned";
  if (a.xn.data == a.x.data) return "xn must not alias x";
  if (ops::is_mxfp4(a.w_scales) && D % 32 != 0) return fmt::format("MXFP4 router with D={} (needs D % 32 == 0)", D);
  return {};
}

Status launch_bf16_bf16w_norm_router(Backend& b, const ops::MoeRouterArgs& a) {
  const std::string bad = norm_router_contract_violation(a);
  MX_CHECK(bad.empty(), "bf16_bf16w_norm_router: {}", bad);
  const kern::NormRouterParams p{.x = a.x.data, .norm_weight = a.norm_weight.data, .eps = a.eps, .w = a.w.data,
                                 .bias = a.bias.data, .xn = a.xn.data, .logits = a.logits.data,
                                 .logits_f32 = a.logits.dtype == DType::F32, .T = a.x.dim(0), .D = int(a.x.dim(1)),
                                 .E = int(a.w.dim(0)),
                                 .w_scales = ops::is_mxfp4(a.w_scales) ? a.w_scales.data : nullptr};
  return kernel_status("bf16_bf16w_norm_router", kern::run_bf16_bf16w_norm_router(p, b.stream()));
}

}  // namespace

bool moe_router_fused_supported(const ops::MoeRouterArgs& a) { return norm_router_contract_violation(a).empty(); }

Status moe_router_fused(Backend& b, const ops::MoeRouterArgs& a) { return launch_bf16_bf16w_norm_router(b, a); }

}  // namespace mx::cuda
