// Hand-worked cases for the CPU reference ops: the sliding-window boundary and the sink, router
// top-k tie order and softmax over k, the clamped SwiGLU with the +1, RMSNorm, linear, silu_mul.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "test_util.h"
#include "test_context.h"

namespace mx {
namespace {

// One sequence of `len` positions with Hkv = H = 1, Dh = 2 in blocks of 16: K = 0 (every logit is
// 0), V[j] = (1, j). Returns the attention output of a query at position p.
std::vector<float> attend(int len, int p, int window, float sink) {
  const int B = 16, blocks = (len + B - 1) / B;
  std::vector<float> k(size_t(blocks * B * 2), 0.0f), v(size_t(blocks * B * 2), 0.0f);
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int b = 0; b < blocks; ++b) table[size_t(b)] = blocks - 1 - b;  // scrambled physical blocks
  for (int j = 0; j < len; ++j) {
    const int slot = table[size_t(j / B)] * B + j % B;
    v[size_t(slot * 2)] = 1.0f;
    v[size_t(slot * 2 + 1)] = float(j);
  }
  std::vector<float> qkv(6, 0.0f), out(2, -1.0f);
  int32_t pos = p, seq = 0;
  float sinks = sink;
  ops::AttentionArgs a{.qkv = Tensor(qkv.data(), DType::F32, {1, 6}),
                       .sinks = Tensor(&sinks, DType::F32, {1}),
                       .n_heads = 1,
                       .n_kv_heads = 1,
                       .head_dim = 2,
                       .window = window,
                       .batch = {.positions = Tensor(&pos, DType::I32, {1}),
                                 .seq_index = Tensor(&seq, DType::I32, {1}),
                                 .block_tables = Tensor(table.data(), DType::I32, {1, blocks})},
                       .cache = {.k = Tensor(k.data(), DType::F32, {blocks, B, 1, 2}),
                                 .v = Tensor(v.data(), DType::F32, {blocks, B, 1, 2})},
                       .out = Tensor(out.data(), DType::F32, {1, 2})};
  EXPECT_TRUE(ops::attention(test::ctx(), a).ok());
  return out;
}

TEST(CpuAttention, SlidingWindowSeesExactly128KeysIncludingSelf) {
  // Uniform weights over the visible keys: out[1] / out[0] is the mean visible position.
  const auto w = attend(300, 200, 128, -1e30f);
  EXPECT_FLOAT_EQ(w[0], 1.0f);
  EXPECT_FLOAT_EQ(w[1], (73 + 200) / 2.0f);  // keys 73..200 = 128 keys
  const auto edge = attend(300, 127, 128, -1e30f);
  EXPECT_FLOAT_EQ(edge[1], 127 / 2.0f);  // keys 0..127: all of them, still 128
  const auto past = attend(300, 128, 128, -1e30f);
  EXPECT_FLOAT_EQ(past[1], (1 + 128) / 2.0f);  // key 0 has left the window
  const auto full = attend(300, 200, 0, -1e30f);
  EXPECT_FLOAT_EQ(full[1], 100.0f);  // full layer: keys 0..200
}

TEST(CpuAttention, SinkTakesItsShareOfTheSoftmax) {
  // One visible key with logit 0 and a sink of logit 0: half the mass goes to the sink.
  const auto w = attend(1, 0, 128, 0.0f);
  EXPECT_FLOAT_EQ(w[0], 0.5f);
  const auto w2 = attend(4, 3, 0, std::log(4.0f));  // 4 keys vs e^S = 4
  EXPECT_NEAR(w2[0], 0.5f, 1e-6);
}

TEST(CpuRouter, TopKDescendingLowerIndexWinsTiesSoftmaxOverK) {
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -5.0f};
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  ASSERT_TRUE(ops::router_topk(test::ctx(), {.logits = Tensor(logits.data(), DType::F32, {1, 5}),
                                .ids = Tensor(ids.data(), DType::I32, {1, 2}),
                                .weights = Tensor(w.data(), DType::F32, {1, 2})})
                  .ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 3}));
  EXPECT_FLOAT_EQ(w[0], 0.5f);
  EXPECT_FLOAT_EQ(w[1], 0.5f);
  std::vector<float> l2 = {0.0f, 1.0f, 2.0f};
  ASSERT_TRUE(ops::router_topk(test::ctx(), {.logits = Tensor(l2.data(), DType::F32, {1, 3}),
                                .ids = Tensor(ids.data(), DType::I32, {1, 2}),
                                .weights = Tensor(w.data(), DType::F32, {1, 2})})
                  .ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{2, 1}));
  EXPECT_NEAR(w[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);  // softmax over the 2 chosen, not all 3
}

// D = F = 32, one expert. x = e0. Row 0 (gate_0) = 12·e0 -> clamped to 7 (upper clamp only);
// row 1 (up_0) = -12·e0 -> clamped to -7. Other gate/up pairs: gate = -12 (not clamped below),
// up = 0. Down row d reads z_0 with weight 1 and z_1 with weight 0.5. Returns the residual. With
// routing FromLogits the op selects the one expert from a logit (weight 1 after the softmax)
// instead of taking id 0 with weight 0.75; logits without FromLogits (or the reverse) must fail.
struct SwigluCase {
  std::vector<float> res;
  int32_t id = -1;
  float weight = 0.0f;
  bool ok = false;
};
SwigluCase swiglu_case(ops::MoeActivation activation, ops::MoeRouting routing = ops::MoeRouting::FromIds,
                       bool with_logits = false) {
  const int D = 32, F = 32;
  std::vector<uint8_t> gu_blocks(size_t(2 * F * 16), 0), gu_scales(size_t(2 * F), 128);  // scale 2
  gu_blocks[0] = 0x07;          // row 0, element 0 = +6 -> 12
  gu_blocks[16] = 0x0f;         // row 1, element 0 = -6 -> -12
  for (int j = 1; j < F; ++j) gu_blocks[size_t(2 * j * 16)] = 0x0f;  // gate_j = -12
  std::vector<uint8_t> d_blocks(size_t(D * 16), 0), d_scales(size_t(D), 127);
  for (int d = 0; d < D; ++d) d_blocks[size_t(d * 16)] = 0x12;  // z_0 · 1.0 + z_1 · 0.5
  std::vector<bf16> gu_bias(size_t(2 * F), f32_to_bf16(0.0f)), d_bias(size_t(D), f32_to_bf16(0.25f));
  std::vector<float> x(size_t(D), 0.0f), res(size_t(D), 1.0f), w = {0.75f};
  x[0] = 1.0f;
  std::vector<int32_t> ids = {0};
  std::vector<float> logits = {2.5f};
  if (with_logits) ids[0] = -1, w[0] = -1.0f;
  const ops::MoeWeights mw{.gate_up_blocks = Tensor(gu_blocks.data(), DType::U8, {1, 2 * F, D / 32, 16}),
                           .gate_up_scales = Tensor(gu_scales.data(), DType::U8, {1, 2 * F, D / 32}),
                           .gate_up_bias = Tensor(gu_bias.data(), DType::BF16, {1, 2 * F}),
                           .down_blocks = Tensor(d_blocks.data(), DType::U8, {1, D, F / 32, 16}),
                           .down_scales = Tensor(d_scales.data(), DType::U8, {1, D, F / 32}),
                           .down_bias = Tensor(d_bias.data(), DType::BF16, {1, D})};
  const Status st = ops::moe(test::ctx(), {.x = Tensor(x.data(), DType::F32, {1, D}),
                              .routing = routing,
                              .ids = Tensor(ids.data(), DType::I32, {1, 1}),
                              .weights = Tensor(w.data(), DType::F32, {1, 1}),
                              .logits = with_logits ? Tensor(logits.data(), DType::F32, {1, 1}) : Tensor(),
                              .w = mw,
                              .residual = Tensor(res.data(), DType::F32, {1, D}),
                              .activation = activation});
  return {.res = res, .id = ids[0], .weight = w[0], .ok = st.ok()};
}

float silu_a(float g) { return g / (1.0f + std::exp(-1.702f * g)); }

TEST(CpuMoe, ClampedSwigluWithPlusOneAndInterleavedRows) {
  const SwigluCase c = swiglu_case(ops::MoeActivation::Default);
  ASSERT_TRUE(c.ok);
  const std::vector<float>& res = c.res;
  const double z0 = silu_a(7.0f) * (-7.0 + 1.0);   // clamps and the +1
  const double z1 = silu_a(-12.0f) * (0.0 + 1.0);  // gate not clamped from below
  const double y = z0 * 1.0 + z1 * 0.5 + 0.25;
  for (size_t d = 0; d < res.size(); ++d) EXPECT_NEAR(res[d], 1.0 + 0.75 * y, 1e-5) << d;
}

TEST(CpuMoe, Fp8ActivationsQuantizeXAndTheSwigluOutput) {
  // x = e0 is exact in MX E4M3; the SwiGLU row (z0, z1, z1, ...) is not: its block scale follows
  // |z0| ~ 42, z0 keeps 4 significant bits and z1 ~ -1.7e-8 becomes 0.
  const SwigluCase c = swiglu_case(ops::MoeActivation::FP8);
  ASSERT_TRUE(c.ok);
  const std::vector<float>& res = c.res;
  float z[32];
  z[0] = silu_a(7.0f) * (-7.0f + 1.0f);
  for (int j = 1; j < 32; ++j) z[j] = silu_a(-12.0f);
  uint8_t codes[32], scale;
  quantize_mx_e4m3(z, codes, &scale);
  const double q0 = fp8_e4m3_to_f32(codes[0]) * e8m0_to_f32(scale), q1 = fp8_e4m3_to_f32(codes[1]) * e8m0_to_f32(scale);
  EXPECT_NE(q0, double(z[0]));
  EXPECT_NEAR(q0, z[0], std::fabs(z[0]) / 16);
  const double y = q0 + q1 * 0.5 + 0.25;
  for (size_t d = 0; d < res.size(); ++d) EXPECT_NEAR(res[d], 1.0 + 0.75 * y, 1e-5) << d;
  EXPECT_EQ(ops::parse_moe_activation("fp8"), ops::MoeActivation::FP8);
  EXPECT_EQ(ops::parse_moe_activation("bf16"), ops::MoeActivation::BF16);
  EXPECT_FALSE(ops::parse_moe_activation("fp16").has_value());
}

TEST(CpuMoe, RoutingFromLogitsSelectsAndWritesTheIds) {
  const SwigluCase by_ids = swiglu_case(ops::MoeActivation::Default);
  const SwigluCase by_logits =
      swiglu_case(ops::MoeActivation::Default, ops::MoeRouting::FromLogits, /*with_logits=*/true);
  ASSERT_TRUE(by_ids.ok && by_logits.ok);
  EXPECT_EQ(by_logits.id, 0);
  EXPECT_FLOAT_EQ(by_logits.weight, 1.0f);  // the softmax over the one chosen expert
  for (size_t d = 0; d < by_ids.res.size(); ++d)  // residual 1 + w·y: w 1 instead of 0.75
    EXPECT_NEAR(by_logits.res[d] - 1.0, (by_ids.res[d] - 1.0) / 0.75, 1e-5) << d;
  // The routing field and the logits must agree.
  EXPECT_FALSE(swiglu_case(ops::MoeActivation::Default, ops::MoeRouting::FromIds, /*with_logits=*/true).ok);
  EXPECT_FALSE(swiglu_case(ops::MoeActivation::Default, ops::MoeRouting::FromLogits, /*with_logits=*/false).ok);
}

TEST(CpuDense, RmsNormAndLinearByHand) {
  std::vector<float> x = {3.0f, 4.0f}, out(2);
  std::vector<bf16> g = {f32_to_bf16(1.0f), f32_to_bf16(2.0f)};
  ASSERT_TRUE(ops::rmsnorm(test::ctx(), {.x = Tensor(x.data(), DType::F32, {1, 2}),
                            .weight = Tensor(g.data(), DType::BF16, {2}),
                            .eps = 0.0f,
                            .out = Tensor(out.data(), DType::F32, {1, 2})})
                  .ok());
  const float r = 1.0f / std::sqrt(12.5f);
  EXPECT_FLOAT_EQ(out[0], 3 * r);
  EXPECT_FLOAT_EQ(out[1], 8 * r);
  std::vector<bf16> w = {f32_to_bf16(1), f32_to_bf16(2), f32_to_bf16(-1), f32_to_bf16(0.5f)};
  std::vector<bf16> b = {f32_to_bf16(0.5f), f32_to_bf16(-1)};
  std::vector<float> y = {10.0f, 20.0f};
  ASSERT_TRUE(ops::linear(test::ctx(), {.x = Tensor(x.data(), DType::F32, {1, 2}),
                           .w = Tensor(w.data(), DType::BF16, {2, 2}),
                           .bias = Tensor(b.data(), DType::BF16, {2}),
                           .out = Tensor(y.data(), DType::F32, {1, 2}),
                           .accumulate = ops::Accumulate::IntoOut})
                  .ok());
  EXPECT_FLOAT_EQ(y[0], 10 + 3 + 8 + 0.5f);
  EXPECT_FLOAT_EQ(y[1], 20 - 3 + 2 - 1);
}

// Gates 0, ±1, ±2, ±20 and ±1000 (at -1000 exp(-g) overflows: a signed zero, not NaN), and up = 0;
// the expected values are g / (1 + e^-g) · u in double (Python's math module).
TEST(CpuSiluMul, HandComputedValues) {
  const int64_t T = 2, I = 5;
  std::vector<float> gate_up = {
      0.0f,  1.0f,   -1.0f,   2.0f,     -2.0f, /* up */ 3.0f, 2.0f, 2.0f,  -0.5f, 0.25f,  // t = 0
      20.0f, -20.0f, 1000.0f, -1000.0f, 10.0f, /* up */ 1.5f, 1.5f, -2.0f, -2.0f, 0.0f,   // t = 1
  };
  std::vector<float> out(size_t(T * I), -7.0f);
  ASSERT_TRUE(ops::silu_mul(test::ctx(), {.gate_up = Tensor(gate_up.data(), DType::F32, {T, 2 * I}),
                             .out = Tensor(out.data(), DType::F32, {T, I})})
                  .ok());
  const double want[] = {0.0, 1.4621171572600098, -0.5378828427399902, -0.8807970779778823, -0.05960146101105877,
                         29.999999938165388, -6.183460854570612e-08, -2000.0, 0.0, 0.0};
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_FALSE(std::isnan(out[i])) << i;
    const float gate = gate_up[i / I * 2 * I + i % I];
    EXPECT_NEAR(out[i], want[i], 1e-6 * std::fabs(want[i])) << "index " << i << " gate " << gate;  // FP32 rounding
  }
}

TEST(CpuSiluMul, RejectsBadShapesDtypesAndAliasing) {
  std::vector<float> buf(64);
  const auto fails_with = [](const ops::SiluMulArgs& a, const std::string& what) {
    const Status st = ops::silu_mul(test::ctx(), a);
    EXPECT_FALSE(st.ok()) << what;
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("silu_mul"), std::string::npos) << st.message();
  };
  const Tensor gate_up(buf.data(), DType::F32, {2, 8});  // T = 2, I = 4: floats [0, 16)
  fails_with({.gate_up = gate_up, .out = Tensor(buf.data() + 32, DType::F32, {2, 5})}, "gate_up width");
  fails_with({.gate_up = gate_up, .out = Tensor(buf.data() + 32, DType::F32, {3, 4})}, "tokens");
  fails_with({.gate_up = Tensor(buf.data(), DType::BF16, {2, 8}), .out = Tensor(buf.data() + 32, DType::F32, {2, 4})},
             "'gate_up' has dtype");
  fails_with({.gate_up = gate_up, .out = Tensor()}, "'out' is missing");
  fails_with({.gate_up = gate_up, .out = Tensor(buf.data(), DType::F32, {2, 4})}, "overlaps");  // in place
  fails_with({.gate_up = gate_up, .out = Tensor(buf.data() + 12, DType::F32, {2, 4})}, "overlaps");  // partly
  // Right after gate_up in the same buffer: no shared byte, accepted.
  EXPECT_TRUE(ops::silu_mul(test::ctx(), {.gate_up = gate_up, .out = Tensor(buf.data() + 16, DType::F32, {2, 4})}).ok());
}

TEST(Dispatch, RejectsMismatchedShapes) {
  std::vector<float> x(6), out(4);
  std::vector<bf16> w(6);
  auto st = ops::linear(test::ctx(), {.x = Tensor(x.data(), DType::F32, {2, 3}),
                         .w = Tensor(w.data(), DType::BF16, {3, 2}),
                         .out = Tensor(out.data(), DType::F32, {2, 2})});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("input features"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace mx
