// YaRN inverse frequencies and concentration, as in the reference (truncate=false keeps the
// fractional ramp bounds; HF additionally clamps them to [0, Dh-1]).
#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace mx {

YarnRope compute_yarn_rope(const ModelConfig& c) {
  const double d = c.head_dim, base = c.rope_theta, s = c.rope_scaling.factor;
  const double L0 = c.rope_scaling.original_max_position_embeddings;
  auto correction_dim = [&](double rotations) {
    return d * std::log(L0 / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
  };
  YarnRope r;
  r.low = correction_dim(c.rope_scaling.beta_fast);
  r.high = correction_dim(c.rope_scaling.beta_slow);
  if (c.rope_scaling.truncate) {
    r.low = std::floor(r.low);
    r.high = std::ceil(r.high);
  }
  r.low = std::max(r.low, 0.0);
  r.high = std::min(r.high, d - 1);
  const double span = r.high == r.low ? 0.001 : r.high - r.low;
  const int half = c.head_dim / 2;
  r.inv_freq.resize(size_t(half));
  for (int i = 0; i < half; ++i) {
    // freq_i = θ^(2i/d), computed in fp32 like the references.
    const float freq = std::pow(float(base), float(2 * i) / float(d));
    const double ramp = std::clamp((i - r.low) / span, 0.0, 1.0);
    const double extrapolation = 1.0 - ramp;  // weight of the original frequency
    const double inv = (1.0 / (s * freq)) * (1.0 - extrapolation) + (1.0 / freq) * extrapolation;
    r.inv_freq[size_t(i)] = float(inv);
  }
  r.concentration = s > 1.0 ? float(0.1 * std::log(s) + 1.0) : 1.0f;
  return r;
}

}  // namespace mx
