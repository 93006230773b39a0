// ops::sample on the CPU reference: greedy ties, the top-k / top-p / min-p sets, frequencies of
// the seeded draw against the softmax, and reproducibility per (seed, position).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <set>
#include <vector>

#include "kernels/ops.h"
#include "test_context.h"

namespace mx {
namespace {

// Samples `n` rows that all hold `logits`, positions 0..n-1, the given params.
std::vector<int32_t> draw(const std::vector<float>& logits, int n, std::array<float, 4> params, int32_t seed = 3) {
  const int64_t V = int64_t(logits.size());
  std::vector<float> rows, p;
  std::vector<int32_t> seeds(static_cast<size_t>(n), seed), pos(static_cast<size_t>(n)), ids(static_cast<size_t>(n), -1);
  for (int i = 0; i < n; ++i) {
    rows.insert(rows.end(), logits.begin(), logits.end());
    p.insert(p.end(), params.begin(), params.end());
    pos[size_t(i)] = i;
  }
  const Status st = ops::sample(test::ctx(), {.logits = Tensor(rows.data(), DType::F32, {n, V}),
                                 .params = Tensor(p.data(), DType::F32, {n, 4}),
                                 .seeds = Tensor(seeds.data(), DType::I32, {n}),
                                 .positions = Tensor(pos.data(), DType::I32, {n}),
                                 .ids = Tensor(ids.data(), DType::I32, {n})});
  EXPECT_TRUE(st.ok()) << st.message();
  return ids;
}

std::vector<double> frequencies(const std::vector<int32_t>& ids, size_t V) {
  std::vector<double> f(V, 0.0);
  for (int32_t id : ids) f[size_t(id)] += 1.0 / double(ids.size());
  return f;
}

TEST(Sample, GreedyTakesTheLowestIndexOfTheMax) {
  EXPECT_EQ(draw({0.5f, 2.0f, 2.0f, -1.0f}, 4, {0, 1, 0, 0}), (std::vector<int32_t>{1, 1, 1, 1}));
}

TEST(Sample, FrequenciesFollowTheSoftmax) {
  const std::vector<float> l = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f};
  const auto f = frequencies(draw(l, 40000, {1, 1, 0, 0}), l.size());
  double z = 0;
  for (float x : l) z += std::exp(x);
  for (size_t i = 0; i < l.size(); ++i) EXPECT_NEAR(f[i], std::exp(l[i]) / z, 0.01) << i;  // ~4 sd
  // Temperature 2 flattens: p ∝ exp(l/2).
  const auto f2 = frequencies(draw(l, 40000, {2, 1, 0, 0}), l.size());
  double z2 = 0;
  for (float x : l) z2 += std::exp(x / 2);
  for (size_t i = 0; i < l.size(); ++i) EXPECT_NEAR(f2[i], std::exp(l[i] / 2) / z2, 0.01) << i;
}

TEST(Sample, FiltersKeepTheRightSets) {
  // Probabilities 0.5, 0.3, 0.2 (logits are their logs).
  const std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  auto seen = [&](std::array<float, 4> p) {
    const auto ids = draw(l, 3000, p);
    return std::set<int32_t>(ids.begin(), ids.end());
  };
  EXPECT_EQ(seen({1, 1, 0, 2}), (std::set<int32_t>{0, 1}));     // top_k = 2
  EXPECT_EQ(seen({1, 0.6f, 0, 0}), (std::set<int32_t>{0, 1}));  // 0.5 < 0.6 <= 0.8
  EXPECT_EQ(seen({1, 0.5f, 0, 0}), (std::set<int32_t>{0}));     // the top token already holds 0.5
  EXPECT_EQ(seen({1, 1, 0.5f, 0}), (std::set<int32_t>{0, 1}));  // p >= 0.25
  EXPECT_EQ(seen({1, 1, 0, 0}), (std::set<int32_t>{0, 1, 2}));
  // top-k = 2 then top-p over the two kept (0.625, 0.375): 0.7 keeps both, 0.6 keeps one.
  EXPECT_EQ(seen({1, 0.7f, 0, 2}), (std::set<int32_t>{0, 1}));
  EXPECT_EQ(seen({1, 0.6f, 0, 2}), (std::set<int32_t>{0}));
}

TEST(Sample, DrawDependsOnlyOnSeedAndPosition) {
  const std::vector<float> l = {0.0f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f};
  EXPECT_EQ(draw(l, 200, {1, 1, 0, 0}, 7), draw(l, 200, {1, 1, 0, 0}, 7));
  EXPECT_NE(draw(l, 200, {1, 1, 0, 0}, 7), draw(l, 200, {1, 1, 0, 0}, 8));
}

}  // namespace
}  // namespace mx
