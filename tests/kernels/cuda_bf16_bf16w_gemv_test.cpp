// CUDA dense ops (embed, gather_rows, rmsnorm, linear: GEMV and cuBLASLt paths, with and without
// the input RMSNorm) against the CPU reference on the same seeded bf16-rounded inputs, at gpt-oss
// sizes and odd ones; every linear checks the route it took (GEMV or cuBLASLt by T, linear_route).
// Suites by kernel: CudaBf16Bf16wGemv (and cuBLASLt above its bound), CudaBf16Mxfp4wGemv (with
// bf16_mxfp4w_gemv_mma), CudaBf16Bf16wRmsnorm, CudaBf16GatherRows, CudaMxfp4RowsToBf16.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "cuda_test_util.h"
#include "test_context.h"

namespace mx::test {
namespace {

// A linear output in bf16 carries a rounding error of <= 2^-9 relative (NMSE ~1e-6); FP32
// accumulation-order differences are far below. 1e-5 leaves 10x margin and still catches a
// wrong row, lane or bias (the corrupted-output case below gives ~1e-3).
constexpr double kLinearNmse = 1e-5;
// The GEMVs' last token counts (heuristics.h): the cases on either side of them.
constexpr int64_t kGemvMax = heuristics::kLinearGemvMaxTokens;
constexpr int64_t kMxfp4GemvMax = heuristics::kLinearMxfp4GemvMaxTokens;

// The CUDA routes of one GPU call.
std::vector<std::string> routes_of(const std::function<Status()>& call) {
  ops::RouteRecorder rec(test::ctx());
  EXPECT_TRUE(call().ok());
  return cuda_routes(rec);
}

TEST(CudaBf16GatherRows, EmbedAndGatherRowsCopyBitwise) {
  MX_REQUIRE_CUDA();
  const int64_t V = 1000, D = 2880, T = 7;
  Mirror table = bf16_weights(random_floats(size_t(V * D), 1), {V, D});
  Mirror ids = raw(std::vector<int32_t>{0, 999, 5, 5, 123, 998, 1}, DType::I32, {T});
  Mirror out_e = act(random_floats(size_t(T * D), 2), {T, D});
  ASSERT_TRUE(ops::embed(test::ctx(), {.ids = ids.gpu, .table = table.gpu, .out = out_e.gpu}).ok());
  ASSERT_TRUE(ops::embed(test::ctx(), {.ids = ids.cpu, .table = table.cpu, .out = out_e.cpu}).ok());
  EXPECT_EQ(download(out_e.gpu), host_floats(out_e));

  Mirror rows = raw(std::vector<int32_t>{6, 0, 3}, DType::I32, {3});
  Mirror out_g = act(random_floats(size_t(3 * D), 3), {3, D});
  ASSERT_TRUE(ops::gather_rows(test::ctx(), {.x = out_e.gpu, .rows = rows.gpu, .out = out_g.gpu}).ok());
  ASSERT_TRUE(ops::gather_rows(test::ctx(), {.x = out_e.cpu, .rows = rows.cpu, .out = out_g.cpu}).ok());
  EXPECT_EQ(download(out_g.gpu), host_floats(out_g));
}

// Rows kept in registers (bf16 weight, D % 8 == 0, up to 8192 values) and the generic kernel (the
// other widths), at a prompt's and a decode batch's token counts.
TEST(CudaBf16Bf16wRmsnorm, RmsNormMatchesReference) {
  MX_REQUIRE_CUDA();
  const std::pair<int64_t, int64_t> shapes[] = {{3, 2880}, {64, 2880}, {3, 100}, {3, 7}, {2, 8192}, {2, 8200}, {5, 8}};
  for (const auto& [T, D] : shapes) {
    Mirror x = act(random_floats(size_t(T * D), 10 + D, -3.0f, 3.0f), {T, D});
    Mirror w = bf16_weights(random_floats(size_t(D), 20 + D, 0.5f, 2.0f), {D});
    Mirror out = act(random_floats(size_t(T * D), 30), {T, D});
    ASSERT_TRUE(ops::rmsnorm(test::ctx(), {.x = x.gpu, .weight = w.gpu, .out = out.gpu}).ok());
    ASSERT_TRUE(ops::rmsnorm(test::ctx(), {.x = x.gpu, .weight = w.gpu, .out = x.gpu}).ok());  // in place
    ASSERT_TRUE(ops::rmsnorm(test::ctx(), {.x = x.cpu, .weight = w.cpu, .out = out.cpu}).ok());
    // bf16 output: one rounding, 2^-8 relative at most, plus float-order noise.
    EXPECT_TRUE(all_close(download(out.gpu), host_floats(out), 1e-6, 8e-3)) << "T=" << T << " D=" << D;
    EXPECT_EQ(download(x.gpu), download(out.gpu)) << "in-place result differs, T=" << T << " D=" << D;
  }
}

struct LinearCase {
  int64_t T, N, Kin;
  bool bias, f32_out;
  ops::Accumulate accumulate;
};

// Runs one linear on both backends, checks the GPU's route; returns (gpu, cpu) outputs.
std::pair<std::vector<float>, std::vector<float>> run_linear(const LinearCase& c, uint64_t seed) {
  Mirror x = act(random_floats(size_t(c.T * c.Kin), seed, -2.0f, 2.0f), {c.T, c.Kin});
  Mirror w = bf16_weights(random_floats(size_t(c.N * c.Kin), seed + 1, -0.05f, 0.05f), {c.N, c.Kin});
  Mirror b = bf16_weights(random_floats(size_t(c.N), seed + 2), {c.N});
  const std::vector<float> init = random_floats(size_t(c.T * c.N), seed + 3);
  Mirror out = c.f32_out ? raw(init, DType::F32, {c.T, c.N}) : act(init, {c.T, c.N});
  const Tensor no_bias;
  const std::vector<std::string> routes = routes_of([&] {
    return ops::linear(test::ctx(), 
        {.x = x.gpu, .w = w.gpu, .bias = c.bias ? b.gpu : no_bias, .out = out.gpu, .accumulate = c.accumulate});
  });
  EXPECT_EQ(routes, std::vector<std::string>{linear_route({.T = c.T, .Kin = c.Kin})})
      << "T=" << c.T << " Kin=" << c.Kin;
  EXPECT_TRUE(ops::linear(test::ctx(), {.x = x.cpu, .w = w.cpu, .bias = c.bias ? b.cpu : no_bias, .out = out.cpu,
                           .accumulate = c.accumulate})
                  .ok());
  return {download(out.gpu), host_floats(out)};
}

TEST(CudaBf16Bf16wGemv, LinearMatchesReferenceAtGptOssAndOddSizes) {
  MX_REQUIRE_CUDA();
  using A = ops::Accumulate;
  const LinearCase cases[] = {
      {1, 5120, 2880, true, false, A::No},        // qkv, GEMV
      {2, 5120, 2880, true, false, A::No},        // qkv, GEMV
      {kGemvMax, 5120, 2880, true, false, A::No},      // qkv, GEMV at its last T
      {kGemvMax + 1, 5120, 2880, true, false, A::No},  // qkv, cuBLASLt
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

// MXFP4 dense weights (--mxfp4-layers): bf16_mxfp4w_gemv at T = 1, bf16_mxfp4w_gemv_mma up to
// kMxfp4GemvMax, decoded chunks + cuBLASLt above (the route checked), against the CPU reference
// decoding the same blocks. The same bf16 output rounding as the BF16 paths: kLinearNmse holds.
std::pair<std::vector<float>, std::vector<float>> run_mxfp4_linear(const LinearCase& c, bool norm, uint64_t seed) {
  Mirror x = act(random_floats(size_t(c.T * c.Kin), seed, -2.0f, 2.0f), {c.T, c.Kin});
  const Mxfp4Mirror w = mxfp4_weights(random_floats(size_t(c.N * c.Kin), seed + 1, -0.05f, 0.05f), c.N, c.Kin);
  Mirror b = bf16_weights(random_floats(size_t(c.N), seed + 2), {c.N});
  Mirror nw = bf16_weights(random_floats(size_t(c.Kin), seed + 4, 0.5f, 2.0f), {c.Kin});
  const std::vector<float> init = random_floats(size_t(c.T * c.N), seed + 3);
  Mirror out = c.f32_out ? raw(init, DType::F32, {c.T, c.N}) : act(init, {c.T, c.N});
  const Tensor none;
  ops::RouteRecorder rec(test::ctx());
  for (const bool gpu : {true, false}) {
    const Status st = ops::linear(test::ctx(), {.x = gpu ? x.gpu : x.cpu,
                                   .w = gpu ? w.blocks.gpu : w.blocks.cpu,
                                   .bias = c.bias ? (gpu ? b.gpu : b.cpu) : none,
                                   .out = gpu ? out.gpu : out.cpu,
                                   .accumulate = c.accumulate,
                                   .norm = {.weight = norm ? (gpu ? nw.gpu : nw.cpu) : none},
                                   .w_scales = gpu ? w.scales.gpu : w.scales.cpu});
    EXPECT_TRUE(st.ok()) << st.message();
  }
  const std::string want = linear_route({.T = c.T, .Kin = c.Kin, .mxfp4 = true, .norm = norm});
  EXPECT_EQ(cuda_routes(rec), std::vector<std::string>{want}) << "T=" << c.T << " Kin=" << c.Kin;
  return {download(out.gpu), host_floats(out)};
}

TEST(CudaBf16Mxfp4wGemv, Mxfp4LinearMatchesReference) {
  MX_REQUIRE_CUDA();
  using A = ops::Accumulate;
  struct Case {
    LinearCase c;
    bool norm;
  };
  const Case cases[] = {
      {{1, 5120, 2880, true, false, A::No}, true},       // qkv with the attention norm, FP32 GEMV
      {{2, 5120, 2880, true, false, A::No}, false},      // tensor-core GEMV from here
      {{3, 5120, 2880, true, false, A::No}, true},
      {{4, 5120, 2880, true, false, A::No}, true},
      {{kMxfp4GemvMax, 5120, 2880, true, false, A::No}, true},  // the tensor-core GEMV's last T
      {{1, 2880, 4096, true, false, A::IntoOut}, false}, // o_proj + residual
      {{4, 2880, 4096, true, false, A::IntoOut}, false},
      {{7, 2880, 4096, true, false, A::IntoOut}, false},
      {{2, 128, 2880, true, false, A::No}, false},       // router
      {{3, 37, 96, false, true, A::IntoOut}, false},     // odd rows (a partial tile), f32 out
      {{1, 33, 32, true, true, A::No}, true},            // one block per row
      {{5, 33, 32, true, true, A::No}, true},            // one block per row, one quad, 3 idle warps
      {{kMxfp4GemvMax + 1, 5120, 2880, true, false, A::No}, true},  // decoded chunk + cuBLASLt (rmsnorm kernel first)
      {{kMxfp4GemvMax + 1, 12000, 2880, true, false, A::No}, false},  // two decoded chunks, each its bias slice
      {{64, 2880, 4096, true, false, A::IntoOut}, false},// prefill, accumulate
      {{kMxfp4GemvMax + 1, 37, 96, false, true, A::No}, false},  // cuBLASLt odd, f32 out
  };
  uint64_t seed = 1300;
  for (const Case& k : cases) {
    const auto [gpu, cpu] = run_mxfp4_linear(k.c, k.norm, seed += 10);
    EXPECT_LT(nmse(gpu, cpu), kLinearNmse) << "T=" << k.c.T << " N=" << k.c.N << " Kin=" << k.c.Kin
                                           << (k.norm ? " norm" : "");
  }
  // The comparison can fail: a corrupted output is far outside the bound.
  const auto [gpu, cpu] = run_mxfp4_linear(cases[0].c, true, 77);
  EXPECT_GT(nmse(corrupted(gpu), cpu), kLinearNmse);
}

// lm_head in MXFP4: the GEMVs at T = 1 and 6 (persistent blocks, many tiles each) and, at T = 12,
// cuBLASLt over 18 decoded chunks of 11,648 rows (the last one partial) writing column slices of
// the f32 logits.
TEST(CudaBf16Mxfp4wGemv, Mxfp4LmHeadF32Logits) {
  MX_REQUIRE_CUDA();
  for (const int64_t T : {1, 6, 12}) {
    const auto [gpu, cpu] = run_mxfp4_linear({T, 201088, 2880, false, true, ops::Accumulate::No}, false, 7 + T);
    EXPECT_LT(nmse(gpu, cpu), 1e-7) << "T=" << T;  // f32 out: only the FP32 accumulation order differs
  }
}

TEST(CudaMxfp4RowsToBf16, Mxfp4EmbedDecodesRowsBitwise) {
  MX_REQUIRE_CUDA();
  const int64_t V = 1000, D = 2880, T = 6;
  const Mxfp4Mirror table = mxfp4_weights(random_floats(size_t(V * D), 41, -3.0f, 3.0f), V, D);
  Mirror ids = raw(std::vector<int32_t>{0, 999, 5, 5, 123, 998}, DType::I32, {T});
  Mirror out = act(random_floats(size_t(T * D), 42), {T, D});
  ASSERT_TRUE(ops::embed(test::ctx(), {.ids = ids.gpu, .table = table.blocks.gpu, .out = out.gpu, .table_scales = table.scales.gpu}).ok());
  ASSERT_TRUE(ops::embed(test::ctx(), {.ids = ids.cpu, .table = table.blocks.cpu, .out = out.cpu, .table_scales = table.scales.cpu}).ok());
  EXPECT_EQ(download(out.gpu), host_floats(out));  // every MXFP4 value is a BF16 value
}

TEST(CudaBf16Bf16wGemv, LmHeadGemvF32Logits) {
  MX_REQUIRE_CUDA();
  const auto [gpu, cpu] = run_linear({1, 201088, 2880, false, true, ops::Accumulate::No}, 7);
  EXPECT_LT(nmse(gpu, cpu), 1e-7);  // f32 out: only the FP32 accumulation order differs
}

TEST(CudaBf16Bf16wGemv, ComparisonCatchesCorruptedOutput) {
  MX_REQUIRE_CUDA();
  const auto [gpu, cpu] = run_linear({1, 2880, 2880, true, false, ops::Accumulate::No}, 9);
  EXPECT_LT(nmse(gpu, cpu), kLinearNmse);
  EXPECT_GT(nmse(corrupted(gpu), cpu), kLinearNmse);
}

// linear with an input RMSNorm (x is the residual stream): the fused GEMV up to kGemvMax, the
// rmsnorm kernel + cuBLASLt above (the route checked); the CPU normalises in f32, the GPU rounds x'
// to bf16 first (~2^-9 relative per element, NMSE ~1e-6 of the output, under kLinearNmse).
struct NormCase {
  int64_t T, N, Kin;
  bool f32_out = false;
};

struct NormRun {
  std::vector<float> gpu, cpu, gpu_unfused;
};

NormRun run_norm_linear(const NormCase& c, uint64_t seed) {
  Mirror x = act(random_floats(size_t(c.T * c.Kin), seed, -3.0f, 3.0f), {c.T, c.Kin});
  Mirror nw = bf16_weights(random_floats(size_t(c.Kin), seed + 1, 0.5f, 2.0f), {c.Kin});
  Mirror w = bf16_weights(random_floats(size_t(c.N * c.Kin), seed + 2, -0.05f, 0.05f), {c.N, c.Kin});
  Mirror b = bf16_weights(random_floats(size_t(c.N), seed + 3), {c.N});
  auto out_of = [&](const std::vector<float>& v) { return c.f32_out ? raw(v, DType::F32, {c.T, c.N}) : act(v, {c.T, c.N}); };
  Mirror out = out_of(random_floats(size_t(c.T * c.N), seed + 4));
  Mirror xn = act(std::vector<float>(size_t(c.T * c.Kin)), {c.T, c.Kin});
  Mirror ref = out_of(std::vector<float>(size_t(c.T * c.N)));
  const std::vector<std::string> routes = routes_of(
      [&] { return ops::linear(test::ctx(), {.x = x.gpu, .w = w.gpu, .bias = b.gpu, .out = out.gpu, .norm = {.weight = nw.gpu}}); });
  EXPECT_EQ(routes, std::vector<std::string>{linear_route({.T = c.T, .Kin = c.Kin, .norm = true})})
      << "T=" << c.T << " Kin=" << c.Kin;
  EXPECT_TRUE(ops::linear(test::ctx(), {.x = x.cpu, .w = w.cpu, .bias = b.cpu, .out = out.cpu, .norm = {.weight = nw.cpu}}).ok());
  // The unfused CUDA ops: rmsnorm kernel, then linear.
  EXPECT_TRUE(ops::rmsnorm(test::ctx(), {.x = x.gpu, .weight = nw.gpu, .out = xn.gpu}).ok());
  EXPECT_TRUE(ops::linear(test::ctx(), {.x = xn.gpu, .w = w.gpu, .bias = b.gpu, .out = ref.gpu}).ok());
  return {download(out.gpu), host_floats(out), download(ref.gpu)};
}

TEST(CudaBf16Bf16wGemv, LinearWithInputNormMatchesReference) {
  MX_REQUIRE_CUDA();
  const NormCase cases[] = {
      {1, 5120, 2880},  // attention norm + qkv, fused GEMV
      {2, 5120, 2880},  // fused GEMV
      {2, 37, 72},      // odd sizes, fused GEMV
      {3, 37, 72},      // odd sizes, fused GEMV
      {1, 33, 8},       // one 16-byte chunk per row
      {kGemvMax, 5120, 2880},      // fused GEMV at its last T
      {kGemvMax + 1, 5120, 2880},  // rmsnorm + cuBLASLt
      {64, 5120, 2880}, // prefill
      {kGemvMax + 1, 40, 64, true},  // f32 out: the bias rows written as f32 by the rmsnorm kernel, 8 at a time
      {kGemvMax + 2, 37, 72, true},  // f32 out, a bias length that is not a multiple of 8
  };
  uint64_t seed = 500;
  for (const NormCase& c : cases) {
    const NormRun r = run_norm_linear(c, seed += 10);
    EXPECT_LT(nmse(r.gpu, r.cpu), kLinearNmse) << "T=" << c.T << " N=" << c.N << " Kin=" << c.Kin;
    // Against the unfused CUDA ops: the same bf16 x' unless a sum of squares differs in its last
    // bit (FP32 summation order) and flips a rounding (one flipped element of 2880: NMSE ~5e-9);
    // 1e-7 is 100x below the CPU bound and 10^4 below a corrupted output.
    EXPECT_LT(nmse(r.gpu, r.gpu_unfused), 1e-7) << "fused vs unfused, T=" << c.T << " Kin=" << c.Kin;
  }
}

TEST(CudaBf16Bf16wGemv, InputNormComparisonCatchesCorruptedOutput) {
  MX_REQUIRE_CUDA();
  const NormRun r = run_norm_linear({1, 5120, 2880}, 77);
  EXPECT_LT(nmse(r.gpu, r.cpu), kLinearNmse);
  EXPECT_GT(nmse(corrupted(r.gpu), r.cpu), kLinearNmse);
  EXPECT_GT(nmse(corrupted(r.gpu), r.gpu_unfused), 1e-7);
}

}  // namespace
}  // namespace mx::test
