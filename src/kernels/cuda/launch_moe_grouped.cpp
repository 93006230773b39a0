// Launcher of the many-token MoE path (cuda::moe_grouped, used by dispatch above a measured token
// count): plans the grouped GEMMs (bf16_mxfp4w_moe_grouped and its thin, wgmma and FP8 families),
// checks their contract and carves their scratch from the workspace.
#include <algorithm>
#include <string>

#include "kernels/cuda/launch_util.h"

namespace mx::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// The scratch of a call: pair_at, pos_of_pair (P i32), tiles (int4), num_tiles, act (P, F) bf16,
// y (P, D) f32; with fp8, act holds actq (P, F) and its scales (P, F/32) instead, then xq (P, D),
// xs (P, D/32); with wgmma, xp (T, D) bf16 (x with permuted k) where xq would be.
struct GroupedScratch {
  size_t off_pos, off_tiles, off_num, off_act, off_y, off_xq, off_xs, total;
};
GroupedScratch grouped_scratch(int64_t T, int K, int D, int F, int max_tiles, bool fp8, bool wgmma) {
  GroupedScratch g{};
  const size_t P = size_t(T) * size_t(K);
  g.off_pos = aligned(P * 4);
  g.off_tiles = g.off_pos + aligned(P * 4);
  g.off_num = g.off_tiles + aligned(size_t(max_tiles) * 16);
  g.off_act = g.off_num + kAlign;
  g.off_y = g.off_act + aligned(P * size_t(F) * 2);
  g.off_xq = g.off_y + aligned(P * size_t(D) * 4);
  g.off_xs = g.off_xq + aligned(P * size_t(D));
  g.total = fp8 ? g.off_xs + aligned(P * size_t(D / 32)) : wgmma ? g.off_xq + aligned(size_t(T) * D * 2) : g.off_xq;
  return g;
}

using heuristics::MoeGroupedPin;

// Whether a call must run the wgmma GEMMs (pinned; the pin is for the BF16 families).
bool pinned_wgmma(MoeGroupedPin pin, bool fp8) { return !fp8 && pin == MoeGroupedPin::kWgmma; }

// The thin and wgmma GEMMs address x and act rows with 32-bit element offsets; a call past that
// (budgets of ~186k tokens at gpt-oss sizes) takes the mma.sync GEMMs, which use 64-bit ones.
bool offsets32(const ops::MoeArgs& a) {
  const int64_t T = a.x.dim(0), K = a.ids.dim(1), D = a.x.dim(1), F = a.w.gate_up_blocks.dim(1) / 2;
  return T * K * std::max(D, F) < (int64_t(1) << 31);
}

// The GEMMs of a call (plan_moe_grouped; computed before the contract is checked, which also
// looks at the plan's shared memory).
heuristics::MoeGroupedPlan grouped_plan(const ops::MoeArgs& a, bool fp8, MoeGroupedPin pin) {
  return heuristics::plan_moe_grouped({.pairs = a.x.dim(0) * a.ids.dim(1),
                                       .experts = a.w.gate_up_blocks.dim(0),
                                       .fp8 = fp8,
                                       .offsets32 = offsets32(a),
                                       .wgmma_available = kern::moe_grouped_wgmma_available(),
                                       .pin = pin});
}

// The kernel a call asks for, named in its errors: the pinned wgmma one (plan_moe_grouped falls
// back from it where it cannot run; the contract refuses instead), else the plan's.
const char* grouped_kernel_name(const heuristics::MoeGroupedPlan& plan, bool fp8, MoeGroupedPin pin) {
  return heuristics::moe_grouped_gemm_name(pinned_wgmma(pin, fp8) ? heuristics::MoeGroupedGemm::kWgmma : plan.gemm);
}

// The grouped GEMMs' contract under a plan: the experts' (shared with the GEMVs), the kernels'
// limits, a pinned wgmma family, the device; the reason it fails (empty when the kernels can run).
std::string moe_grouped_contract_violation(const Backend& b, const ops::MoeArgs& a, bool fp8, MoeGroupedPin pin,
                                           const heuristics::MoeGroupedPlan& plan) {
  if (std::string bad = mxfp4_experts_contract_violation(a); !bad.empty()) return bad;
  const int64_t T = a.x.dim(0), K = a.ids.dim(1);
  const int D = int(a.x.dim(1)), E = int(a.w.gate_up_blocks.dim(0)), F = int(a.w.gate_up_blocks.dim(1) / 2);
  if (E > kern::kGroupedMaxExperts) return fmt::format("E={} experts > {}", E, kern::kGroupedMaxExperts);
  if (!aligned16(a.residual.data)) return "residual must be 16-byte aligned";
  if (pinned_wgmma(pin, fp8) && !kern::moe_grouped_wgmma_available()) return "this build has no sm_90a code for this device";
  if (pinned_wgmma(pin, fp8) && !offsets32(a))
    return fmt::format("{} tokens x {} x {} activations exceed its 2^31-element offsets", T, K, std::max(D, F));
  const size_t smem = fp8 ? kern::moe_grouped_e4m3_smem_bytes()
                      : plan.gemm == heuristics::MoeGroupedGemm::kWgmma
                          ? kern::moe_grouped_wgmma_smem_bytes(plan.tile_m, D, F)
                          : kern::moe_grouped_smem_bytes(plan.tile_m, D, F);
  if (smem > b.max_smem_per_block())
    return fmt::format("needs {} bytes of shared memory (tile_m={} D={} F={}), device has {}", smem, plan.tile_m, D,
                       F, b.max_smem_per_block());
  if (fp8 && b.compute_capability() < 89)
    return fmt::format("FP8 activations need FP8 tensor cores (compute capability 8.9 or later), device has {}.{}",
                       b.compute_capability() / 10, b.compute_capability() % 10);
  if (int64_t(2) * F * (D / 32) >= (int64_t(1) << 31) || int64_t(D) * (F / 32) >= (int64_t(1) << 31))
    return fmt::format("an expert's {} x {} weights exceed 2^31 MXFP4 blocks", 2 * F, D);
  if (T * K >= (int64_t(1) << 30)) return fmt::format("{} tokens x {} is too many pairs (>= 2^30)", T, K);
  const int max_tiles = kern::moe_grouped_max_tiles(T, int(K), E, plan.tile_m);
  if (max_tiles > 65535) return fmt::format("{} tiles exceed the grid limit 65535 (T={})", max_tiles, T);
  return {};
}

Status launch_bf16_mxfp4w_moe_grouped(Backend& b, const ops::MoeArgs& a, bool fp8, MoeGroupedPin pin) {
  const heuristics::MoeGroupedPlan plan = grouped_plan(a, fp8, pin);
  const std::string bad = moe_grouped_contract_violation(b, a, fp8, pin, plan);
  MX_CHECK(bad.empty(), "{}: {}", grouped_kernel_name(plan, fp8, pin), bad);
  const int64_t T = a.x.dim(0);
  const int D = int(a.x.dim(1)), K = int(a.ids.dim(1)), E = int(a.w.gate_up_blocks.dim(0));
  const int F = int(a.w.gate_up_blocks.dim(1) / 2);
  const int tile_m = plan.tile_m;
  const bool wgmma = plan.gemm == heuristics::MoeGroupedGemm::kWgmma;
  const int max_tiles = kern::moe_grouped_max_tiles(T, K, E, tile_m);
  if (T == 0) return ok_status();

  const GroupedScratch sc = grouped_scratch(T, K, D, F, max_tiles, fp8, wgmma);
  const size_t P = size_t(T) * size_t(K);
  void* ws;
  MX_ASSIGN(ws, b.workspace(sc.total, grouped_kernel_name(plan, fp8, pin)));
  char* w = static_cast<char*>(ws);
  const kern::MoeGroupedParams p{
      .x = a.x.data, .ids = a.ids.ptr<const int32_t>(), .weights = a.weights.ptr<const float>(),
      .gu_blocks = a.w.gate_up_blocks.ptr<const uint8_t>(), .gu_scales = a.w.gate_up_scales.ptr<const uint8_t>(),
      .gu_bias = a.w.gate_up_bias.data, .dn_blocks = a.w.down_blocks.ptr<const uint8_t>(),
      .dn_scales = a.w.down_scales.ptr<const uint8_t>(), .dn_bias = a.w.down_bias.data,
      .pair_at = reinterpret_cast<int32_t*>(w), .pos_of_pair = reinterpret_cast<int32_t*>(w + sc.off_pos),
      .tiles = reinterpret_cast<int4*>(w + sc.off_tiles), .num_tiles = reinterpret_cast<int32_t*>(w + sc.off_num),
      .act = w + sc.off_act, .y = reinterpret_cast<float*>(w + sc.off_y), .residual = a.residual.data,
      .xq = fp8 ? reinterpret_cast<uint8_t*>(w + sc.off_xq) : nullptr,
      .xs = fp8 ? reinterpret_cast<uint8_t*>(w + sc.off_xs) : nullptr,
      .actq = fp8 ? reinterpret_cast<uint8_t*>(w + sc.off_act) : nullptr,
      .act_scales = fp8 ? reinterpret_cast<uint8_t*>(w + sc.off_act + P * size_t(F)) : nullptr,
      .xp = wgmma ? w + sc.off_xq : nullptr, .T = T, .D = D, .F = F,
      .E = E, .K = K, .max_tiles = max_tiles, .tile_m = tile_m, .limit = a.swiglu_limit, .alpha = a.swiglu_alpha,
      .gemm = plan.gemm};
  return kernel_status(heuristics::moe_grouped_gemm_name(plan.gemm), kern::run_bf16_mxfp4w_moe_grouped(p, b.stream()));
}

}  // namespace

bool moe_grouped_wgmma_available() { return kern::moe_grouped_wgmma_available(); }

const char* moe_grouped_kernel_name(const ops::MoeArgs& a, MoeGroupedPin pin) {
  const bool fp8 = a.activation == ops::MoeActivation::FP8;
  return grouped_kernel_name(grouped_plan(a, fp8, pin), fp8, pin);
}

Status moe_grouped(Backend& b, const ops::MoeArgs& a, MoeGroupedPin pin) {
  return launch_bf16_mxfp4w_moe_grouped(b, a, a.activation == ops::MoeActivation::FP8, pin);
}

// The largest call: every BF16 family's layout (and the FP8 one's where the context asks for FP8
// activations) at max_tokens, each growing with T; the tile count bounded by the shortest tiles'.
size_t moe_grouped_scratch_bytes(const ops::CallShapes& s) {
  if (s.experts == 0 || s.max_tokens <= heuristics::kMoeGemvMaxTokens) return 0;
  const int tiles = kern::moe_grouped_max_tiles(s.max_tokens, int(s.top_k), int(s.experts), heuristics::kGroupedShortTileM);
  size_t most = 0;
  for (const bool fp8 : {false, s.fp8_moe})
    for (const bool wgmma : {false, true})
      most = std::max(most, grouped_scratch(s.max_tokens, int(s.top_k), int(s.hidden), int(s.expert_width), tiles, fp8,
                                            wgmma).total);
  return most;
}

}  // namespace mx::cuda
