// Host sampler: greedy ties, seeded reproducibility, top-k / top-p / min-p filtering.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "runtime/sampler.h"

namespace mx {
namespace {

TEST(Sampler, GreedyPicksLowestIdOnTies) {
  Sampler s({});
  std::vector<float> l = {0.1f, 2.0f, 2.0f, -1.0f};
  EXPECT_EQ(s.sample(l), 1);
}

TEST(Sampler, SeededDrawsRepeat) {
  std::vector<float> l = {1.0f, 1.1f, 0.9f, 1.05f, 0.2f};
  Sampler a({.temperature = 1.0f, .seed = 7}), b({.temperature = 1.0f, .seed = 7});
  std::set<int32_t> seen;
  for (int i = 0; i < 50; ++i) {
    const int32_t x = a.sample(l);
    EXPECT_EQ(x, b.sample(l));
    seen.insert(x);
  }
  EXPECT_GT(seen.size(), 2u);  // it does sample
}

TEST(Sampler, FiltersRestrictTheCandidates) {
  std::vector<float> l = {3.0f, 2.9f, 0.0f, -2.0f, 2.8f};
  Sampler topk({.temperature = 1.0f, .top_k = 2, .seed = 1});
  Sampler topp({.temperature = 1.0f, .top_p = 0.01f, .seed = 1});
  Sampler minp({.temperature = 1.0f, .min_p = 0.5f, .seed = 1});
  for (int i = 0; i < 100; ++i) {
    const int32_t k = topk.sample(l);
    EXPECT_TRUE(k == 0 || k == 1) << k;
    EXPECT_EQ(topp.sample(l), 0);
    const int32_t m = minp.sample(l);
    EXPECT_TRUE(m == 0 || m == 1 || m == 4) << m;
  }
}

}  // namespace
}  // namespace mx
