// DType names and sizes (safetensors spelling) and the fp8 e4m3 decoder.
#include "core/dtype.h"

#include <array>
#include <utility>

namespace mx {
namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeInfo, 14> kInfo = {{
    {DType::F32, "F32", 4},      {DType::F16, "F16", 2},  {DType::BF16, "BF16", 2},
    {DType::F8_E4M3, "F8_E4M3", 1}, {DType::U8, "U8", 1},   {DType::I8, "I8", 1},
    {DType::I32, "I32", 4},      {DType::I64, "I64", 8},  {DType::BOOL, "BOOL", 1},
    {DType::F64, "F64", 8},      {DType::I16, "I16", 2},  {DType::U16, "U16", 2},
    {DType::U32, "U32", 4},      {DType::U64, "U64", 8},
}};
}  // namespace

std::string_view dtype_name(DType t) {
  for (const auto& i : kInfo)
    if (i.type == t) return i.name;
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.name == name) return i.type;
  return std::nullopt;
}

size_t dtype_size(DType t) {
  for (const auto& i : kInfo)
    if (i.type == t) return i.size;
  return 0;
}

float fp8_e4m3_to_f32(uint8_t v) {
  const int sign = v >> 7, exp = (v >> 3) & 0xf, man = v & 0x7;
  float mag;
  if (exp == 0xf && man == 0x7) return NAN;
  if (exp == 0) mag = std::ldexp(float(man), -9);  // subnormal: man/8 * 2^-6
  else mag = std::ldexp(1.0f + float(man) / 8.0f, exp - 7);
  return sign ? -mag : mag;
}

uint8_t f32_to_fp8_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::fabs(f);
  if (a > 448.0f) return sign | 0x7e;  // satfinite
  // Steps of 2^-9 below 2^-6 (subnormals), else 2^(e-3) in [2^e, 2^(e+1)); nearbyint rounds to
  // nearest even, and a carry into the next binade is the next code.
  const int e = a < 0x1p-6f ? -6 : std::ilogb(a);
  const int m = int(std::nearbyint(std::ldexp(a, 3 - e)));  // exact scaling; 0..16
  const int code = e == -6 && m < 8 ? m : ((e + 7) << 3) + (m - 8);
  return uint8_t(sign | (code > 0x7e ? 0x7e : code));
}

void quantize_mx_e4m3(const float* in32, uint8_t* codes32, uint8_t* scale) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(in32[i]));
  *scale = mx_e4m3_scale(amax);
  const float inv = std::ldexp(1.0f, 127 - int(*scale));
  for (int i = 0; i < 32; ++i) codes32[i] = f32_to_fp8_e4m3(in32[i] * inv);
}

uint8_t f32_to_e2m1(float v) {
  const uint8_t sign = std::signbit(v) ? 0x8 : 0x0;
  const float a = std::fabs(v);
  // Midpoints of the grid 0, 0.5, 1, 1.5, 2, 3, 4, 6; a tie goes to the even code (<= where the
  // lower code is even, < where it is odd).
  const uint8_t code = a <= 0.25f ? 0 : a < 0.75f ? 1 : a <= 1.25f ? 2 : a < 1.75f ? 3
                     : a <= 2.5f  ? 4 : a < 3.5f  ? 5 : a <= 5.0f  ? 6 : 7;
  return sign | code;
}

bool quantize_mxfp4_block(const float* in32, uint8_t* bytes16, uint8_t* scale) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) {
    if (!std::isfinite(in32[i])) return false;
    amax = std::fmax(amax, std::fabs(in32[i]));
  }
  int x = 0;  // shared exponent: 0 (scale 1) for an all-zero block
  if (amax > 0.0f) x = std::ilogb(amax) - 2;
  x = x < -126 ? -126 : x > 127 ? 127 : x;
  *scale = uint8_t(x + 127);
  for (int b = 0; b < 16; ++b)
    bytes16[b] = uint8_t(f32_to_e2m1(std::ldexp(in32[2 * b], -x)) | (f32_to_e2m1(std::ldexp(in32[2 * b + 1], -x)) << 4));
  return true;
}

}  // namespace mx
