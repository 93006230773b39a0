// MXFP4 decoding (FP4 E2M1 table, nibble order, E8M0 scales) and bf16 rounding, checked bitwise
// against GPTOSS_SPEC §3 and hand-worked values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

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

}  // namespace
}  // namespace mx
