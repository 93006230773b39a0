// ops::RouteRecorder (context.h, filled by dispatch.cpp) on the CPU backend: the routes of a
// context's ops in call order, an op routed inside another included; nothing without a live
// recorder, nothing of another context's ops (on this thread or another) or of a call that fails
// its contract; a nested recorder hands its routes to the outer one.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "kernels/ops.h"
#include "test_context.h"

namespace mx {
namespace {

using Routes = std::vector<std::string>;

// x (T, D) f32 rows, normalised into xn: one route.
struct Norm {
  static constexpr int64_t T = 2, D = 4;
  std::vector<float> x = std::vector<float>(size_t(T * D), 1.0f), xn = std::vector<float>(size_t(T * D));
  std::vector<float> weight = std::vector<float>(size_t(D), 1.0f);
  Status run(ops::Context& cx = test::ctx()) {
    return ops::rmsnorm(cx, {.x = Tensor(x.data(), DType::F32, {T, D}), .weight = Tensor(weight.data(), DType::F32, {D}),
                         .out = Tensor(xn.data(), DType::F32, {T, D})});
  }
};

// ops::moe of one token over E = 2 MXFP4 experts (D = F = 32, all-zero blocks) selecting K = 1
// from router logits: on the CPU the op routes router_topk, then itself with the ids.
Status moe_from_logits() {
  constexpr int64_t D = 32, F = 32, E = 2;
  std::vector<uint8_t> gu_blocks(size_t(E * 2 * F * 16)), gu_scales(size_t(E * 2 * F), 127);
  std::vector<uint8_t> dn_blocks(size_t(E * D * 16)), dn_scales(size_t(E * D), 127);
  std::vector<bf16> gu_bias(size_t(E * 2 * F)), dn_bias(size_t(E * D));
  std::vector<float> x(size_t(D), 1.0f), res(size_t(D), 0.0f), logits = {0.5f, 1.5f}, w = {-1.0f};
  std::vector<int32_t> ids = {-1};
  return ops::moe(test::ctx(), {.x = Tensor(x.data(), DType::F32, {1, D}),
                   .routing = ops::MoeRouting::FromLogits,
                   .ids = Tensor(ids.data(), DType::I32, {1, 1}),
                   .weights = Tensor(w.data(), DType::F32, {1, 1}),
                   .logits = Tensor(logits.data(), DType::F32, {1, E}),
                   .w = {.gate_up_blocks = Tensor(gu_blocks.data(), DType::U8, {E, 2 * F, D / 32, 16}),
                         .gate_up_scales = Tensor(gu_scales.data(), DType::U8, {E, 2 * F, D / 32}),
                         .gate_up_bias = Tensor(gu_bias.data(), DType::BF16, {E, 2 * F}),
                         .down_blocks = Tensor(dn_blocks.data(), DType::U8, {E, D, F / 32, 16}),
                         .down_scales = Tensor(dn_scales.data(), DType::U8, {E, D, F / 32}),
                         .down_bias = Tensor(dn_bias.data(), DType::BF16, {E, D})},
                   .residual = Tensor(res.data(), DType::F32, {1, D})});
}

TEST(RouteRecorder, RecordsNestedOpsInCallOrder) {
  Norm norm;
  ops::RouteRecorder rec(test::ctx());
  ASSERT_TRUE(norm.run().ok());
  ASSERT_TRUE(moe_from_logits().ok());
  ASSERT_TRUE(norm.run().ok());
  EXPECT_EQ(rec.routes(), (Routes{"rmsnorm:cpu", "router_topk:cpu", "moe:cpu", "rmsnorm:cpu"}));
}

TEST(RouteRecorder, NothingWithoutARecorderOrFromOtherContexts) {
  Norm norm;
  ASSERT_TRUE(norm.run().ok());  // no recorder alive: goes nowhere
  {
    ops::RouteRecorder gone(test::ctx());
    ASSERT_TRUE(norm.run().ok());
    EXPECT_EQ(gone.routes(), Routes{"rmsnorm:cpu"});
  }
  ASSERT_TRUE(norm.run().ok());  // after the recorder ended
  ops::RouteRecorder rec(test::ctx());
  EXPECT_TRUE(rec.routes().empty());
  Norm other;
  ops::Context other_cx;
  ASSERT_TRUE(other.run(other_cx).ok());  // another context's op, on this thread
  std::thread([&] { ASSERT_TRUE(other.run(other_cx).ok()); }).join();  // and on another thread
  std::vector<float> short_weight(size_t(Norm::D - 1), 1.0f);  // refused before it is routed
  EXPECT_FALSE(ops::rmsnorm(test::ctx(), {.x = Tensor(norm.x.data(), DType::F32, {Norm::T, Norm::D}),
                             .weight = Tensor(short_weight.data(), DType::F32, {Norm::D - 1}),
                             .out = Tensor(norm.xn.data(), DType::F32, {Norm::T, Norm::D})})
                   .ok());
  EXPECT_TRUE(rec.routes().empty());
}

TEST(RouteRecorder, NestedRecorderHandsItsRoutesToTheOuterOne) {
  Norm norm;
  ops::RouteRecorder outer(test::ctx());
  ASSERT_TRUE(norm.run().ok());
  {
    ops::RouteRecorder inner(test::ctx());
    ASSERT_TRUE(moe_from_logits().ok());
    EXPECT_EQ(inner.routes(), (Routes{"router_topk:cpu", "moe:cpu"}));
    EXPECT_EQ(outer.routes(), Routes{"rmsnorm:cpu"});  // the inner one takes them while it lives
  }
  ASSERT_TRUE(norm.run().ok());
  EXPECT_EQ(outer.routes(), (Routes{"rmsnorm:cpu", "router_topk:cpu", "moe:cpu", "rmsnorm:cpu"}));
}

}  // namespace
}  // namespace mx
