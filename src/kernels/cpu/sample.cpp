// CPU reference of ops::sample (the rule is in ops.h): thresholds found by bisection over the
// order-preserving float keys, exactly as the CUDA kernel does, then an inverse-CDF draw in id order.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/sample_rule.h"

namespace mx::cpu {
namespace {

// Largest key v in [lo, hi] with pred(v) true, given pred(lo) is true and pred is monotone.
template <typename Pred>
int32_t largest_key(int32_t lo, int32_t hi, Pred pred) {
  while (lo < hi) {
    const int32_t mid = int32_t(lo + (int64_t(hi) - lo + 1) / 2);
    if (pred(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

int32_t sample_row(const float* l, int64_t V, const float* params, int32_t seed, int32_t position) {
  const float temperature = params[0], top_p = params[1], min_p = params[2];
  const int64_t top_k = int64_t(params[3]);
  int64_t best = 0;
  float lo_val = l[0];
  for (int64_t v = 1; v < V; ++v) {
    if (l[v] > l[best]) best = v;
    lo_val = std::min(lo_val, l[v]);
  }
  if (temperature <= 0.0f) return int32_t(best);
  const float m = l[best];
  const int32_t top = float_key(m);
  int32_t t = float_key(lo_val);
  if (top_k > 0 && top_k < V)
    t = largest_key(t, top, [&](int32_t key) {
      int64_t n = 0;
      for (int64_t v = 0; v < V; ++v) n += float_key(l[v]) >= key;
      return n >= top_k;
    });
  if (min_p > 0.0f) t = std::max(t, std::min(top, float_key(m + temperature * std::log(min_p))));
  auto mass = [&](int32_t key) {
    double z = 0;
    for (int64_t v = 0; v < V; ++v)
      if (float_key(l[v]) >= key) z += std::exp(double(l[v] - m) / temperature);
    return z;
  };
  if (top_p < 1.0f) {
    const double target = double(top_p) * mass(t);
    t = largest_key(t, top, [&](int32_t key) { return mass(key) >= target; });
  }
  const double u = double(sample_uniform(seed, position)) * mass(t);
  double acc = 0;
  int64_t last = best;
  for (int64_t v = 0; v < V; ++v) {
    if (float_key(l[v]) < t) continue;
    acc += std::exp(double(l[v] - m) / temperature);
    last = v;
    if (acc > u) return int32_t(v);
  }
  return int32_t(last);
}

}  // namespace

Status sample(const ops::SampleArgs& a) {
  const int64_t R = a.logits.dim(0), V = a.logits.dim(1);
  for (int64_t r = 0; r < R; ++r)
    a.ids.ptr<int32_t>()[r] = sample_row(a.logits.ptr<const float>() + r * V, V, a.params.ptr<const float>() + r * 4,
                                         a.seeds.ptr<const int32_t>()[r], a.positions.ptr<const int32_t>()[r]);
  return ok_status();
}

}  // namespace mx::cpu
