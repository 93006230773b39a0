// The choices of heuristics.h that are functions of a call (see there for the measurements).
#include "kernels/heuristics.h"

namespace mx::heuristics {

MoeGroupedPlan plan_moe_grouped(const MoeGroupedCall& c) {
  if (c.fp8) return {.gemm = MoeGroupedGemm::kFp8, .tile_m = kGroupedTileM};
  if (c.offsets32 && c.pin != MoeGroupedPin::kWgmma && c.pairs <= kShortTileMaxPairsPerExpert * c.experts)
    return {.gemm = MoeGroupedGemm::kThin, .tile_m = kGroupedShortTileM};
  const int tile_m = c.pairs >= kTallTileMinPairsPerExpert * c.experts ? kGroupedTallTileM : kGroupedTileM;
  const bool wgmma = c.offsets32 && c.wgmma_available && c.pin != MoeGroupedPin::kMmaSync &&
                     (c.pin == MoeGroupedPin::kWgmma || c.pairs >= kWgmmaMinPairsPerExpert * c.experts);
  return {.gemm = wgmma ? MoeGroupedGemm::kWgmma : MoeGroupedGemm::kMmaSync, .tile_m = tile_m};
}

const char* moe_grouped_gemm_name(MoeGroupedGemm g) {
  switch (g) {
    case MoeGroupedGemm::kThin: return "bf16_mxfp4w_moe_thin";
    case MoeGroupedGemm::kMmaSync: return "bf16_mxfp4w_moe_grouped";
    case MoeGroupedGemm::kWgmma: return "sm90_bf16_mxfp4w_moe_grouped";
    case MoeGroupedGemm::kFp8: return "e4m3_mxfp4w_moe_grouped";
  }
  return "?";
}

std::vector<int> decode_buckets(int max_rows) {
  std::vector<int> b;
  for (int n = 1; n <= max_rows;) {
    b.push_back(n);
    n += n < 8 ? 1 : n < 16 ? 4 : n < 64 ? 8 : n < 128 ? 16 : n < 256 ? 32 : 64;
  }
  if (!b.empty() && b.back() != max_rows) b.push_back(max_rows);
  return b;
}

}  // namespace mx::heuristics
