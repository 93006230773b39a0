// ops::Context on the GPU (kernels/context.h): two contexts on one GPU run ops side by side, each
// with its own route recorder, settings and profile; an op never grows a context's scratch (one that
// needs more fails, naming both sizes); scratch_bytes_for covers the calls it is given; the scratch
// can no longer grow once a graph was captured over it. And the CPU context's trivial answers.
#include <gtest/gtest.h>

#include <vector>

#include "cuda_test_util.h"
#include "test_context.h"

namespace mx::test {
namespace {

// A (T, D) x (N, D)^T linear with T above the GEMV bound: the cuBLASLt path, which takes scratch.
struct GemmCall {
  static constexpr int64_t T = 16, D = 256, N = 128;
  Mirror x = act(random_floats(size_t(T * D), 1), {T, D});
  Mirror w = bf16_weights(random_floats(size_t(N * D), 2, -0.1f, 0.1f), {N, D});
  Mirror out = act(std::vector<float>(size_t(T * N)), {T, N});
  Status run(ops::Context& cx, Device d) {
    return ops::linear(cx, {.x = d == Device::CPU ? x.cpu : x.gpu,
                            .w = d == Device::CPU ? w.cpu : w.gpu,
                            .out = d == Device::CPU ? out.cpu : out.gpu});
  }
  ops::CallShapes shapes() const { return {.max_tokens = T, .max_rows = 1, .max_in_features = D, .hidden = D}; }
};

TEST(CpuContext, NeedsNoScratchAndProfilesItsOwnOps) {
  ops::Context a, b;
  EXPECT_EQ(a.device(), Device::CPU);
  EXPECT_EQ(a.cuda(), nullptr);
  EXPECT_EQ(a.scratch_bytes_for({.max_tokens = 8192, .max_rows = 256, .max_in_features = 4096}), 0u);
  EXPECT_TRUE(a.reserve_scratch(size_t(1) << 40).ok());  // nothing to allocate on the host
  std::vector<float> x(8, 1.0f), w(4, 1.0f), y(8);
  const ops::RmsNormArgs norm{.x = Tensor(x.data(), DType::F32, {2, 4}), .weight = Tensor(w.data(), DType::F32, {4}),
                              .out = Tensor(y.data(), DType::F32, {2, 4})};
  a.set_profiling(true);
  ASSERT_TRUE(ops::rmsnorm(a, norm).ok());
  ASSERT_TRUE(ops::rmsnorm(b, norm).ok());  // not profiled: b is another context
  const auto profile = a.take_profile();
  ASSERT_EQ(profile.size(), 1u);
  EXPECT_EQ(profile[0].name, "rmsnorm:cpu");
  EXPECT_EQ(profile[0].calls, 1);
  EXPECT_TRUE(b.take_profile().empty());
  EXPECT_TRUE(a.take_profile().empty());  // taking clears it
}

TEST(CudaContext, AnOpNeverGrowsTheScratch) {
  MX_REQUIRE_CUDA();
  auto made = ops::Context::create(Device::CUDA);
  ASSERT_TRUE(made.ok()) << made.status().message();
  ops::Context& cx = **made;
  EXPECT_EQ(cx.scratch_reserved(), 0u);
  GemmCall call;
  const Status refused = call.run(cx, Device::CUDA);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("bytes of scratch"), std::string::npos) << refused.message();
  EXPECT_EQ(cx.scratch_reserved(), 0u);
  // Reserved for the call's shapes, it runs and agrees with the reference.
  const size_t need = cx.scratch_bytes_for(call.shapes());
  ASSERT_GT(need, 0u);
  ASSERT_TRUE(cx.reserve_scratch(need).ok());
  EXPECT_GE(cx.scratch_reserved(), need);
  ASSERT_TRUE(call.run(cx, Device::CUDA).ok());
  ASSERT_TRUE(call.run(cx, Device::CPU).ok());
  const std::vector<float> got = download(call.out.gpu), want = host_floats(call.out);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-2 * (1 + std::abs(want[i]))) << i;
}

TEST(CudaContext, ScratchCannotMoveUnderACapturedGraph) {
  MX_REQUIRE_CUDA();
  auto made = ops::Context::create(Device::CUDA, {.scratch_bytes = size_t(64) << 20});
  ASSERT_TRUE(made.ok()) << made.status().message();
  ops::Context& cx = **made;
  GemmCall call;
  ASSERT_TRUE(call.run(cx, Device::CUDA).ok());  // eager first: cuBLASLt picks its algorithm
  auto graph = ops::StepGraph::capture(cx, [&] { return call.run(cx, Device::CUDA); });
  ASSERT_TRUE(graph.ok()) << graph.status().message();
  ASSERT_TRUE(graph->replay().ok());
  ASSERT_TRUE(ops::synchronize(cx).ok());
  EXPECT_TRUE(cx.reserve_scratch(size_t(32) << 20).ok());  // within what it has: nothing moves
  const Status grow = cx.reserve_scratch(size_t(128) << 20);
  EXPECT_FALSE(grow.ok());
  EXPECT_NE(grow.message().find("graph"), std::string::npos) << grow.message();
  EXPECT_TRUE(graph->replay().ok());
  EXPECT_TRUE(ops::synchronize(cx).ok());
}

TEST(CudaContext, TwoContextsOnOneGpuKeepTheirOwnState) {
  MX_REQUIRE_CUDA();
  auto a = ops::Context::create(Device::CUDA, {.moe_activation = ops::MoeActivation::FP8, .scratch_bytes = 64 << 20});
  auto b = ops::Context::create(Device::CUDA, {.scratch_bytes = 64 << 20});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->moe_activation(), ops::MoeActivation::FP8);
  EXPECT_EQ((*b)->moe_activation(), ops::MoeActivation::BF16);
  (*b)->pin_moe_grouped(heuristics::MoeGroupedPin::kMmaSync);
  EXPECT_EQ((*a)->moe_grouped_pin(), heuristics::MoeGroupedPin::kAuto);
  GemmCall ca, cb;
  ops::RouteRecorder rec_a(**a);
  (*b)->set_profiling(true);
  ASSERT_TRUE(ca.run(**a, Device::CUDA).ok());
  ASSERT_TRUE(cb.run(**b, Device::CUDA).ok());
  EXPECT_EQ(rec_a.routes(), std::vector<std::string>{"linear:bf16_bf16w_gemm"});
  const auto profile = (*b)->take_profile();
  ASSERT_EQ(profile.size(), 1u);
  EXPECT_EQ(profile[0].name, "linear:bf16_bf16w_gemm");
  EXPECT_TRUE((*a)->take_profile().empty());
  EXPECT_EQ(download(ca.out.gpu), download(cb.out.gpu));  // same inputs, same kernel: same bits
}

}  // namespace
}  // namespace mx::test
