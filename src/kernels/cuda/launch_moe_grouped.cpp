// Launcher of the many-token MoE path (cuda::moe_grouped, used by dispatch above a measured token
// count): checks the contract of bf16_mxfp4w_moe_grouped and carves its scratch from the workspace.
#include <algorithm>
#include <cmath>

#include "kernels/cuda/launch_util.h"

namespace mx::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

heuristics::MoeGroupedPin g_pin = heuristics::MoeGroupedPin::kAuto;  // set_moe_grouped_kernel

Status launch_bf16_mxfp4w_moe_grouped(const ops::MoeArgs& a, bool fp8) {
  const int64_t T = a.x.dim(0);
  const int D = int(a.x.dim(1)), K = int(a.ids.dim(1)), E = int(a.w.gate_up_blocks.dim(0));
  const int F = int(a.w.gate_up_blocks.dim(1) / 2);
  MX_CHECK(a.w.gate_up_blocks.dim(1) % 2 == 0 && a.w.gate_up_blocks.dim(3) == 16 && a.w.down_blocks.dim(3) == 16,
           "bf16_mxfp4w_moe_grouped: blocks {} / {} are not (E, N, G, 16)", a.w.gate_up_blocks.shape_str(),
           a.w.down_blocks.shape_str());
  MX_CHECK(std::isfinite(a.swiglu_limit) && a.swiglu_limit >= 0.0f && a.swiglu_alpha > 0.0f,
           "bf16_mxfp4w_moe_grouped: swiglu_limit {} and alpha {} must be finite, >= 0 and > 0", a.swiglu_limit,
           a.swiglu_alpha);
  MX_CHECK(D % 32 == 0 && F % 32 == 0 && K >= 1 && K <= kern::kMoeMaxK && E <= kern::kGroupedMaxExperts,
           "bf16_mxfp4w_moe_grouped: needs D, F multiples of 32, 1 <= K <= {}, E <= {} (D={} F={} K={} E={})",
           kern::kMoeMaxK, kern::kGroupedMaxExperts, D, F, K, E);
  MX_CHECK(a.w.down_blocks.dim(0) == E && a.w.gate_up_scales.dim(0) == E && a.w.down_scales.dim(0) == E &&
               a.w.gate_up_bias.dim(0) == E && a.w.down_bias.dim(0) == E && a.w.gate_up_bias.dim(1) == 2 * F &&
               a.w.down_bias.dim(1) == D && a.w.gate_up_scales.dim(2) == D / 32 && a.w.down_scales.dim(2) == F / 32,
           "bf16_mxfp4w_moe_grouped: expert tensors disagree on E={} D={} F={}", E, D, F);
  MX_CHECK(a.weights.dim(0) == T && a.weights.dim(1) == K && a.residual.dim(0) == T,
           "bf16_mxfp4w_moe_grouped: weights {} / residual {} vs ids {}", a.weights.shape_str(),
           a.residual.shape_str(), a.ids.shape_str());
  MX_CHECK(aligned16(a.x.data) && aligned16(a.residual.data) && aligned16(a.w.gate_up_blocks.data) &&
               aligned16(a.w.down_blocks.data),
           "bf16_mxfp4w_moe_grouped: x, residual and the expert blocks must be 16-byte aligned");
  // The thin and wgmma GEMMs address x and act rows with 32-bit element offsets; a call past that
  // (budgets of ~186k tokens at gpt-oss sizes) takes the mma.sync GEMMs, which use 64-bit ones.
  const bool offsets32 = T * K * std::max(D, F) < (int64_t(1) << 31);
  using heuristics::MoeGroupedGemm, heuristics::MoeGroupedPin;
  MX_CHECK(fp8 || g_pin != MoeGroupedPin::kWgmma || kern::moe_grouped_wgmma_available(),
           "bf16_mxfp4w_moe_grouped_wgmma: this build has no sm_90a code for this device");
  MX_CHECK(fp8 || g_pin != MoeGroupedPin::kWgmma || offsets32,
           "bf16_mxfp4w_moe_grouped_wgmma: {} tokens x {} x {} activations exceed its 2^31-element offsets", T, K,
           std::max(D, F));
  const heuristics::MoeGroupedPlan plan = heuristics::plan_moe_grouped({.pairs = T * K,
                                                                        .experts = E,
                                                                        .fp8 = fp8,
                                                                        .offsets32 = offsets32,
                                                                        .wgmma_available = kern::moe_grouped_wgmma_available(),
                                                                        .pin = g_pin});
  const int tile_m = plan.tile_m;
  const bool wgmma = plan.gemm == MoeGroupedGemm::kWgmma;
  const size_t smem = fp8     ? kern::moe_grouped_e4m3_smem_bytes()
                      : wgmma ? kern::moe_grouped_wgmma_smem_bytes(tile_m, D, F)
                              : kern::moe_grouped_smem_bytes(tile_m, D, F);
  MX_CHECK(smem <= max_smem_per_block(), "bf16_mxfp4w_moe_grouped: needs {} bytes of shared memory, device has {}",
           smem, max_smem_per_block());
  MX_CHECK(!fp8 || compute_capability() >= 89,
           "moe activation fp8: needs FP8 tensor cores (compute capability 8.9 or later), device has {}.{}",
           compute_capability() / 10, compute_capability() % 10);
  MX_CHECK(int64_t(2) * F * (D / 32) < (int64_t(1) << 31) && int64_t(D) * (F / 32) < (int64_t(1) << 31),
           "bf16_mxfp4w_moe_grouped: an expert's {} x {} weights exceed 2^31 MXFP4 blocks", 2 * F, D);
  MX_CHECK(T * K < (int64_t(1) << 30), "bf16_mxfp4w_moe_grouped: {} tokens x {} is too many pairs", T, K);
  const int max_tiles = kern::moe_grouped_max_tiles(T, K, E, tile_m);
  MX_CHECK(max_tiles <= 65535, "bf16_mxfp4w_moe_grouped: {} tiles exceed the grid limit (T={})", max_tiles, T);
  if (T == 0) return ok_status();

  // Scratch: pair_at, pos_of_pair (P i32), tiles (int4), num_tiles, act (P, F) bf16, y (P, D) f32;
  // with fp8, act holds actq (P, F) and its scales (P, F/32) instead, then xq (P, D), xs (P, D/32);
  // with wgmma, xp (T, D) bf16 (x with permuted k) where xq would be.
  const size_t P = size_t(T) * size_t(K);
  const size_t off_pos = aligned(P * 4), off_tiles = off_pos + aligned(P * 4);
  const size_t off_num = off_tiles + aligned(size_t(max_tiles) * 16), off_act = off_num + kAlign;
  const size_t off_y = off_act + aligned(P * size_t(F) * 2), off_xq = off_y + aligned(P * size_t(D) * 4);
  const size_t off_xs = off_xq + aligned(P * size_t(D));
  const size_t total = fp8 ? off_xs + aligned(P * size_t(D / 32)) : wgmma ? off_xq + aligned(size_t(T) * D * 2) : off_xq;
  void* ws;
  MX_ASSIGN(ws, workspace(total));
  char* w = static_cast<char*>(ws);
  const kern::MoeGroupedParams p{
      .x = a.x.data, .ids = a.ids.ptr<const int32_t>(), .weights = a.weights.ptr<const float>(),
      .gu_blocks = a.w.gate_up_blocks.ptr<const uint8_t>(), .gu_scales = a.w.gate_up_scales.ptr<const uint8_t>(),
      .gu_bias = a.w.gate_up_bias.data, .dn_blocks = a.w.down_blocks.ptr<const uint8_t>(),
      .dn_scales = a.w.down_scales.ptr<const uint8_t>(), .dn_bias = a.w.down_bias.data,
      .pair_at = reinterpret_cast<int32_t*>(w), .pos_of_pair = reinterpret_cast<int32_t*>(w + off_pos),
      .tiles = reinterpret_cast<int4*>(w + off_tiles), .num_tiles = reinterpret_cast<int32_t*>(w + off_num),
      .act = w + off_act, .y = reinterpret_cast<float*>(w + off_y), .residual = a.residual.data,
      .xq = fp8 ? reinterpret_cast<uint8_t*>(w + off_xq) : nullptr,
      .xs = fp8 ? reinterpret_cast<uint8_t*>(w + off_xs) : nullptr,
      .actq = fp8 ? reinterpret_cast<uint8_t*>(w + off_act) : nullptr,
      .act_scales = fp8 ? reinterpret_cast<uint8_t*>(w + off_act + P * size_t(F)) : nullptr,
      .xp = wgmma ? w + off_xq : nullptr, .T = T, .D = D, .F = F,
      .E = E, .K = K, .max_tiles = max_tiles, .tile_m = tile_m, .limit = a.swiglu_limit, .alpha = a.swiglu_alpha,
      .gemm = plan.gemm};
  return kernel_status(heuristics::moe_grouped_gemm_name(plan.gemm), kern::run_bf16_mxfp4w_moe_grouped(p, stream()));
}

}  // namespace

void set_moe_grouped_kernel(heuristics::MoeGroupedPin pin) { g_pin = pin; }
bool moe_grouped_wgmma_available() { return kern::moe_grouped_wgmma_available(); }

Status moe_grouped(const ops::MoeArgs& a) {
  return launch_bf16_mxfp4w_moe_grouped(a, a.activation == ops::MoeActivation::FP8);
}

}  // namespace mx::cuda
