// Host sampler: filter candidates (top-k, then top-p over the sorted softmax, then min-p),
// renormalise and draw.
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace mx {

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[size_t(best)]) best = int32_t(i);
  return best;
}

// No top-k / top-p: the softmax in id order (min-p is a threshold on the logit), no sort.
int32_t Sampler::sample_unsorted(std::span<const float> logits) {
  const double m = logits[size_t(argmax(logits))];
  const double floor = p_.min_p > 0.0f ? m + p_.temperature * std::log(double(p_.min_p)) : -INFINITY;
  std::vector<double> w(logits.size());
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = logits[i] >= floor ? std::exp((double(logits[i]) - m) / p_.temperature) : 0.0;
  std::discrete_distribution<size_t> pick(w.begin(), w.end());
  return int32_t(pick(rng_));
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (p_.temperature <= 0.0f || p_.top_k == 1) return argmax(logits);
  if (p_.top_p >= 1.0f && (p_.top_k <= 0 || size_t(p_.top_k) >= logits.size())) return sample_unsorted(logits);
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  size_t n = ids.size();
  auto by_logit = [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b); };
  if (p_.top_k > 0 && size_t(p_.top_k) < n) {
    std::partial_sort(ids.begin(), ids.begin() + p_.top_k, ids.end(), by_logit);
    n = size_t(p_.top_k);
  } else {
    std::sort(ids.begin(), ids.end(), by_logit);
  }
  const double m = logits[size_t(ids[0])];
  std::vector<double> prob(n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += prob[i] = std::exp((double(logits[size_t(ids[i])]) - m) / p_.temperature);
  for (auto& p : prob) p /= sum;
  if (p_.top_p < 1.0f) {
    double cum = 0;
    size_t keep = 0;
    while (keep < n && (keep == 0 || cum < p_.top_p)) cum += prob[keep++];
    n = keep;
  }
  if (p_.min_p > 0.0f) {
    const double floor = p_.min_p * prob[0];
    size_t keep = 1;
    while (keep < n && prob[keep] >= floor) ++keep;
    n = keep;
  }
  std::discrete_distribution<size_t> pick(prob.begin(), prob.begin() + ptrdiff_t(n));
  return ids[pick(rng_)];
}

}  // namespace mx
