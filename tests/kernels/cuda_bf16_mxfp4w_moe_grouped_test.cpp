// The many-token CUDA MoE (cuda::moe_grouped: device routing, grouped MXFP4 GEMMs, finalize)
// against the CPU reference: gpt-oss-120b sizes at T = 2048, odd small sizes, idle experts, all
// tokens on one expert, both sides of the dispatch threshold (each call through ops::moe checks
// the route it took), in both activation modes (BF16, FP8). The timing sweep that set the
// threshold: `bench_sweeps moe_grouped`. Suites by kernel family: CudaBf16Mxfp4wMoeGrouped (the
// BF16 GEMMs: bf16_mxfp4w_moe_thin and _grouped on mma.sync, sm90_bf16_mxfp4w_moe_grouped on
// wgmma), CudaE4m3Mxfp4wMoeGrouped (FP8 activations), CudaBf16Mxfp4wMoeGroupedDispatch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>

#include "cuda_test_util.h"
#include "kernels/heuristics.h"
#ifdef MXSERVE_HAVE_CUDA
#include "kernels/cuda/cuda_ops.h"
#include "test_context.h"
#endif

namespace mx::test {
namespace {

// The grouped path rounds the SwiGLU output to BF16 before the down GEMM (~2^-9 relative per
// element: NMSE ~1e-6 of the residual) and sums in another order; 1e-4 still catches one wrong
// row, lane or tile (the corrupted output below reads ~1e-3).
constexpr double kGroupedNmse = 1e-4;
// The MoE GEMVs' last token count (heuristics.h); above it ops::moe takes the grouped path.
constexpr int64_t kThreshold = heuristics::kMoeGemvMaxTokens;

struct Shape {
  int64_t T;
  int D, F, E, K;
};

// A GPU tensor filled on the device by fill_random (seeded), with a host copy for the reference
// unless `host` is false (1.7 GB of 120b experts are made in milliseconds this way).
Mirror device_random(DType dtype, std::initializer_list<int64_t> shape, uint64_t seed, int lo, int hi, bool host) {
  Mirror m;
  const Tensor probe(nullptr, dtype, shape, Device::CUDA);
  m.dev = std::move(ops::Buffer::allocate(Device::CUDA, probe.nbytes()).value());
  m.gpu = m.dev.view(dtype, shape);
  EXPECT_TRUE(ops::fill_random(test::ctx(), {.out = m.gpu, .seed = seed, .scale = 1.0f, .byte_lo = lo, .byte_hi = hi}).ok());
  if (host) {
    m.host.resize(probe.nbytes());
    m.cpu = Tensor(m.host.data(), dtype, shape, Device::CPU);
    EXPECT_TRUE(ops::copy(m.cpu, m.gpu).ok());
  }
  return m;
}

// One layer's MXFP4 experts; scales 2^-9..2^-5 so that gate/up values reach the ±7 clamps.
struct Experts {
  Mirror gu_b, gu_s, gu_bias, dn_b, dn_s, dn_bias;
  ops::MoeWeights on(Device d) const {
    auto pick = [&](const Mirror& m) { return d == Device::CPU ? m.cpu : m.gpu; };
    return {.gate_up_blocks = pick(gu_b), .gate_up_scales = pick(gu_s), .gate_up_bias = pick(gu_bias),
            .down_blocks = pick(dn_b), .down_scales = pick(dn_s), .down_bias = pick(dn_bias)};
  }
};

// `scale_shift` moves both scale ranges up (E8M0 above 128 takes the kernels' second factor).
Experts make_experts(const Shape& s, uint64_t seed, bool host = true, int scale_shift = 0) {
  const int64_t E = s.E, D = s.D, F = s.F;
  const int ss = scale_shift;
  return {.gu_b = device_random(DType::U8, {E, 2 * F, D / 32, 16}, seed, 0, 255, host),
          .gu_s = device_random(DType::U8, {E, 2 * F, D / 32}, seed + 1, 118 + ss, 122 + ss, host),
          .gu_bias = device_random(DType::BF16, {E, 2 * F}, seed + 2, 0, 255, host),
          .dn_b = device_random(DType::U8, {E, D, F / 32, 16}, seed + 3, 0, 255, host),
          .dn_s = device_random(DType::U8, {E, D, F / 32}, seed + 4, 116 + ss, 120 + ss, host),
          .dn_bias = device_random(DType::BF16, {E, D}, seed + 5, 0, 255, host)};
}

// Distinct top-k ids per token from a seeded shuffle of the first `experts_used` experts.
std::vector<int32_t> random_ids(int64_t T, int K, int experts_used, uint64_t seed) {
  std::vector<int32_t> ids;
  std::mt19937_64 rng(seed);
  std::vector<int32_t> e(static_cast<size_t>(experts_used));
  for (int64_t t = 0; t < T; ++t) {
    std::iota(e.begin(), e.end(), 0);
    std::shuffle(e.begin(), e.end(), rng);
    ids.insert(ids.end(), e.begin(), e.begin() + K);
  }
  return ids;
}

// The per-call inputs; the residual starts from `res0` on every run.
struct Inputs {
  Shape s;
  Mirror x, ids, w;
  std::vector<float> res0;
};

Inputs make_inputs(const Shape& s, const std::vector<int32_t>& ids, uint64_t seed) {
  const int64_t T = s.T, D = s.D, K = s.K;
  return {.s = s,
          .x = act(random_floats(size_t(T * D), seed, -2.0f, 2.0f), {T, D}),
          .ids = raw(ids, DType::I32, {T, K}),
          .w = raw(random_floats(size_t(T * K), seed + 1, 0.05f, 1.0f), DType::F32, {T, K}),
          .res0 = random_floats(size_t(T * D), seed + 2, -0.5f, 0.5f)};
}

// Dispatch: ops::moe, whose route run_gpu checks; Grouped: cuda::moe_grouped whatever T is.
enum class Path { Dispatch, Grouped };

// The route ops::moe takes from the ids (heuristics.h): the GEMVs up to the threshold, the grouped
// path above it (the family the context's pin and heuristics.h pick), with FP8 activations when the
// call or (Default) the context's setting asks for them.
std::vector<std::string> dispatch_routes(const Shape& s, ops::MoeActivation activation) {
  if (s.T <= kThreshold) return {"moe:bf16_mxfp4w_moe_gemv"};
  const bool fp8 = activation == ops::MoeActivation::FP8 ||
                   (activation == ops::MoeActivation::Default && test::ctx().moe_activation() == ops::MoeActivation::FP8);
  return {"moe:" + grouped_kernel(s.T, s.K, s.E, fp8)};
}

ops::MoeArgs moe_args(const Experts& ex, const Inputs& in, const Tensor& residual, Device d,
                      ops::MoeActivation activation = ops::MoeActivation::Default) {
  auto pick = [&](const Mirror& m) { return d == Device::CPU ? m.cpu : m.gpu; };
  return {.x = pick(in.x), .ids = pick(in.ids), .weights = pick(in.w), .w = ex.on(d), .residual = residual,
          .activation = activation};
}

std::vector<float> run_gpu(const Experts& ex, const Inputs& in, Path path,
                           ops::MoeActivation activation = ops::MoeActivation::Default) {
  Mirror res = act(in.res0, {in.s.T, in.s.D});
  const ops::MoeArgs a = moe_args(ex, in, res.gpu, Device::CUDA, activation);
  Status st = ok_status();
  (void)path, (void)a;
  ops::RouteRecorder rec(test::ctx());
#ifdef MXSERVE_HAVE_CUDA
  st = path == Path::Grouped ? cuda::moe_grouped(*test::ctx().cuda(), a, test::ctx().moe_grouped_pin())
                             : ops::moe(test::ctx(), a);
#endif
  EXPECT_TRUE(st.ok()) << st.message();
  if (path == Path::Dispatch) {
    EXPECT_EQ(cuda_routes(rec), dispatch_routes(in.s, activation)) << "T=" << in.s.T;
  }
  return download(res.gpu);
}

std::vector<float> run_cpu(const Experts& ex, const Inputs& in,
                           ops::MoeActivation activation = ops::MoeActivation::Default) {
  Mirror res = act(in.res0, {in.s.T, in.s.D});
  const Status st = ops::moe(test::ctx(), moe_args(ex, in, res.cpu, Device::CPU, activation));
  EXPECT_TRUE(st.ok()) << st.message();
  return host_floats(res);
}

// The BF16 tests run both GEMM kernels: mma.sync (every target) and wgmma (sm_90a builds on
// Hopper; skipped visibly elsewhere).
enum class Gemm { kMmaSync, kWgmma };

class CudaBf16Mxfp4wMoeGrouped : public ::testing::TestWithParam<Gemm> {
 protected:
  void SetUp() override {
    MX_REQUIRE_CUDA();
#ifdef MXSERVE_HAVE_CUDA
    if (GetParam() == Gemm::kWgmma && !cuda::moe_grouped_wgmma_available())
      GTEST_SKIP() << "no sm_90a code for this device: the wgmma grouped GEMMs are not built for it";
    test::ctx().pin_moe_grouped(GetParam() == Gemm::kWgmma ? heuristics::MoeGroupedPin::kWgmma
                                                            : heuristics::MoeGroupedPin::kMmaSync);
#endif
  }
  void TearDown() override {
#ifdef MXSERVE_HAVE_CUDA
    test::ctx().pin_moe_grouped(heuristics::MoeGroupedPin::kAuto);
#endif
  }
};

INSTANTIATE_TEST_SUITE_P(CudaGemms, CudaBf16Mxfp4wMoeGrouped, ::testing::Values(Gemm::kMmaSync, Gemm::kWgmma),
                         [](const auto& info) { return info.param == Gemm::kWgmma ? "wgmma" : "mma_sync"; });

TEST_P(CudaBf16Mxfp4wMoeGrouped, GptOss120bSizesT2048) {
  const Shape s{2048, 2880, 2880, 128, 4};
  const Experts ex = make_experts(s, 1000);
  const Inputs in = make_inputs(s, random_ids(s.T, s.K, s.E, 1010), 1020);
  const std::vector<float> gpu = run_gpu(ex, in, Path::Dispatch);  // T > threshold: the grouped path
  const std::vector<float> cpu = run_cpu(ex, in);
  const double err = nmse(gpu, cpu);
  std::printf("T=2048 E=128 K=4 D=F=2880: NMSE %.3g\n", err);
  EXPECT_LT(err, kGroupedNmse);
  EXPECT_GT(nmse(corrupted(gpu), cpu), kGroupedNmse) << "the check must catch a corrupted output";
  EXPECT_EQ(run_gpu(ex, in, Path::Dispatch), gpu) << "two runs must agree bitwise";
}

TEST_P(CudaBf16Mxfp4wMoeGrouped, OddSmallSizes) {
  // N tails (2F or D not a multiple of 128), an odd number of 32-blocks per row (F=96, 160),
  // one token, K=8, tiles of 1..64 rows; the first two and the last two (at most 16 pairs per
  // expert on average) take the 16-row tiles, with 9..16 rows in the last two (the tile's second
  // m16 half) and K tails of 1..3 blocks in a 4-block stage; Shape{133, 96, 160, 2, 2} and
  // the two after it (64 pairs per expert or more) the 128-row tiles: full, partial and nearly
  // empty ones. E = 70 and 1000: the routing's offset scan over several rounds of 32 experts, the
  // last one partial, with idle experts in between.
  for (const Shape& s : {Shape{7, 64, 96, 5, 2}, Shape{1, 32, 32, 3, 3}, Shape{70, 160, 64, 8, 4},
                         Shape{133, 96, 160, 6, 3}, Shape{45, 224, 288, 9, 8}, Shape{133, 96, 160, 2, 2},
                         Shape{300, 64, 96, 3, 3}, Shape{260, 224, 288, 4, 1}, Shape{40, 224, 288, 6, 2},
                         Shape{21, 96, 160, 4, 3}, Shape{50, 64, 96, 70, 4}, Shape{600, 32, 64, 1000, 2}}) {
    const Experts ex = make_experts(s, 2000 + s.D);
    const Inputs in = make_inputs(s, random_ids(s.T, s.K, s.E, 2100 + s.T), 2200 + s.F);
    const std::vector<float> gpu = run_gpu(ex, in, Path::Grouped), cpu = run_cpu(ex, in);
    EXPECT_LT(nmse(gpu, cpu), kGroupedNmse) << "T=" << s.T << " D=" << s.D << " F=" << s.F << " E=" << s.E;
    EXPECT_GT(nmse(corrupted(gpu), cpu), kGroupedNmse);
  }
}

// Decode batches at 120b sizes (E=128, K=4): up to 16 pairs per expert on average the mma.sync
// GEMMs take 16-row tiles (T=4: most experts idle, T=64: ~2 pairs each, T=256: ~8, T=512: 16).
TEST_P(CudaBf16Mxfp4wMoeGrouped, DecodeBatchesShortTiles) {
  for (const int64_t T : {4, 64, 256, 512}) {
    const Shape s{T, 2880, 2880, 128, 4};
    const Experts ex = make_experts(s, 2300 + T, /*host=*/true);
    const Inputs in = make_inputs(s, random_ids(s.T, s.K, s.E, 2310 + T), 2320 + T);
    const std::vector<float> gpu = run_gpu(ex, in, Path::Grouped), cpu = run_cpu(ex, in);
    EXPECT_LT(nmse(gpu, cpu), kGroupedNmse) << "T=" << T;
    EXPECT_GT(nmse(corrupted(gpu), cpu), kGroupedNmse);
  }
}

// E8M0 scales around and above 128 (2^1..2^5): lanes of one warp with and without the second
// factor of the MXFP4 decode, with 16-row (T=6), 64-row (T=60) and 128-row (T=150) tiles.
TEST_P(CudaBf16Mxfp4wMoeGrouped, ScalesAbove128) {
  for (const Shape& s : {Shape{6, 128, 96, 4, 2}, Shape{60, 128, 96, 4, 2}, Shape{150, 128, 96, 4, 2}}) {
    const Experts ex = make_experts(s, 2500, /*host=*/true, /*scale_shift=*/10);
    const Inputs in = make_inputs(s, random_ids(s.T, s.K, s.E, 2510), 2520);
    const std::vector<float> gpu = run_gpu(ex, in, Path::Grouped), cpu = run_cpu(ex, in);
    EXPECT_LT(nmse(gpu, cpu), kGroupedNmse) << "T=" << s.T;
    EXPECT_GT(nmse(corrupted(gpu), cpu), kGroupedNmse);
  }
}

TEST_P(CudaBf16Mxfp4wMoeGrouped, IdleExpertsAndAllTokensOnOneExpert) {
  const Shape s{300, 2880, 2880, 32, 4};
  const Experts ex = make_experts(s, 3000);
  {  // experts 16..31 receive no tokens
    const Inputs in = make_inputs(s, random_ids(s.T, s.K, 16, 3010), 3020);
    const std::vector<float> gpu = run_gpu(ex, in, Path::Dispatch), cpu = run_cpu(ex, in);
    EXPECT_LT(nmse(gpu, cpu), kGroupedNmse) << "idle experts";
  }
  {  // expert 7 in every token's set, at varying slots: 300 rows, five tiles of one expert
    std::vector<int32_t> ids = random_ids(s.T, s.K, 32, 3030);
    for (int64_t t = 0; t < s.T; ++t) {
      auto row = ids.begin() + t * s.K;
      if (std::find(row, row + s.K, 7) == row + s.K) row[t % s.K] = 7;
    }
    const Inputs in = make_inputs(s, ids, 3040);
    const std::vector<float> gpu = run_gpu(ex, in, Path::Dispatch), cpu = run_cpu(ex, in);
    EXPECT_LT(nmse(gpu, cpu), kGroupedNmse) << "all tokens on expert 7";
  }
  {  // every token on the same K experts: K experts of 300 rows, the rest idle
    std::vector<int32_t> ids;
    for (int64_t t = 0; t < s.T; ++t) ids.insert(ids.end(), {5, 9, 30, 2});
    const Inputs in = make_inputs(s, ids, 3050);
    const std::vector<float> gpu = run_gpu(ex, in, Path::Dispatch), cpu = run_cpu(ex, in);
    EXPECT_LT(nmse(gpu, cpu), kGroupedNmse) << "all tokens on the same four experts";
  }
}

TEST(CudaBf16Mxfp4wMoeGroupedDispatch, Threshold) {
  MX_REQUIRE_CUDA();
  for (const int64_t T : {kThreshold, kThreshold + 1}) {
    const Shape s{T, 2880, 2880, 32, 4};
    const Experts ex = make_experts(s, 4000 + T);
    const Inputs in = make_inputs(s, random_ids(s.T, s.K, s.E, 4010 + T), 4020 + T);
    // run_gpu checks the route: moe/cuda (the GEMVs) at the threshold, moe_grouped/cuda above it.
    const std::vector<float> gpu = run_gpu(ex, in, Path::Dispatch);
    // Both paths read the checkpoint layout and must agree with the reference on either side.
    EXPECT_LT(nmse(gpu, run_cpu(ex, in)), kGroupedNmse) << "T=" << T;
  }
}

// ---- FP8 activations (--moe-activation fp8) ----------------------------------------------------
// Against the CPU reference that quantizes x and the SwiGLU output the same way (MX E4M3), the FP8
// kernels differ by the FP32 summation order and the BF16 residual only; a wrong code, scale or
// byte order moves whole elements by >= 1/16 and reads far above kGroupedNmse. Against the fp32
// reference (no quantization) the NMSE is the mode's accuracy, printed and bounded.
constexpr auto kFp8 = ops::MoeActivation::FP8;
constexpr double kFp8VsFp32Nmse = 2e-3;

TEST(CudaE4m3Mxfp4wMoeGrouped, GptOss120bSizesT2048) {
  MX_REQUIRE_CUDA();
  const Shape s{2048, 2880, 2880, 128, 4};
  const Experts ex = make_experts(s, 1000);
  const Inputs in = make_inputs(s, random_ids(s.T, s.K, s.E, 1010), 1020);
  const std::vector<float> gpu = run_gpu(ex, in, Path::Grouped, kFp8);
  const std::vector<float> emulated = run_cpu(ex, in, kFp8), exact = run_cpu(ex, in);
  const double err = nmse(gpu, emulated), acc = nmse(gpu, exact), bf16 = nmse(run_gpu(ex, in, Path::Grouped), exact);
  std::printf("fp8 T=2048 E=128 K=4 D=F=2880: NMSE %.3g vs the FP8 emulation, %.3g vs fp32 (bf16 mode: %.3g)\n",
              err, acc, bf16);
  EXPECT_LT(err, kGroupedNmse);
  EXPECT_LT(acc, kFp8VsFp32Nmse);
  EXPECT_GT(nmse(corrupted(gpu), emulated), kGroupedNmse) << "the check must catch a corrupted output";
  EXPECT_EQ(run_gpu(ex, in, Path::Grouped, kFp8), gpu) << "two runs must agree bitwise";
}

TEST(CudaE4m3Mxfp4wMoeGrouped, OddSizesIdleExpertsAndOneExpert) {
  MX_REQUIRE_CUDA();
  // N tails, K tails (D or F not a multiple of 128: 3 or 5 of the stage's 4 scale blocks), tiles
  // of 1..64 rows, one token.
  for (const Shape& s : {Shape{7, 64, 96, 5, 2}, Shape{1, 32, 32, 3, 3}, Shape{70, 160, 64, 8, 4},
                         Shape{133, 96, 160, 6, 3}, Shape{45, 224, 288, 9, 8}}) {
    const Experts ex = make_experts(s, 2000 + s.D);
    const Inputs in = make_inputs(s, random_ids(s.T, s.K, s.E, 2100 + s.T), 2200 + s.F);
    const std::vector<float> gpu = run_gpu(ex, in, Path::Grouped, kFp8), cpu = run_cpu(ex, in, kFp8);
    EXPECT_LT(nmse(gpu, cpu), kGroupedNmse) << "T=" << s.T << " D=" << s.D << " F=" << s.F << " E=" << s.E;
    EXPECT_GT(nmse(corrupted(gpu), cpu), kGroupedNmse);
  }
  const Shape s{300, 2880, 2880, 32, 4};
  const Experts ex = make_experts(s, 3000);
  {  // experts 16..31 idle
    const Inputs in = make_inputs(s, random_ids(s.T, s.K, 16, 3010), 3020);
    EXPECT_LT(nmse(run_gpu(ex, in, Path::Dispatch, kFp8), run_cpu(ex, in, kFp8)), kGroupedNmse) << "idle experts";
  }
  {  // every token on the same K experts
    std::vector<int32_t> ids;
    for (int64_t t = 0; t < s.T; ++t) ids.insert(ids.end(), {5, 9, 30, 2});
    const Inputs in = make_inputs(s, ids, 3050);
    EXPECT_LT(nmse(run_gpu(ex, in, Path::Dispatch, kFp8), run_cpu(ex, in, kFp8)), kGroupedNmse) << "four experts";
  }
}

TEST(CudaE4m3Mxfp4wMoeGrouped, ContextSettingSelectsThePath) {
  MX_REQUIRE_CUDA();
  const Shape s{kThreshold + 1, 2880, 2880, 32, 4};
  const Experts ex = make_experts(s, 6000);
  const Inputs in = make_inputs(s, random_ids(s.T, s.K, s.E, 6010), 6020);
  test::ctx().set_moe_activation(kFp8);
  ops::RouteRecorder rec(test::ctx());
  const std::vector<float> gpu = run_gpu(ex, in, Path::Dispatch);  // Default: the context's setting
  test::ctx().set_moe_activation(ops::MoeActivation::BF16);
  EXPECT_EQ(cuda_routes(rec), std::vector<std::string>{"moe:e4m3_mxfp4w_moe_grouped"});
  EXPECT_LT(nmse(gpu, run_cpu(ex, in, kFp8)), kGroupedNmse);
}

}  // namespace
}  // namespace mx::test
