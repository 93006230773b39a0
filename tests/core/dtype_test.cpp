// MXFP4 decoding (FP4 E2M1 table, nibble order, E8M0 scales), bf16 rounding and FP8 E4M3
// encoding with MX block scales, checked bitwise against GPTOSS_SPEC §3 and hand-worked values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/dtype.h"

namespace mx {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(Mxfp4, CodeTableMatchesSpec) {
  // GPTOSS_SPEC §3 table, codes 0..15 (bit 3 = sign; -0.0 keeps its sign bit).
  const float spec[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  for (int c = 0; c < 16; ++c) EXPECT_EQ(bits(kFp4Values[c]), bits(spec[c])) << "code " << c;
}

TEST(Mxfp4, E8M0IsPowerOfTwoWithBias127) {
  EXPECT_EQ(e8m0_to_f32(127), 1.0f);
  EXPECT_EQ(e8m0_to_f32(128), 2.0f);
  EXPECT_EQ(e8m0_to_f32(120), 1.0f / 128);
  EXPECT_EQ(e8m0_to_f32(0), std::ldexp(1.0f, -127));
  EXPECT_TRUE(std::isinf(e8m0_to_f32(255)));  // the reference gives inf, no NaN handling
}

TEST(Mxfp4, LowNibbleIsEvenElement) {
  uint8_t block[16] = {};
  block[0] = 0x72;   // element 0 = code 2 (+1.0), element 1 = code 7 (+6.0)
  block[15] = 0x9F;  // element 30 = code 15 (-6.0), element 31 = code 9 (-0.5)
  float out[32];
  decode_mxfp4_block(block, 126, out);  // scale 2^-1
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[1], 3.0f);
  EXPECT_EQ(out[30], -3.0f);
  EXPECT_EQ(out[31], -0.25f);
  for (int i = 2; i < 30; ++i) EXPECT_EQ(out[i], 0.0f) << i;
}

TEST(Mxfp4, EveryByteAndScaleDecodesExactly) {
  for (int scale : {100, 119, 127, 130, 140}) {
    for (int byte = 0; byte < 256; ++byte) {
      uint8_t block[16];
      std::memset(block, byte, 16);
      float out[32];
      decode_mxfp4_block(block, uint8_t(scale), out);
      const float s = std::ldexp(1.0f, scale - 127);
      EXPECT_EQ(bits(out[0]), bits(kFp4Values[byte & 15] * s));
      EXPECT_EQ(bits(out[1]), bits(kFp4Values[byte >> 4] * s));
      // Every product is representable in bf16 (2-bit mantissa times a power of two).
      EXPECT_EQ(round_bf16(out[0]), out[0]);
    }
  }
}

// --mxfp4-layers quantizer (core/dtype.h quantize_mxfp4_block), against hand-worked blocks.
struct QuantizedBlock {
  uint8_t bytes[16] = {}, scale = 0;
  bool ok = false;
};
QuantizedBlock quantize(const float (&in)[32]) {
  QuantizedBlock q;
  q.ok = quantize_mxfp4_block(in, q.bytes, &q.scale);
  return q;
}
uint8_t code_of(const QuantizedBlock& q, int i) { return i % 2 ? q.bytes[i / 2] >> 4 : q.bytes[i / 2] & 0xf; }

TEST(Mxfp4Quantize, ZeroBlockGetsScaleOneAndZeroCodes) {
  float in[32] = {};
  in[5] = -0.0f;
  const QuantizedBlock q = quantize(in);
  ASSERT_TRUE(q.ok);
  EXPECT_EQ(q.scale, 127);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(code_of(q, i), i == 5 ? 0x8 : 0x0) << i;  // -0.0 keeps its sign
}

TEST(Mxfp4Quantize, MaximumOnAPowerOfTwo) {
  // amax = 4 = 2^2: shared exponent 0 (scale byte 127), 4 -> code 6 exactly.
  float in[32] = {4.0f, -2.0f, 1.0f, 0.5f, 3.0f, -1.5f, 0.2f, 0.3f};
  QuantizedBlock q = quantize(in);
  ASSERT_TRUE(q.ok);
  EXPECT_EQ(q.scale, 127);
  const uint8_t want[8] = {6, 0x8 | 4, 2, 1, 5, 0x8 | 3, 0, 1};  // 0.2 -> 0, 0.3 -> 0.5
  for (int i = 0; i < 8; ++i) EXPECT_EQ(code_of(q, i), want[i]) << i;
  for (int i = 8; i < 32; ++i) EXPECT_EQ(code_of(q, i), 0) << i;
  // amax = 8 = 2^3: exponent 1; 5/2 = 2.5 is a tie (2 or 3) -> the even code 4 (2.0).
  float in8[32] = {8.0f, 5.0f, 0.75f, -7.0f};
  q = quantize(in8);
  EXPECT_EQ(q.scale, 128);
  EXPECT_EQ(code_of(q, 0), 6);         // 4 · 2
  EXPECT_EQ(code_of(q, 1), 4);         // 2 · 2
  EXPECT_EQ(code_of(q, 2), 1);         // 0.375 -> 0.5
  EXPECT_EQ(code_of(q, 3), 0x8 | 6);  // -3.5 ties to -4 (even code)
}

TEST(Mxfp4Quantize, LargestValuesSaturateAtSix) {
  // amax = 7 = 1.75 · 2^2: exponent 0, so 7 and 6.5 saturate to 6 (the OCP rule).
  float in[32] = {7.0f, -6.5f, 5.5f, 5.0f, 4.5f};
  const QuantizedBlock q = quantize(in);
  EXPECT_EQ(q.scale, 127);
  EXPECT_EQ(code_of(q, 0), 7);
  EXPECT_EQ(code_of(q, 1), 0x8 | 7);
  EXPECT_EQ(code_of(q, 2), 7);  // 5.5 -> 6
  EXPECT_EQ(code_of(q, 3), 6);  // 5 ties -> 4 (even)
  EXPECT_EQ(code_of(q, 4), 6);  // 4.5 -> 4
}

TEST(Mxfp4Quantize, TiesGoToTheEvenCode) {
  const float mids[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const uint8_t want[7] = {0, 2, 2, 4, 4, 6, 6};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(f32_to_e2m1(mids[i]), want[i]) << mids[i];
    EXPECT_EQ(f32_to_e2m1(-mids[i]), 0x8 | want[i]) << -mids[i];
    EXPECT_EQ(f32_to_e2m1(std::nextafter(mids[i], 0.0f)), i % 2 ? want[i] - 1 : want[i]) << mids[i];
    EXPECT_EQ(f32_to_e2m1(std::nextafter(mids[i], 9.0f)), i % 2 ? want[i] : want[i] + 1) << mids[i];
  }
}

TEST(Mxfp4Quantize, SubnormalSizedBlocksClampTheScale) {
  // amax = 2^-125: exponent -127 would be wanted, clamped to -126 (scale byte 1); 2^-125 / 2^-126 = 2.
  float in[32] = {std::ldexp(1.0f, -125), -std::ldexp(1.0f, -126), std::ldexp(1.0f, -130)};
  QuantizedBlock q = quantize(in);
  ASSERT_TRUE(q.ok);
  EXPECT_EQ(q.scale, 1);
  EXPECT_EQ(code_of(q, 0), 4);        // 2.0
  EXPECT_EQ(code_of(q, 1), 0x8 | 2);  // -1.0
  EXPECT_EQ(code_of(q, 2), 0);        // 1/16 -> 0
  float sub[32] = {std::ldexp(1.0f, -140), -std::ldexp(3.0f, -141)};  // float subnormals only
  q = quantize(sub);
  EXPECT_EQ(q.scale, 1);
  EXPECT_EQ(code_of(q, 0), 0);
  EXPECT_EQ(code_of(q, 1), 0x8);
}

TEST(Mxfp4Quantize, NanAndInfAreRefused) {
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    float in[32] = {1.0f};
    in[17] = bad;
    QuantizedBlock q;
    std::memset(q.bytes, 0xab, 16);
    q.scale = 0xcd;
    EXPECT_FALSE(quantize_mxfp4_block(in, q.bytes, &q.scale));
    EXPECT_EQ(q.scale, 0xcd) << "nothing written";
    EXPECT_EQ(q.bytes[0], 0xab);
  }
}

TEST(Mxfp4Quantize, EveryValueGoesToTheNearestGridPointOfItsScale) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const float mag = std::ldexp(1.0f, trial % 60 - 30);
    std::uniform_real_distribution<float> u(-mag, mag);
    float in[32], amax = 0.0f;
    for (float& v : in) amax = std::fmax(amax, std::fabs(v = round_bf16(u(rng))));
    const QuantizedBlock q = quantize(in);
    ASSERT_TRUE(q.ok);
    const float scale = e8m0_to_f32(q.scale);
    EXPECT_GE(amax / scale, 4.0f);
    EXPECT_LT(amax / scale, 8.0f);
    float back[32];
    decode_mxfp4_block(q.bytes, q.scale, back);
    for (int i = 0; i < 32; ++i) {
      float best = INFINITY;  // distance to the nearest of the 16 codes
      for (float g : kFp4Values) best = std::fmin(best, std::fabs(g * scale - in[i]));
      EXPECT_EQ(std::fabs(back[i] - in[i]), best) << "trial " << trial << " element " << i;
    }
  }
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f).bits, 0x3f80);
  // 1 + 2^-8 is exactly half-way between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);
  // 1 + 3·2^-8 is half-way between 1.0078125 (odd) and 1.015625 (even): goes up.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);
  EXPECT_EQ(bf16_to_f32(bf16{0xc000}), -2.0f);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(Fp8E4M3, DecodesKnownValues) {
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_f32(0xb8), -1.0f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
}

TEST(Fp8E4M3, EncodesEveryCodeBackAndRoundsToNearestEven) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    EXPECT_EQ(f32_to_fp8_e4m3(fp8_e4m3_to_f32(uint8_t(c))), c) << "code " << c;
  }
  for (int c = 0; c < 0x7e; ++c) {  // the midpoint of two neighbours goes to the even code
    const float mid = 0.5f * (fp8_e4m3_to_f32(uint8_t(c)) + fp8_e4m3_to_f32(uint8_t(c + 1)));
    EXPECT_EQ(f32_to_fp8_e4m3(mid), c % 2 ? c + 1 : c) << "between " << c << " and " << c + 1;
    EXPECT_EQ(f32_to_fp8_e4m3(-mid), 0x80 | (c % 2 ? c + 1 : c));
    EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(mid, 0.0f)), c);
    EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(mid, 1e9f)), c + 1);
  }
  EXPECT_EQ(f32_to_fp8_e4m3(464.0f), 0x7e);  // saturates instead of rounding to NaN
  EXPECT_EQ(f32_to_fp8_e4m3(-1e30f), 0xfe);
  EXPECT_EQ(f32_to_fp8_e4m3(NAN), 0x7f);
}

TEST(Fp8E4M3, MxBlockScaleKeepsEveryValueInRange) {
  EXPECT_EQ(mx_e4m3_scale(448.0f), 127);  // 448 = 1.75 · 2^8: scale 1
  EXPECT_EQ(mx_e4m3_scale(std::nextafter(448.0f, 1e9f)), 128);
  EXPECT_EQ(mx_e4m3_scale(1.0f), 119);
  EXPECT_EQ(mx_e4m3_scale(0.0f), 0);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const float mag = std::ldexp(1.0f, trial % 40 - 20);
    std::uniform_real_distribution<float> u(-mag, mag);
    float in[32], amax = 0.0f;
    for (float& v : in) amax = std::fmax(amax, std::fabs(v = u(rng)));
    uint8_t codes[32], s;
    quantize_mx_e4m3(in, codes, &s);
    const float scale = e8m0_to_f32(s);
    EXPECT_LE(amax / scale, 448.0f);
    EXPECT_GT(amax / scale, 224.0f) << "the scale is the smallest power of two that fits";
    for (int i = 0; i < 32; ++i) {
      const float back = fp8_e4m3_to_f32(codes[i]) * scale;
      // half a step of e4m3 (3 mantissa bits) relative, or half the subnormal step
      EXPECT_LE(std::fabs(back - in[i]), std::fmax(std::fabs(in[i]) / 16, std::ldexp(scale, -10)) * 1.0001f);
    }
  }
}

}  // namespace
}  // namespace mx
