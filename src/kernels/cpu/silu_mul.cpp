// CPU reference for silu_mul, the gated activation of a Llama-style MLP (the EAGLE-3 draft model):
// out = silu(gate) · up over the two halves of each gate_up row, in FP32.
#include <cmath>

#include "core/parallel.h"
#include "kernels/cpu/cpu_ops.h"

namespace mx::cpu {

Status silu_mul(const ops::SiluMulArgs& a) {
  const int64_t T = a.out.dim(0), I = a.out.dim(1);
  const float* gate_up = a.gate_up.ptr<const float>();
  float* out = a.out.ptr<float>();
  parallel_for(T, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* gate = gate_up + t * 2 * I;
      const float* up = gate + I;
      for (int64_t i = 0; i < I; ++i) {
        const float g = gate[i];
        out[t * I + i] = g / (1.0f + std::exp(-g)) * up[i];  // exp overflow for g < -88: -0 · up
      }
    }
  });
  return ok_status();
}

}  // namespace mx::cpu
