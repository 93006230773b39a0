// f32_sample (ops::sample on CUDA) against the CPU reference on fresh random logits at the real
// vocabulary size with mixed sampling parameters, plus the softmax frequencies of the GPU draw.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cuda_test_util.h"
#include "test_context.h"

namespace mx {
namespace {

struct SampleCase {
  std::vector<float> logits, params;
  std::vector<int32_t> seeds, positions;
};

std::vector<int32_t> run(const SampleCase& c, int64_t R, int64_t V, Device dev) {
  test::Mirror l = test::raw(c.logits, DType::F32, {R, V}), p = test::raw(c.params, DType::F32, {R, 4});
  test::Mirror s = test::raw(c.seeds, DType::I32, {R}), pos = test::raw(c.positions, DType::I32, {R});
  test::Mirror ids = test::raw(std::vector<int32_t>(size_t(R), -1), DType::I32, {R});
  const bool gpu = dev == Device::CUDA;
  const Status st = ops::sample(test::ctx(), {.logits = gpu ? l.gpu : l.cpu, .params = gpu ? p.gpu : p.cpu,
                                 .seeds = gpu ? s.gpu : s.cpu, .positions = gpu ? pos.gpu : pos.cpu,
                                 .ids = gpu ? ids.gpu : ids.cpu});
  EXPECT_TRUE(st.ok()) << st.message();
  std::vector<int32_t> out(static_cast<size_t>(R));
  const Tensor& t = gpu ? ids.gpu : ids.cpu;
  EXPECT_TRUE(ops::copy(Tensor(out.data(), DType::I32, {R}), t).ok());
  return out;
}

TEST(CudaF32Sample, MatchesCpuAtVocabSize) {
  MX_REQUIRE_CUDA();
  const int64_t R = 24, V = 201088;
  std::mt19937 rng(1234);
  std::normal_distribution<float> n(0.0f, 3.0f);
  SampleCase c;
  for (int64_t i = 0; i < R * V; ++i) c.logits.push_back(n(rng));
  const float params[6][4] = {{0, 1, 0, 0}, {1, 1, 0, 0}, {0.7f, 0.9f, 0, 0},
                              {1, 1, 0, 50}, {1.2f, 0.95f, 0.05f, 100}, {0.5f, 1, 0.1f, 0}};
  for (int64_t r = 0; r < R; ++r) {
    c.params.insert(c.params.end(), params[r % 6], params[r % 6] + 4);
    c.seeds.push_back(int32_t(r * 31 + 5));
    c.positions.push_back(int32_t(1000 + r));
  }
  const auto cpu = run(c, R, V, Device::CPU), gpu = run(c, R, V, Device::CUDA);
  int same = 0;
  for (int64_t r = 0; r < R; ++r) {
    same += cpu[size_t(r)] == gpu[size_t(r)];
    if (r % 6 == 0) {
      EXPECT_EQ(cpu[size_t(r)], gpu[size_t(r)]) << "greedy row " << r;
    }
  }
  // Float (GPU) vs double (CPU) sums can move a draw that lands within rounding of a bucket edge.
  EXPECT_GE(same, R - 1) << "rows where the GPU draw differs from the CPU one";
}

// Greedy rows: the row's max is found by many blocks each over a share of the row, merged with the
// lowest index winning ties, also across shares, and for a row of equal logits.
TEST(CudaF32Sample, GreedyTakesTheFirstOfTiedMaxima) {
  MX_REQUIRE_CUDA();
  const int64_t R = 3, V = 201088;
  SampleCase c;
  c.logits = test::random_floats(size_t(R * V), 77, -3.0f, 3.0f);
  for (int64_t v = 0; v < V; ++v) c.logits[size_t(2 * V + v)] = 0.5f;
  c.logits[size_t(150000)] = c.logits[size_t(7)] = 9.0f;             // row 0: ties at 7 and 150000
  c.logits[size_t(V + 200000)] = c.logits[size_t(V + 100000)] = 9.0f;  // row 1: at 100000 and 200000
  for (int64_t r = 0; r < R; ++r) {
    c.params.insert(c.params.end(), {0.0f, 1.0f, 0.0f, 0.0f});
    c.seeds.push_back(1);
    c.positions.push_back(0);
  }
  const std::vector<int32_t> want = {7, 100000, 0};
  EXPECT_EQ(run(c, R, V, Device::CUDA), want);
  EXPECT_EQ(run(c, R, V, Device::CPU), want);
}

TEST(CudaF32Sample, FrequenciesFollowTheSoftmax) {
  MX_REQUIRE_CUDA();
  const std::vector<float> l = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f};
  const int64_t R = 40000, V = 5;
  SampleCase c;
  for (int64_t r = 0; r < R; ++r) {
    c.logits.insert(c.logits.end(), l.begin(), l.end());
    c.params.insert(c.params.end(), {1, 1, 0, 0});
    c.seeds.push_back(9);
    c.positions.push_back(int32_t(r));
  }
  const auto ids = run(c, R, V, Device::CUDA);
  double z = 0;
  for (float x : l) z += std::exp(x);
  std::vector<double> f(static_cast<size_t>(V), 0.0);
  for (int32_t id : ids) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, V);
    f[size_t(id)] += 1.0 / double(R);
  }
  for (size_t i = 0; i < l.size(); ++i) EXPECT_NEAR(f[i], std::exp(l[i]) / z, 0.01) << i;  // ~4 sd
}

}  // namespace
}  // namespace mx
