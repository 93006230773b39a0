// The CPU reference's FP8 KV cache (--kv-cache-dtype fp8): kv_scales worked by hand, the codes
// qkv_rope_cache writes, attention over codes equal to attention over the f32 cache holding
// code · scale, and qkv_projection's calibrating call (scales first, then the writes).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "kernels/ops.h"
#include "test_util.h"
#include "test_context.h"

namespace mx {
namespace {

using test::random_floats;

// One token, H = 2 q heads, Hkv = 1, Dh = 4: qkv row = q0 (4), q1 (4), k (4), v (4).
constexpr int H = 2, Hkv = 1, Dh = 4, W = (H + 2 * Hkv) * Dh;

TEST(KvFp8, ScalesByHand) {
  // k = (3, 0, 0, 4): pairs (3, 0) and (0, 4), norms 3 and 4; v max |v| = 5.
  std::vector<float> qkv(W, 0.5f);
  const float k[Dh] = {3, 0, 0, 4}, v[Dh] = {1, -5, 2, 0};
  for (int i = 0; i < Dh; ++i) qkv[size_t(H * Dh + i)] = k[i], qkv[size_t((H + 1) * Dh + i)] = v[i];
  float scales[2] = {0, 0};
  ASSERT_TRUE(ops::kv_scales(test::ctx(), {.qkv = Tensor(qkv.data(), DType::F32, {1, W}), .n_heads = H, .n_kv_heads = Hkv,
                              .head_dim = Dh, .concentration = 1.5f, .scales = Tensor(scales, DType::F32, {2})})
                  .ok());
  EXPECT_FLOAT_EQ(scales[0], 2.0f * 1.5f * 4.0f / 448.0f);  // headroom · concentration · norm 4
  EXPECT_FLOAT_EQ(scales[1], 2.0f * 5.0f / 448.0f);
  // A zero k and v: scale 1 (nothing to fit).
  std::vector<float> zeros(W, 0.0f);
  ASSERT_TRUE(ops::kv_scales(test::ctx(), {.qkv = Tensor(zeros.data(), DType::F32, {1, W}), .n_heads = H, .n_kv_heads = Hkv,
                              .head_dim = Dh, .concentration = 1.5f, .scales = Tensor(scales, DType::F32, {2})})
                  .ok());
  EXPECT_EQ(scales[0], 1.0f);
  EXPECT_EQ(scales[1], 1.0f);
}

// A one-block paged cache of B = 4 positions for the tests below.
struct Cache {
  std::vector<uint8_t> k = std::vector<uint8_t>(4 * Hkv * Dh), v = k;
  float scales[2] = {0.01f, 0.02f};
  int32_t table[1] = {0};
  ops::KvLayer layer() {
    return {.k = Tensor(k.data(), DType::F8_E4M3, {1, 4, Hkv, Dh}),
            .v = Tensor(v.data(), DType::F8_E4M3, {1, 4, Hkv, Dh}), .scales = Tensor(scales, DType::F32, {2})};
  }
};

TEST(KvFp8, RopeCacheWritesTheCodesOfValueOverScale) {
  Cache c;
  std::vector<float> qkv = random_floats(W, 1, -2.0f, 2.0f);
  const std::vector<float> before = qkv;
  float inv_freq[Dh / 2] = {0.0f, 0.0f};  // no rotation at any position: k stays as given
  int32_t pos = 2, seq = 0;
  auto write = [&] {
    return ops::qkv_rope_cache(test::ctx(), {.qkv = Tensor(qkv.data(), DType::F32, {1, W}), .n_heads = H, .n_kv_heads = Hkv,
                                .head_dim = Dh, .rope = {.inv_freq = Tensor(inv_freq, DType::F32, {Dh / 2})},
                                .batch = {.positions = Tensor(&pos, DType::I32, {1}),
                                          .seq_index = Tensor(&seq, DType::I32, {1}),
                                          .block_tables = Tensor(c.table, DType::I32, {1, 1})},
                                .cache = c.layer()});
  };
  ASSERT_TRUE(write().ok());
  for (int i = 0; i < Dh; ++i) {
    EXPECT_EQ(c.k[size_t(2 * Dh + i)], f32_to_fp8_e4m3(before[size_t(H * Dh + i)] * (1.0f / 0.01f))) << i;
    EXPECT_EQ(c.v[size_t(2 * Dh + i)], f32_to_fp8_e4m3(before[size_t((H + 1) * Dh + i)] * (1.0f / 0.02f))) << i;
    // Read back within E4M3's half step (2^-4 relative).
    EXPECT_NEAR(fp8_e4m3_to_f32(c.v[size_t(2 * Dh + i)]) * 0.02f, before[size_t((H + 1) * Dh + i)],
                std::fabs(before[size_t((H + 1) * Dh + i)]) / 16 + 1e-6);
  }
  EXPECT_EQ(c.k[0], 0) << "other slots untouched";
  // Values beyond 448 · scale saturate to ±448 (code 0x7e / 0xfe), never to NaN.
  qkv = before;
  qkv[size_t(H * Dh)] = 100.0f;   // 100 / 0.01 = 10000
  qkv[size_t(H * Dh + 1)] = -1e9f;
  ASSERT_TRUE(write().ok());
  EXPECT_EQ(c.k[size_t(2 * Dh)], 0x7e);
  EXPECT_EQ(c.k[size_t(2 * Dh + 1)], 0xfe);
}

TEST(KvFp8, AttentionReadsCodeTimesScale) {
  Cache c;
  for (size_t i = 0; i < c.k.size(); ++i) c.k[i] = uint8_t(i * 37 % 0x7e), c.v[i] = uint8_t((i * 53 + 0x80) % 0xfe);
  std::vector<float> kf(c.k.size()), vf(c.v.size());
  for (size_t i = 0; i < kf.size(); ++i) kf[i] = fp8_e4m3_to_f32(c.k[i]) * c.scales[0], vf[i] = fp8_e4m3_to_f32(c.v[i]) * c.scales[1];
  const std::vector<float> qkv = random_floats(W, 2, -3.0f, 3.0f);
  float sinks[H] = {0.3f, -1.0f};
  int32_t pos = 3, seq = 0;
  std::vector<float> out_fp8(H * Dh), out_f32(H * Dh);
  for (const bool fp8 : {true, false}) {
    const ops::KvLayer layer = fp8 ? c.layer()
                                   : ops::KvLayer{.k = Tensor(kf.data(), DType::F32, {1, 4, Hkv, Dh}),
                                                  .v = Tensor(vf.data(), DType::F32, {1, 4, Hkv, Dh})};
    ASSERT_TRUE(ops::attention(test::ctx(), {.qkv = Tensor(const_cast<float*>(qkv.data()), DType::F32, {1, W}),
                                .sinks = Tensor(sinks, DType::F32, {H}), .n_heads = H, .n_kv_heads = Hkv,
                                .head_dim = Dh, .scale = 0.5f,
                                .batch = {.positions = Tensor(&pos, DType::I32, {1}),
                                          .seq_index = Tensor(&seq, DType::I32, {1}),
                                          .block_tables = Tensor(c.table, DType::I32, {1, 1})},
                                .cache = layer,
                                .out = Tensor(fp8 ? out_fp8.data() : out_f32.data(), DType::F32, {1, H * Dh})})
                    .ok());
  }
  EXPECT_EQ(out_fp8, out_f32);
}

// qkv_projection with calibrate_kv: the scales come from this call's k and v (before RoPE), then
// the cache holds their codes; without an FP8 cache the flag is an error.
TEST(KvFp8, CalibratingProjectionSetsScalesThenWrites) {
  Cache c;
  const int D = 8;
  std::vector<float> x = random_floats(D, 3, -1.0f, 1.0f);
  std::vector<bf16> w;
  for (float f : random_floats(W * D, 4, -1.0f, 1.0f)) w.push_back(f32_to_bf16(f));
  std::vector<float> qkv(W), expect_scales(2);
  float inv_freq[Dh / 2] = {0.0f, 0.0f};
  int32_t pos = 1, seq = 0;
  const ops::QkvProjectionArgs a{.x = Tensor(x.data(), DType::F32, {1, D}),
                                 .w = Tensor(w.data(), DType::BF16, {W, D}),
                                 .qkv = Tensor(qkv.data(), DType::F32, {1, W}),
                                 .n_heads = H,
                                 .n_kv_heads = Hkv,
                                 .head_dim = Dh,
                                 .rope = {.inv_freq = Tensor(inv_freq, DType::F32, {Dh / 2})},
                                 .batch = {.positions = Tensor(&pos, DType::I32, {1}),
                                           .seq_index = Tensor(&seq, DType::I32, {1}),
                                           .block_tables = Tensor(c.table, DType::I32, {1, 1})},
                                 .cache = c.layer(),
                                 .calibrate_kv = true};
  const Status st = ops::qkv_projection(test::ctx(), a);
  ASSERT_TRUE(st.ok()) << st.message();
  std::vector<float> unrotated = qkv;  // no rotation (inv_freq 0): qkv is the linear output
  ASSERT_TRUE(ops::kv_scales(test::ctx(), {.qkv = Tensor(unrotated.data(), DType::F32, {1, W}), .n_heads = H, .n_kv_heads = Hkv,
                              .head_dim = Dh, .scales = Tensor(expect_scales.data(), DType::F32, {2})})
                  .ok());
  EXPECT_EQ(c.scales[0], expect_scales[0]);
  EXPECT_EQ(c.scales[1], expect_scales[1]);
  EXPECT_NE(c.scales[0], 0.01f);
  for (int i = 0; i < Dh; ++i)
    EXPECT_EQ(c.v[size_t(Dh + i)], f32_to_fp8_e4m3(qkv[size_t((H + 1) * Dh + i)] * (1.0f / c.scales[1]))) << i;
  // The largest |v| lands at 448 / headroom = 224 (its code's value within a half step).
  float vmax = 0;
  for (int i = 0; i < Dh; ++i) vmax = std::max(vmax, std::fabs(fp8_e4m3_to_f32(c.v[size_t(Dh + i)])));
  EXPECT_NEAR(vmax, 448.0f / ops::kKvScaleHeadroom, 16.0f);

  std::vector<float> kf(c.k.size()), vf(c.v.size());
  ops::QkvProjectionArgs bf = a;
  bf.cache = {.k = Tensor(kf.data(), DType::F32, {1, 4, Hkv, Dh}), .v = Tensor(vf.data(), DType::F32, {1, 4, Hkv, Dh})};
  EXPECT_FALSE(ops::qkv_projection(test::ctx(), bf).ok()) << "calibrate_kv needs an FP8 cache";
}

TEST(KvFp8, DispatchChecksTheScales) {
  Cache c;
  std::vector<float> qkv(W), out(H * Dh);
  float sinks[H] = {0, 0};
  int32_t pos = 0, seq = 0;
  ops::KvLayer layer = c.layer();
  layer.scales = Tensor();
  const Status st = ops::attention(test::ctx(), {.qkv = Tensor(qkv.data(), DType::F32, {1, W}),
                                    .sinks = Tensor(sinks, DType::F32, {H}), .n_heads = H, .n_kv_heads = Hkv,
                                    .head_dim = Dh,
                                    .batch = {.positions = Tensor(&pos, DType::I32, {1}),
                                              .seq_index = Tensor(&seq, DType::I32, {1}),
                                              .block_tables = Tensor(c.table, DType::I32, {1, 1})},
                                    .cache = layer,
                                    .out = Tensor(out.data(), DType::F32, {1, H * Dh})});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("kv scales"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace mx
