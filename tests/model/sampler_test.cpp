// Host sampler: greedy ties, seeded reproducibility, top-k / top-p / min-p filtering.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
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

// Draw frequencies against the softmax (temperature 0.8, no filter: the unsorted path with its
// blocked inverse CDF), over a row longer than one block of weights.
TEST(Sampler, FrequenciesFollowTheSoftmax) {
  std::vector<float> l(1500, -30.0f);  // far below: ~e^-40 each
  const std::vector<std::pair<int, float>> hot = {{3, 1.0f}, {700, 0.2f}, {1100, 1.5f}, {1499, 0.0f}};
  for (auto [i, v] : hot) l[size_t(i)] = v;
  const float T = 0.8f;
  double z = 0;
  for (auto [i, v] : hot) z += std::exp(double(v) / T);
  Sampler s({.temperature = T, .seed = 11});
  std::vector<int> count(l.size());
  const int draws = 40000;
  for (int d = 0; d < draws; ++d) count[size_t(s.sample(l))]++;
  for (auto [i, v] : hot) {
    const double p = std::exp(double(v) / T) / z, got = double(count[size_t(i)]) / draws;
    EXPECT_NEAR(got, p, 4 * std::sqrt(p * (1 - p) / draws) + 1e-3) << "token " << i;
  }
}

// Top-p and min-p at the real vocabulary size: every draw is in the set that a full sort of the
// softmax gives, and the most likely token of the set is drawn. A peaked row (the top-p set is a
// few tokens: sorted) and a flat one (most of the vocabulary: a weight threshold instead).
TEST(Sampler, TopPAndMinPAtVocabularySize) {
  const size_t V = 201088;
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 2.0f), small(0.0f, 0.3f);
  std::vector<float> peaked(V), flat(V);
  for (float& x : peaked) x = n(rng);
  for (int i = 0; i < 12; ++i) peaked[size_t(rng() % V)] = 17.0f + 0.25f * float(i);  // ~99% of the mass
  for (float& x : flat) x = small(rng);
  struct Case {
    const std::vector<float>* l;
    float top_p, min_p;
    int draws;
  };
  const Case cases[] = {{&peaked, 0.9f, 0.0f, 500}, {&peaked, 0.6f, 0.0f, 500}, {&peaked, 0.97f, 0.02f, 500},
                        {&flat, 0.5f, 0.0f, 100}, {&flat, 0.9f, 0.5f, 100}};
  for (const Case& c : cases) {
    const std::vector<float>& l = *c.l;
    // The reference set: descending softmax, smallest prefix with mass >= top_p, then min-p.
    std::vector<int32_t> ids(V);
    std::iota(ids.begin(), ids.end(), 0);
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
      return l[size_t(a)] > l[size_t(b)] || (l[size_t(a)] == l[size_t(b)] && a < b);
    });
    const double m = l[size_t(ids[0])];
    double z = 0;
    for (float x : l) z += std::exp(double(x) - m);
    std::set<int32_t> allowed;
    double cum = 0;
    for (size_t k = 0; k < V && (k == 0 || cum < c.top_p); ++k) {
      const double w = std::exp(double(l[size_t(ids[k])]) - m);
      if (w < c.min_p) break;
      allowed.insert(ids[k]);
      cum += w / z;
    }
    Sampler s({.temperature = 1.0f, .top_p = c.top_p, .min_p = c.min_p, .seed = 9});
    std::set<int32_t> seen;
    for (int d = 0; d < c.draws; ++d) {
      const int32_t t = s.sample(l);
      EXPECT_TRUE(allowed.count(t)) << "token " << t << " outside the set, top_p " << c.top_p << " min_p " << c.min_p;
      seen.insert(t);
    }
    if (allowed.size() < 50) {
      EXPECT_TRUE(seen.count(ids[0])) << "the most likely token was never drawn";
    }
    EXPECT_GE(seen.size(), std::min<size_t>(allowed.size(), 3)) << "top_p " << c.top_p;
  }
}

}  // namespace
}  // namespace mx
