// heuristics.h: the grouped MoE plan (family and tile height) at the boundaries of its measured
// bounds, pins, FP8 and 64-bit-offset calls; the decode graph buckets.
#include "kernels/heuristics.h"

#include <gtest/gtest.h>

namespace mx::heuristics {
namespace {

MoeGroupedPlan plan(int64_t pairs, MoeGroupedPin pin = MoeGroupedPin::kAuto, bool wgmma = true, bool fp8 = false,
                    bool offsets32 = true) {
  return plan_moe_grouped(
      {.pairs = pairs, .experts = 128, .fp8 = fp8, .offsets32 = offsets32, .wgmma_available = wgmma, .pin = pin});
}

TEST(Heuristics, GroupedMoePlanFollowsPairsPerExpert) {
  const int64_t E = 128;
  EXPECT_EQ(plan(kShortTileMaxPairsPerExpert * E).gemm, MoeGroupedGemm::kThin);  // decode batches
  EXPECT_EQ(plan(kShortTileMaxPairsPerExpert * E).tile_m, kGroupedShortTileM);
  EXPECT_EQ(plan(kShortTileMaxPairsPerExpert * E + 1).gemm, MoeGroupedGemm::kMmaSync);
  EXPECT_EQ(plan(kShortTileMaxPairsPerExpert * E + 1).tile_m, kGroupedTileM);
  EXPECT_EQ(plan(kWgmmaMinPairsPerExpert * E).gemm, MoeGroupedGemm::kWgmma);  // prefill chunks
  EXPECT_EQ(plan(kTallTileMinPairsPerExpert * E).tile_m, kGroupedTallTileM);
  EXPECT_EQ(plan(kWgmmaMinPairsPerExpert * E, MoeGroupedPin::kAuto, /*wgmma=*/false).gemm, MoeGroupedGemm::kMmaSync);
}

TEST(Heuristics, GroupedMoePinsFp8AndWideOffsets) {
  EXPECT_EQ(plan(100, MoeGroupedPin::kWgmma).gemm, MoeGroupedGemm::kWgmma);  // a pin skips the thin tiles
  EXPECT_EQ(plan(100, MoeGroupedPin::kWgmma).tile_m, kGroupedTileM);
  EXPECT_EQ(plan(100000, MoeGroupedPin::kMmaSync).gemm, MoeGroupedGemm::kMmaSync);
  EXPECT_EQ(plan(100, MoeGroupedPin::kAuto, true, /*fp8=*/true).gemm, MoeGroupedGemm::kFp8);
  EXPECT_EQ(plan(100000, MoeGroupedPin::kAuto, true, /*fp8=*/true).tile_m, kGroupedTileM);
  // Activations past 32-bit offsets: neither the thin nor the wgmma kernels.
  EXPECT_EQ(plan(100, MoeGroupedPin::kAuto, true, false, /*offsets32=*/false).gemm, MoeGroupedGemm::kMmaSync);
  EXPECT_EQ(plan(100000, MoeGroupedPin::kAuto, true, false, /*offsets32=*/false).gemm, MoeGroupedGemm::kMmaSync);
  EXPECT_STREQ(moe_grouped_gemm_name(MoeGroupedGemm::kThin), "bf16_mxfp4w_moe_thin");
}

TEST(Heuristics, DecodeBucketsCoverEveryBatchUpToTheLimit) {
  EXPECT_EQ(decode_buckets(1), std::vector<int>{1});
  EXPECT_EQ(decode_buckets(10), (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 10}));
  const std::vector<int> b = decode_buckets(256);
  EXPECT_EQ(b.front(), 1);
  EXPECT_EQ(b.back(), 256);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_LT(b[i - 1], b[i]);
  for (int n = 1; n <= 8; ++n) EXPECT_EQ(b[size_t(n - 1)], n);  // small batches stay exact
  EXPECT_EQ(decode_buckets(300).back(), 300);
  EXPECT_TRUE(decode_buckets(0).empty());
}

}  // namespace
}  // namespace mx::heuristics
