// Element types and their exact conversions: bf16 (round-to-nearest-even), fp8 e4m3,
// e8m0 (MXFP4 block scale, 2^(e-127)) and fp4 e2m1 (MXFP4 element, low nibble = even element).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace mx {

enum class DType : uint8_t { F32, F16, BF16, F8_E4M3, U8, I8, I32, I64, BOOL, F64, I16, U16, U32, U64 };

std::string_view dtype_name(DType t);  // safetensors spelling: "F32", "BF16", "U8", ...
std::optional<DType> dtype_from_name(std::string_view name);
size_t dtype_size(DType t);

// bf16 stored as its raw 16 bits.
struct bf16 {
  uint16_t bits = 0;
};

inline float bf16_to_f32(bf16 v) {
  uint32_t u = uint32_t(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round-to-nearest-even; NaN stays NaN.
inline bf16 f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return bf16{uint16_t((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{uint16_t(u >> 16)};
}

inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// FP4 E2M1 code (0..15, bit 3 = sign) -> value (GPTOSS_SPEC §3).
inline constexpr float kFp4Values[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                         -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// E8M0 scale byte -> 2^(e-127). e = 255 gives inf like the reference (no NaN handling).
inline float e8m0_to_f32(uint8_t e) { return std::ldexp(1.0f, int(e) - 127); }

// One MXFP4 block: 16 bytes -> 32 floats; element 2b = low nibble of byte b, 2b+1 = high nibble.
inline void decode_mxfp4_block(const uint8_t* bytes16, uint8_t scale, float* out32) {
  const float s = e8m0_to_f32(scale);
  for (int b = 0; b < 16; ++b) {
    out32[2 * b] = kFp4Values[bytes16[b] & 0x0f] * s;
    out32[2 * b + 1] = kFp4Values[bytes16[b] >> 4] * s;
  }
}

// FP4 E2M1 code of a value (round to nearest, ties to the even code, saturating to ±6; the sign
// bit follows the sign of v, -0.0 included). v must not be NaN.
uint8_t f32_to_e2m1(float v);

// MXFP4 block quantization (--mxfp4-layers), the OCP Microscaling rule: shared exponent
// X = floor(log2(amax)) - 2 (2 = the largest E2M1 exponent), clamped to [-126, 127] (scale byte
// 1..254: 2^(s-127) stays a normal float for the kernels), each value v -> f32_to_e2m1(v / 2^X).
// amax lands in [4, 8) · 2^X, so a block's largest values above 6 · 2^X saturate to 6 · 2^X (as
// OCP specifies); an all-zero block gets scale byte 127. Returns false (and writes nothing) when a
// value is NaN or infinite.
bool quantize_mxfp4_block(const float* in32, uint8_t* bytes16, uint8_t* scale);

// FP8 E4M3 (OCP, finite-only "fn" variant: no inf, 0x7f/0xff = NaN, max 448).
float fp8_e4m3_to_f32(uint8_t v);
// Round-to-nearest-even, saturating to ±448 (as cvt.rn.satfinite.e4m3x2.f32); NaN -> 0x7f.
uint8_t f32_to_fp8_e4m3(float f);

// MX FP8 block quantization (32 values, one E8M0 scale), the rule the CUDA kernels use: with
// amax = m·2^e (1 <= m < 2), scale = 2^(e-8), or 2^(e-7) when m > 1.75, so that amax/scale <= 448
// and no value saturates; the scale byte is clamped to [0, 253] (253 keeps 2^(127-s) a normal
// float). From the float bits of amax, exactly.
inline uint8_t mx_e4m3_scale(float amax) {
  uint32_t u;
  std::memcpy(&u, &amax, 4);
  u &= 0x7fffffffu;
  int s = int(u >> 23) - 8 + ((u & 0x7fffffu) > 0x600000u ? 1 : 0);
  return uint8_t(s < 0 ? 0 : s > 253 ? 253 : s);
}
// in32 -> codes32 and the scale byte; value i reads back as fp8_e4m3_to_f32(codes[i]) · 2^(s-127).
void quantize_mx_e4m3(const float* in32, uint8_t* codes32, uint8_t* scale);

}  // namespace mx
