// The contract both MoE launchers check on a call's MXFP4 experts (launch_moe.cpp:
// bf16_mxfp4w_moe_gemv, launch_moe_grouped.cpp: bf16_mxfp4w_moe_grouped): blocks layout, sizes that
// agree, multiples of 32, K, ids/weights/residual rows, SwiGLU constants, alignment.
#include <cmath>

#include "kernels/cuda/launch_util.h"

namespace mx::cuda {

std::string mxfp4_experts_contract_violation(const ops::MoeArgs& a) {
  const ops::MoeWeights& w = a.w;
  const int64_t T = a.x.dim(0), D = a.x.dim(1), K = a.ids.dim(1), E = w.gate_up_blocks.dim(0);
  const int64_t F = w.gate_up_blocks.dim(1) / 2;
  if (w.gate_up_blocks.dim(1) % 2 != 0 || w.gate_up_blocks.dim(3) != 16 || w.down_blocks.dim(3) != 16)
    return fmt::format("expert blocks gate_up {} / down {} are not (E, N, G, 16) with an even N",
                       w.gate_up_blocks.shape_str(), w.down_blocks.shape_str());
  if (D % 32 != 0 || F % 32 != 0) return fmt::format("needs D and F multiples of 32 (D={} F={})", D, F);
  if (K < 1 || K > kern::kMoeMaxK) return fmt::format("K={} experts per token outside 1..{}", K, kern::kMoeMaxK);
  struct Dim {
    const char* what;
    int64_t got, want;
  };
  const Dim dims[] = {{"down_blocks experts", w.down_blocks.dim(0), E},
                      {"gate_up_scales experts", w.gate_up_scales.dim(0), E},
                      {"down_scales experts", w.down_scales.dim(0), E},
                      {"gate_up_bias experts", w.gate_up_bias.dim(0), E},
                      {"down_bias experts", w.down_bias.dim(0), E},
                      {"gate_up_bias width (2F)", w.gate_up_bias.dim(1), 2 * F},
                      {"down_bias width (D)", w.down_bias.dim(1), D},
                      {"gate_up_scales groups (D/32)", w.gate_up_scales.dim(2), D / 32},
                      {"down_scales groups (F/32)", w.down_scales.dim(2), F / 32}};
  for (const Dim& d : dims)
    if (d.got != d.want)
      return fmt::format("expert tensors disagree: {} is {}, expected {} (E={} D={} F={})", d.what, d.got, d.want, E,
                         D, F);
  if (a.weights.dim(0) != T || a.weights.dim(1) != K || a.residual.dim(0) != T)
    return fmt::format("weights {} / residual {} vs ids {} for {} tokens", a.weights.shape_str(),
                       a.residual.shape_str(), a.ids.shape_str(), T);
  if (!aligned16(a.x.data) || !aligned16(w.gate_up_blocks.data) || !aligned16(w.down_blocks.data))
    return "x, gate_up_blocks and down_blocks must be 16-byte aligned";
  if (!std::isfinite(a.swiglu_limit) || a.swiglu_limit < 0.0f || !(a.swiglu_alpha > 0.0f))
    return fmt::format("needs a finite swiglu_limit >= 0 and swiglu_alpha > 0 (limit={} alpha={})", a.swiglu_limit,
                       a.swiglu_alpha);
  return {};
}

}  // namespace mx::cuda
