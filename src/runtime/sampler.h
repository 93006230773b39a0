// Token sampling from one row of logits on the host: greedy (argmax, lowest id on ties), or
// temperature with optional top-k, top-p and min-p filtering, from a seeded generator.
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace mx {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}
  int32_t sample(std::span<const float> logits);

 private:
  int32_t sample_unsorted(std::span<const float> logits);
  SamplingParams p_;
  std::mt19937_64 rng_;
};

int32_t argmax(std::span<const float> logits);

}  // namespace mx
