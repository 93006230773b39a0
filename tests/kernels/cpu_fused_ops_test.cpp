// The CPU reference of the fused ops against the unfused ops they stand for: linear with an input
// norm == rmsnorm then linear, qkv_projection == linear -> qkv_rope_cache, moe_router == rmsnorm
// -> linear -> router_topk (bitwise: the CPU backend computes them with the same code), and the
// contracts dispatch.cpp checks.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "kernels/ops.h"
#include "test_util.h"
#include "test_context.h"

namespace mx::test {
namespace {

Tensor f32(std::vector<float>& v, std::initializer_list<int64_t> shape) {
  return Tensor(v.data(), DType::F32, shape, Device::CPU);
}

TEST(CpuFused, LinearWithInputNormEqualsRmsNormThenLinear) {
  for (const auto& [T, N, Kin] : {std::tuple<int64_t, int64_t, int64_t>{1, 5120, 2880}, {3, 37, 72}, {2, 5, 7}}) {
    std::vector<float> x = random_floats(size_t(T * Kin), 1 + Kin, -3.0f, 3.0f);
    std::vector<float> nw = random_floats(size_t(Kin), 2 + Kin, 0.5f, 2.0f);
    std::vector<float> w = random_floats(size_t(N * Kin), 3 + Kin, -0.05f, 0.05f);
    std::vector<float> b = random_floats(size_t(N), 4 + Kin);
    std::vector<float> xn(x.size()), ref(size_t(T * N)), got(size_t(T * N));
    ASSERT_TRUE(ops::rmsnorm(test::ctx(), {.x = f32(x, {T, Kin}), .weight = f32(nw, {Kin}), .eps = 1e-5f, .out = f32(xn, {T, Kin})})
                    .ok());
    // linear takes bf16 weights: pass the same bf16 bytes to both calls.
    std::vector<bf16> wb(w.size()), bb(b.size());
    for (size_t i = 0; i < w.size(); ++i) wb[i] = f32_to_bf16(w[i]);
    for (size_t i = 0; i < b.size(); ++i) bb[i] = f32_to_bf16(b[i]);
    const Tensor W(wb.data(), DType::BF16, {N, Kin}), B(bb.data(), DType::BF16, {N});
    ASSERT_TRUE(ops::linear(test::ctx(), {.x = f32(xn, {T, Kin}), .w = W, .bias = B, .out = f32(ref, {T, N})}).ok());
    ASSERT_TRUE(ops::linear(test::ctx(), {.x = f32(x, {T, Kin}),
                             .w = W,
                             .bias = B,
                             .out = f32(got, {T, N}),
                             .norm = {.weight = f32(nw, {Kin}), .eps = 1e-5f}})
                    .ok());
    EXPECT_EQ(got, ref) << "T=" << T << " N=" << N << " Kin=" << Kin;
  }
}

TEST(CpuFused, LinearInputNormContract) {
  std::vector<float> x(8, 1.0f), nw(3, 1.0f), out(8);
  std::vector<bf16> w(16, f32_to_bf16(1.0f));
  const Tensor W(w.data(), DType::BF16, {4, 4});
  const auto st = ops::linear(test::ctx(), {.x = f32(x, {2, 4}), .w = W, .out = f32(out, {2, 4}), .norm = {.weight = f32(nw, {3})}});
  EXPECT_FALSE(st.ok());  // norm weight of 3 for 4 features
  const auto alias = ops::linear(test::ctx(), {.x = f32(x, {2, 4}), .w = W, .out = f32(x, {2, 4}), .norm = {.weight = f32(x, {4})}});
  EXPECT_FALSE(alias.ok());  // out aliasing x
}

TEST(CpuFused, QkvProjectionEqualsLinearThenRopeCache) {
  const int64_t T = 2, D = 16, H = 2, Hkv = 1, Dh = 4, B = 4, N = (H + 2 * Hkv) * Dh, blocks = 3;
  std::vector<float> x = random_floats(size_t(T * D), 31, -3.0f, 3.0f), nw = random_floats(size_t(D), 32, 0.5f, 2.0f);
  std::vector<bf16> wb(static_cast<size_t>(N * D)), bb(static_cast<size_t>(N));
  const std::vector<float> w = random_floats(wb.size(), 33), b = random_floats(bb.size(), 34);
  for (size_t i = 0; i < wb.size(); ++i) wb[i] = f32_to_bf16(w[i]);
  for (size_t i = 0; i < bb.size(); ++i) bb[i] = f32_to_bf16(b[i]);
  std::vector<float> inv = {1.0f, 0.01f};
  std::vector<int32_t> pos = {5, 2}, seq = {0, 1}, table = {2, 0, 1, 0};  // (S=2, max_blocks=2)
  const ops::RopeTable rope{.inv_freq = f32(inv, {Dh / 2}), .concentration = 1.25f};
  const ops::TokenBatch batch{.positions = Tensor(pos.data(), DType::I32, {T}),
                              .seq_index = Tensor(seq.data(), DType::I32, {T}),
                              .block_tables = Tensor(table.data(), DType::I32, {2, 2})};
  const Tensor W(wb.data(), DType::BF16, {N, D}), Bias(bb.data(), DType::BF16, {N});
  struct Out {
    std::vector<float> qkv, k, v;
  };
  auto make = [&] {
    return Out{std::vector<float>(size_t(T * N)), random_floats(size_t(blocks * B * Hkv * Dh), 35),
               random_floats(size_t(blocks * B * Hkv * Dh), 36)};
  };
  Out ref = make(), got = make();
  ASSERT_TRUE(ops::linear(test::ctx(), {.x = f32(x, {T, D}), .w = W, .bias = Bias, .out = f32(ref.qkv, {T, N}),
                           .norm = {.weight = f32(nw, {D})}})
                  .ok());
  auto cache = [&](Out& o) {
    return ops::KvLayer{.k = f32(o.k, {blocks, B, Hkv, Dh}), .v = f32(o.v, {blocks, B, Hkv, Dh})};
  };
  ASSERT_TRUE(ops::qkv_rope_cache(test::ctx(), {.qkv = f32(ref.qkv, {T, N}), .n_heads = H, .n_kv_heads = Hkv, .head_dim = Dh,
                                   .rope = rope, .batch = batch, .cache = cache(ref)})
                  .ok());
  ASSERT_TRUE(ops::qkv_projection(test::ctx(), {.x = f32(x, {T, D}), .norm = {.weight = f32(nw, {D})}, .w = W, .bias = Bias,
                                   .qkv = f32(got.qkv, {T, N}), .n_heads = H, .n_kv_heads = Hkv, .head_dim = Dh,
                                   .rope = rope, .batch = batch, .cache = cache(got)})
                  .ok());
  EXPECT_EQ(got.qkv, ref.qkv);
  EXPECT_EQ(got.k, ref.k);
  EXPECT_EQ(got.v, ref.v);
  EXPECT_NE(got.k, make().k);  // the cache was written
}

struct Router {
  std::vector<float> xn, logits, weights;
  std::vector<int32_t> ids;
};

TEST(CpuFused, MoeRouterEqualsThreeOps) {
  for (const auto& [T, D, E, K] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{2, 2880, 128, 4}, {5, 72, 5, 3}}) {
    std::vector<float> x = random_floats(size_t(T * D), 10 + D, -3.0f, 3.0f);
    std::vector<float> nw = random_floats(size_t(D), 11 + D, 0.5f, 2.0f);
    std::vector<bf16> wb(static_cast<size_t>(E * D)), bb(static_cast<size_t>(E));
    const std::vector<float> w = random_floats(wb.size(), 12 + D, -0.1f, 0.1f), b = random_floats(bb.size(), 13 + D);
    for (size_t i = 0; i < wb.size(); ++i) wb[i] = f32_to_bf16(w[i]);
    for (size_t i = 0; i < bb.size(); ++i) bb[i] = f32_to_bf16(b[i]);
    const Tensor W(wb.data(), DType::BF16, {E, D}), B(bb.data(), DType::BF16, {E});
    auto make = [T = T, D = D, E = E, K = K] {  // copies: clang 14 cannot capture structured bindings
      return Router{std::vector<float>(size_t(T * D)), std::vector<float>(size_t(T * E)),
                    std::vector<float>(size_t(T * K)), std::vector<int32_t>(size_t(T * K), -1)};
    };
    Router ref = make(), got = make();
    ASSERT_TRUE(ops::rmsnorm(test::ctx(), {.x = f32(x, {T, D}), .weight = f32(nw, {D}), .out = f32(ref.xn, {T, D})}).ok());
    ASSERT_TRUE(ops::linear(test::ctx(), {.x = f32(ref.xn, {T, D}), .w = W, .bias = B, .out = f32(ref.logits, {T, E})}).ok());
    ASSERT_TRUE(ops::router_topk(test::ctx(), {.logits = f32(ref.logits, {T, E}),
                                  .ids = Tensor(ref.ids.data(), DType::I32, {T, K}),
                                  .weights = f32(ref.weights, {T, K})})
                    .ok());
    ASSERT_TRUE(ops::moe_router(test::ctx(), {.x = f32(x, {T, D}),
                                 .norm_weight = f32(nw, {D}),
                                 .w = W,
                                 .bias = B,
                                 .xn = f32(got.xn, {T, D}),
                                 .logits = f32(got.logits, {T, E}),
                                 .ids = Tensor(got.ids.data(), DType::I32, {T, K}),
                                 .weights = f32(got.weights, {T, K})})
                    .ok());
    EXPECT_EQ(got.xn, ref.xn);
    EXPECT_EQ(got.logits, ref.logits);
    EXPECT_EQ(got.ids, ref.ids);
    EXPECT_EQ(got.weights, ref.weights);
  }
}

TEST(CpuFused, MoeRouterContract) {
  constexpr int64_t T = 1, D = 8, E = 4, K = 2;
  std::vector<float> x(T * D, 1.0f), nw(D, 1.0f), xn(T * D), logits(T * E), w8(T * K);
  std::vector<bf16> wb(E * D, f32_to_bf16(0.5f));
  std::vector<int32_t> ids(T * K);
  ops::MoeRouterArgs a{.x = f32(x, {T, D}),
                       .norm_weight = f32(nw, {D}),
                       .w = Tensor(wb.data(), DType::BF16, {E, D}),
                       .xn = f32(xn, {T, D}),
                       .logits = f32(logits, {T, E}),
                       .ids = Tensor(ids.data(), DType::I32, {T, K}),
                       .weights = f32(w8, {T, K})};
  EXPECT_TRUE(ops::moe_router(test::ctx(), a).ok());
  ops::MoeRouterArgs alias = a;
  alias.xn = a.x;
  EXPECT_FALSE(ops::moe_router(test::ctx(), alias).ok());  // xn must not alias x
  ops::MoeRouterArgs wide = a;
  wide.logits = f32(logits, {T, E - 1});
  EXPECT_FALSE(ops::moe_router(test::ctx(), wide).ok());  // logits width != E
}

}  // namespace
}  // namespace mx::test
