// CUDA dense ops (embed, gather_rows, rmsnorm, linear: GEMV and cuBLASLt paths) against the CPU
// reference on the same seeded bf16-rounded inputs, at gpt-oss sizes and odd ones.
#include <gtest/gtest.h>

#include "cuda_test_util.h"

namespace mx::test {
namespace {

// A linear output in bf16 carries a rounding error of <= 2^-9 relative (NMSE ~1e-6); FP32
// accumulation-order differences are far below. 1e-5 leaves 10x margin and still catches a
// wrong row, lane or bias (the corrupted-output case below gives ~1e-3).
constexpr double kLinearNmse = 1e-5;

TEST(CudaDense, EmbedAndGatherRowsCopyBitwise) {
  MX_REQUIRE_CUDA();
  const int64_t V = 1000, D = 2880, T = 7;
  Mirror table = bf16_weights(random_floats(size_t(V * D), 1), {V, D});
  Mirror ids = raw(std::vector<int32_t>{0, 999, 5, 5, 123, 998, 1}, DType::I32, {T});
  Mirror out_e = act(random_floats(size_t(T * D), 2), {T, D});
  ASSERT_TRUE(ops::embed({.ids = ids.gpu, .table = table.gpu, .out = out_e.gpu}).ok());
  ASSERT_TRUE(ops::embed({.ids = ids.cpu, .table = table.cpu, .out = out_e.cpu}).ok());
  EXPECT_EQ(download(out_e.gpu), host_floats(out_e));

  Mirror rows = raw(std::vector<int32_t>{6, 0, 3}, DType::I32, {3});
  Mirror out_g = act(random_floats(size_t(3 * D), 3), {3, D});
  ASSERT_TRUE(ops::gather_rows({.x = out_e.gpu, .rows = rows.gpu, .out = out_g.gpu}).ok());
  ASSERT_TRUE(ops::gather_rows({.x = out_e.cpu, .rows = rows.cpu, .out = out_g.cpu}).ok());
  EXPECT_EQ(download(out_g.gpu), host_floats(out_g));
}

TEST(CudaDense, RmsNormMatchesReference) {
  MX_REQUIRE_CUDA();
  for (int64_t D : {2880, 100, 7}) {
    const int64_t T = 3;
    Mirror x = act(random_floats(size_t(T * D), 10 + D, -3.0f, 3.0f), {T, D});
    Mirror w = bf16_weights(random_floats(size_t(D), 20 + D, 0.5f, 2.0f), {D});
    Mirror out = act(random_floats(size_t(T * D), 30), {T, D});
    ASSERT_TRUE(ops::rmsnorm({.x = x.gpu, .weight = w.gpu, .out = out.gpu}).ok());
    ASSERT_TRUE(ops::rmsnorm({.x = x.gpu, .weight = w.gpu, .out = x.gpu}).ok());  // in place
    ASSERT_TRUE(ops::rmsnorm({.x = x.cpu, .weight = w.cpu, .out = out.cpu}).ok());
    // bf16 output: one rounding, 2^-8 relative at most, plus float-order noise.
    EXPECT_TRUE(all_close(download(out.gpu), host_floats(out), 1e-6, 8e-3)) << "D=" << D;
    EXPECT_EQ(download(x.gpu), download(out.gpu)) << "in-place result differs, D=" << D;
  }
}

struct LinearCase {
  int64_t T, N, Kin;
  bool bias, f32_out;
  ops::Accumulate accumulate;
};

// Runs one linear on both backends; returns (gpu, cpu) outputs.
std::pair<std::vector<float>, std::vector<float>> run_linear(const LinearCase& c, uint64_t seed) {
  Mirror x = act(random_floats(size_t(c.T * c.Kin), seed, -2.0f, 2.0f), {c.T, c.Kin});
  Mirror w = bf16_weights(random_floats(size_t(c.N * c.Kin), seed + 1, -0.05f, 0.05f), {c.N, c.Kin});
  Mirror b = bf16_weights(random_floats(size_t(c.N), seed + 2), {c.N});
  const std::vector<float> init = random_floats(size_t(c.T * c.N), seed + 3);
  Mirror out = c.f32_out ? raw(init, DType::F32, {c.T, c.N}) : act(init, {c.T, c.N});
  const Tensor no_bias;
  EXPECT_TRUE(ops::linear({.x = x.gpu, .w = w.gpu, .bias = c.bias ? b.gpu : no_bias, .out = out.gpu,
                           .accumulate = c.accumulate})
                  .ok());
  EXPECT_TRUE(ops::linear({.x = x.cpu, .w = w.cpu, .bias = c.bias ? b.cpu : no_bias, .out = out.cpu,
                           .accumulate = c.accumulate})
                  .ok());
  return {download(out.gpu), host_floats(out)};
}

TEST(CudaDense, LinearMatchesReferenceAtGptOssAndOddSizes) {
  MX_REQUIRE_CUDA();
  using A = ops::Accumulate;
  const LinearCase cases[] = {
      {1, 5120, 2880, true, false, A::No},        // qkv, GEMV
      {2, 5120, 2880, true, false, A::No},        // qkv, GEMV at its token limit
      {4, 5120, 2880, true, false, A::No},        // qkv, cuBLASLt
      {1, 2880, 4096, true, false, A::IntoOut},   // o_proj + residual, GEMV
      {3, 128, 2880, true, false, A::No},         // router
      {2, 37, 72, false, true, A::IntoOut},       // odd, f32 out
      {5, 2880, 4096, true, false, A::IntoOut},   // cuBLASLt, accumulate
      {64, 5120, 2880, true, false, A::No},       // cuBLASLt prefill
      {9, 37, 100, false, true, A::No},           // cuBLASLt odd, f32 out
      {2, 33, 100, true, false, A::No},           // Kin % 8 != 0: cuBLASLt even at small T
  };
  uint64_t seed = 100;
  for (const LinearCase& c : cases) {
    const auto [gpu, cpu] = run_linear(c, seed += 10);
    EXPECT_LT(nmse(gpu, cpu), kLinearNmse) << "T=" << c.T << " N=" << c.N << " Kin=" << c.Kin;
  }
}

TEST(CudaDense, LmHeadGemvF32Logits) {
  MX_REQUIRE_CUDA();
  const auto [gpu, cpu] = run_linear({1, 201088, 2880, false, true, ops::Accumulate::No}, 7);
  EXPECT_LT(nmse(gpu, cpu), 1e-7);  // f32 out: only the FP32 accumulation order differs
}

TEST(CudaDense, ComparisonCatchesCorruptedOutput) {
  MX_REQUIRE_CUDA();
  const auto [gpu, cpu] = run_linear({1, 2880, 2880, true, false, ops::Accumulate::No}, 9);
  EXPECT_LT(nmse(gpu, cpu), kLinearNmse);
  EXPECT_GT(nmse(corrupted(gpu), cpu), kLinearNmse);
}

}  // namespace
}  // namespace mx::test
