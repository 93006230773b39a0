// The sampler's distributions checked statistically (issue #20): ops::sample on the CPU reference
// and on CUDA draws many times from fixed logits (u = hash(seed, position) over varied seeds and
// positions) with temperature, top-k, top-p and min-p; the counts must fit the exact distribution
// (computed here by sorting, independently of the sampler) by a chi-square test at p >= 1e-6, and
// a token the filters remove must never appear.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "cuda_test_util.h"
#include "test_context.h"

namespace mx {
namespace {

constexpr int kDraws = 20000;        // per configuration: < 0.2 s on the CPU reference
constexpr double kMinPValue = 1e-6;  // fail below: a correct sampler fails one run in a million

struct Params {
  float temperature = 1, top_p = 1, min_p = 0;
  int top_k = 0;
};

// 32 logits in [-2.6, 2.8] without ties (a tie is added where a case wants one).
std::vector<float> fixture_logits() {
  std::vector<float> l;
  for (int i = 0; i < 32; ++i) l.push_back(2.0f * std::sin(1.7f * float(i)) + 0.025f * float(i));
  return l;
}

// The exact distribution of the rule in ops.h: the kept set (logit >= each threshold; ties kept),
// then softmax(l / T) over it. Fails the test if a logit or the top-p mass sits within 1e-4 of a
// threshold (the backends' float rounding could then decide).
std::vector<double> expected(const std::vector<float>& l, Params p) {
  const size_t V = l.size();
  std::vector<double> sorted(l.begin(), l.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const double m = sorted[0];
  double t = -INFINITY;
  if (p.top_k > 0 && size_t(p.top_k) < V) t = sorted[size_t(p.top_k) - 1];
  if (p.min_p > 0) {
    const double t_min_p = m + p.temperature * std::log(double(p.min_p));
    for (double x : sorted) EXPECT_GT(std::fabs(x - t_min_p), 1e-4) << "a logit at the min-p threshold";
    t = std::max(t, std::min(m, t_min_p));
  }
  auto weight = [&](double x) { return std::exp((x - m) / p.temperature); };
  if (p.top_p < 1) {  // the largest value t' with mass(l >= t') >= top_p * mass(l >= t)
    double total = 0, acc = 0;
    for (double x : sorted) total += x >= t ? weight(x) : 0;
    for (size_t i = 0; i < V && sorted[i] >= t; ++i) {
      acc += weight(sorted[i]);
      if (i + 1 < V && sorted[i + 1] == sorted[i]) continue;  // ties enter together
      EXPECT_GT(std::fabs(acc - p.top_p * total), 1e-4 * total) << "the top-p mass at a bucket edge";
      if (acc >= p.top_p * total) {
        t = sorted[i];
        break;
      }
    }
  }
  std::vector<double> q(V, 0.0);
  double z = 0;
  for (size_t i = 0; i < V; ++i)
    if (l[i] >= t) q[i] = weight(l[i]), z += q[i];
  for (double& x : q) x /= z;
  return q;
}

// Regularised upper incomplete gamma Q(a, x): series below a + 1, continued fraction above
// (Numerical Recipes 6.2). The chi-square p-value of X² with d degrees of freedom is Q(d/2, X²/2).
double gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double front = std::exp(-x + a * std::log(x) - std::lgamma(a));
  if (x < a + 1) {
    double ap = a, del = 1.0 / a, sum = del;
    for (int n = 0; n < 10000 && std::fabs(del) > std::fabs(sum) * 1e-16; ++n) ap += 1, del *= x / ap, sum += del;
    return 1.0 - sum * front;
  }
  constexpr double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b, c = b + an / c;
    d = 1 / (std::fabs(d) < tiny ? tiny : d), c = std::fabs(c) < tiny ? tiny : c;
    h *= d * c;
    if (std::fabs(d * c - 1) < 1e-16) break;
  }
  return front * h;
}

struct Fit {
  double p_value;
  int filtered_seen;  // draws of tokens with probability 0
};

// Pearson's chi-square of the draws against q, bins with an expected count below 5 pooled.
Fit chi_square(const std::vector<int32_t>& ids, const std::vector<double>& q) {
  std::vector<double> observed(q.size(), 0.0);
  Fit f{1.0, 0};
  for (int32_t id : ids) {
    if (id < 0 || size_t(id) >= q.size() || q[size_t(id)] == 0) {
      f.filtered_seen++;
      continue;
    }
    observed[size_t(id)] += 1;
  }
  const double n = double(ids.size());
  double x2 = 0, pooled_o = 0, pooled_e = 0;
  int bins = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    if (q[i] == 0) continue;
    if (n * q[i] < 5) {
      pooled_o += observed[i], pooled_e += n * q[i];
      continue;
    }
    x2 += (observed[i] - n * q[i]) * (observed[i] - n * q[i]) / (n * q[i]);
    ++bins;
  }
  if (pooled_e > 0) x2 += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e, ++bins;
  f.p_value = bins > 1 ? gamma_q(0.5 * (bins - 1), 0.5 * x2) : (x2 == 0 ? 1.0 : 0.0);
  return f;
}

// kDraws rows of the same logits; row i draws with seed 1 + i % 7 at position i / 7 + 11.
std::vector<int32_t> draw(const std::vector<float>& l, Params p, Device dev) {
  const int64_t R = kDraws, V = int64_t(l.size());
  std::vector<float> rows, params;
  std::vector<int32_t> seeds, positions;
  for (int64_t i = 0; i < R; ++i) {
    rows.insert(rows.end(), l.begin(), l.end());
    params.insert(params.end(), {p.temperature, p.top_p, p.min_p, float(p.top_k)});
    seeds.push_back(int32_t(1 + i % 7));
    positions.push_back(int32_t(i / 7 + 11));
  }
  std::vector<int32_t> ids(size_t(R), -1);
  std::vector<ops::Buffer> held;  // device copies when dev is CUDA
  auto place = [&](void* host, DType dtype, std::initializer_list<int64_t> shape) {
    const Tensor h(host, dtype, shape);
    if (dev == Device::CPU) return h;
    held.push_back(std::move(ops::Buffer::allocate(Device::CUDA, h.nbytes()).value()));
    const Tensor d = held.back().view(dtype, shape);
    EXPECT_TRUE(ops::copy(d, h).ok());
    return d;
  };
  const ops::SampleArgs a{.logits = place(rows.data(), DType::F32, {R, V}),
                          .params = place(params.data(), DType::F32, {R, 4}),
                          .seeds = place(seeds.data(), DType::I32, {R}),
                          .positions = place(positions.data(), DType::I32, {R}),
                          .ids = place(ids.data(), DType::I32, {R})};
  const Status st = ops::sample(test::ctx(), a);
  EXPECT_TRUE(st.ok()) << st.message();
  if (dev == Device::CUDA) {
    EXPECT_TRUE(ops::copy(Tensor(ids.data(), DType::I32, {R}), a.ids).ok());
  }
  return ids;
}

struct Case {
  const char* name;
  Params params;
  int kept;                 // tokens the filters keep (worked out by hand from fixture_logits)
  bool tie_at_kth = false;  // the 7th largest logit set to the 4th: top_k = 4 keeps five tokens
};
const Case kCases[] = {
    {"temperature 1", {}, 32},
    {"temperature 0.7, top-k 5", {.temperature = 0.7f, .top_k = 5}, 5},
    {"temperature 1.3, top-p 0.8", {.temperature = 1.3f, .top_p = 0.8f}, 14},
    {"min-p 0.1", {.min_p = 0.1f}, 16},
    // each filter bites: top-k keeps 10, min-p 9 of them, top-p 8
    {"temperature 0.9, top-k 10, min-p 0.4, top-p 0.9", {.temperature = 0.9f, .top_p = 0.9f, .min_p = 0.4f, .top_k = 10}, 8},
    {"temperature 2.5", {.temperature = 2.5f}, 32},
    {"top-k 4 with a tie at the 4th logit", {.top_k = 4}, 5, true},
};

std::vector<float> case_logits(const Case& c) {
  std::vector<float> l = fixture_logits();
  if (c.tie_at_kth) {
    std::vector<float> s = l;
    std::sort(s.begin(), s.end(), std::greater<>());
    l[std::find(l.begin(), l.end(), s[6]) - l.begin()] = s[3];  // the 7th largest joins the 4th
  }
  return l;
}

void expect_fits(Device dev) {
  for (const Case& c : kCases) {
    const std::vector<float> l = case_logits(c);
    const std::vector<double> q = expected(l, c.params);
    EXPECT_EQ(std::count_if(q.begin(), q.end(), [](double x) { return x > 0; }), c.kept) << c.name;
    const Fit f = chi_square(draw(l, c.params, dev), q);
    EXPECT_EQ(f.filtered_seen, 0) << c.name;
    EXPECT_GE(f.p_value, kMinPValue) << c.name;
  }
}

TEST(SampleDistribution, ChiSquarePValueIsRight) {
  EXPECT_NEAR(gamma_q(0.5, 3.841459 / 2), 0.05, 1e-6);  // chi-square tables: 1 dof at 0.05
  EXPECT_NEAR(gamma_q(5.0, 18.307038 / 2), 0.05, 1e-6);  // 10 dof
  EXPECT_NEAR(gamma_q(15.0, 70.0 / 2), 4.8549189e-5, 1e-11);  // 30 dof: e^-35 Σ_{i<15} 35^i / i!
}

TEST(SampleDistribution, CpuDrawsFitTheExactDistribution) { expect_fits(Device::CPU); }

TEST(SampleDistribution, CudaDrawsFitTheExactDistribution) {
  MX_REQUIRE_CUDA();
  expect_fits(Device::CUDA);
}

// The checker has the power to see the sampler's likely bugs in kDraws draws: temperature off by
// 10%, top-k keeping one token too many or ties dropped, top-p taking one bucket too few.
TEST(SampleDistribution, ChiSquareRejectsWrongDistributions) {
  const std::vector<float> l = fixture_logits();
  EXPECT_LT(chi_square(draw(l, {}, Device::CPU), expected(l, {.temperature = 1.1f})).p_value, kMinPValue);
  const auto top5 = draw(l, {.temperature = 0.7f, .top_k = 5}, Device::CPU);
  EXPECT_GT(chi_square(top5, expected(l, {.temperature = 0.7f, .top_k = 4})).filtered_seen, 0);
  EXPECT_LT(chi_square(top5, expected(l, {.temperature = 0.7f, .top_k = 6})).p_value, kMinPValue);
  const auto top_p = draw(l, {.temperature = 1.3f, .top_p = 0.8f}, Device::CPU);
  EXPECT_GT(chi_square(top_p, expected(l, {.temperature = 1.3f, .top_p = 0.7f})).filtered_seen, 0);
  EXPECT_LT(chi_square(top_p, expected(l, {.temperature = 1.3f, .top_p = 0.9f})).p_value, kMinPValue);
  // A strict top-4 (the tie broken by id) would never draw the later of the two tied tokens.
  const Case tie = kCases[6];
  const std::vector<float> tied = case_logits(tie);
  std::vector<float> sorted = tied;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  std::vector<double> strict = expected(tied, tie.params);
  const size_t later = size_t(std::find(tied.rbegin(), tied.rend(), sorted[3]).base() - tied.begin()) - 1;
  const double dropped = strict[later];
  strict[later] = 0;
  for (double& x : strict) x /= 1 - dropped;
  EXPECT_GT(chi_square(draw(tied, tie.params, Device::CPU), strict).filtered_seen, 0);
}

}  // namespace
}  // namespace mx
