// YaRN inverse frequencies and concentration against the table of GPTOSS_SPEC §4.4 (gpt-oss sizes).
#include <gtest/gtest.h>

#include "model/rope.h"

namespace mx {
namespace {

ModelConfig gpt_oss_attention() {
  ModelConfig c;
  c.head_dim = 64;
  return c;  // rope_theta 150000, yarn factor 32, L0 4096, beta 32 / 1 are the defaults
}

TEST(YarnRope, RampBoundsAreNotTruncated) {
  const YarnRope r = compute_yarn_rope(gpt_oss_attention());
  EXPECT_NEAR(r.low, 8.092779115512402, 1e-9);
  EXPECT_NEAR(r.high, 17.39802450158856, 1e-9);
  EXPECT_FLOAT_EQ(r.concentration, 1.3465735902799727f);
}

TEST(YarnRope, InverseFrequenciesMatchSpecTable) {
  const YarnRope r = compute_yarn_rope(gpt_oss_attention());
  ASSERT_EQ(r.inv_freq.size(), 32u);
  const std::pair<int, double> table[] = {{0, 1.0},           {1, 0.68904430},    {8, 5.0813273e-2},
                                          {9, 3.1705696e-2},  {12, 6.7949593e-3}, {16, 4.5648392e-4},
                                          {17, 1.2931869e-4}, {18, 3.8308812e-5}, {24, 4.0999785e-6},
                                          {31, 3.0235114e-7}};
  // The spec's values may differ from torch's pow by an ulp: 2e-6 relative.
  for (auto [i, want] : table) EXPECT_NEAR(r.inv_freq[size_t(i)] / want, 1.0, 2e-6) << "i=" << i;
}

TEST(YarnRope, TruncateRoundsTheBounds) {
  ModelConfig c = gpt_oss_attention();
  c.rope_scaling.truncate = true;
  const YarnRope r = compute_yarn_rope(c);
  EXPECT_EQ(r.low, 8.0);
  EXPECT_EQ(r.high, 18.0);
}

}  // namespace
}  // namespace mx
