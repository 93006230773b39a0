// The seeded per-element hash behind ops::fill_random, shared by the CPU and CUDA backends so
// that both produce the same synthetic weights (splitmix64 finaliser).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define MX_HOST_DEVICE __host__ __device__
#else
#define MX_HOST_DEVICE
#endif

namespace mx {

MX_HOST_DEVICE inline uint64_t random_hash(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Maps a hash to [-1, 1) using its top 24 bits.
MX_HOST_DEVICE inline float hash_to_signed_unit(uint64_t h) { return float(h >> 40) * (2.0f / 16777216.0f) - 1.0f; }

}  // namespace mx
