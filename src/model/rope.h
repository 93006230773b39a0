// YaRN RoPE parameters (GPTOSS_SPEC §4.4): per-pair inverse frequencies with the linear ramp
// between the correction dims, and the concentration c = 0.1·ln(factor) + 1 on cos and sin.
#pragma once

#include <vector>

#include "model/config.h"

namespace mx {

struct YarnRope {
  std::vector<float> inv_freq;  // (Dh/2)
  float concentration = 1.0f;
  double low = 0, high = 0;     // ramp bounds (correction dims)
};

YarnRope compute_yarn_rope(const ModelConfig& c);

}  // namespace mx
