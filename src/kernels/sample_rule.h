// The sampling rule shared by the CPU and CUDA backends of ops::sample: the order-preserving
// integer key of a float (for exact threshold searches) and the per-step uniform draw.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/random_hash.h"

namespace mx {

// Monotonic map float -> int32: a < b  <=>  float_key(a) < float_key(b) (no NaNs).
MX_HOST_DEVICE inline int32_t float_key(float f) {
  int32_t i;
#if defined(__CUDA_ARCH__)
  i = __float_as_int(f);
#else
  std::memcpy(&i, &f, 4);
#endif
  return i >= 0 ? i : int32_t(0x80000000u - uint32_t(i)) ;
}

MX_HOST_DEVICE inline float key_float(int32_t k) {
  const int32_t i = k >= 0 ? k : int32_t(0x80000000u - uint32_t(k));
#if defined(__CUDA_ARCH__)
  return __int_as_float(i);
#else
  float f;
  std::memcpy(&f, &i, 4);
  return f;
#endif
}

// Uniform in [0, 1) from (seed, position), 24 bits.
MX_HOST_DEVICE inline float sample_uniform(int32_t seed, int32_t position) {
  const uint64_t h = random_hash(uint64_t(uint32_t(seed)) * 0x100000001B3ull + 0x5bd1e995u, uint64_t(uint32_t(position)));
  return float(h >> 40) * (1.0f / 16777216.0f);
}

}  // namespace mx
