// Host sampler: filter candidates (top-k, then top-p over the softmax in descending order, then
// min-p), renormalise and draw. Costs at a 201,088-token vocabulary are in docs/PERFORMANCE.md:
// only as many candidates are sorted as the filters need (top-k: a partial sort of k; top-p: the
// tokens above a weight bound that leaves top_p of the mass above it, a partial sort of 1024 of
// those first, or a weight threshold from a histogram when they are many), the weights use an exp
// that the compiler vectorises, and the draw finds a block of 512 weights by their sums first.
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <vector>

namespace mx {

namespace {

// e^x for x <= 0 (a weight relative to the largest), within ~3e-6 relative; 0 where x < lowest
// (lowest >= -87, so the result stays a normal float). 2^t = 2^n · 2^f with n = round(t), f in
// [-0.5, 0.5], 2^f by its degree-6 minimax polynomial (the coefficients of Cephes' exp2f).
// Branch-free and without float -> int conversions, so the loops over the vocabulary vectorise
// (this file is built with -fno-trapping-math, see src/runtime/CMakeLists.txt).
inline float exp_nonpos(float x, float lowest) {
  const float keep = x >= lowest ? 1.0f : 0.0f;
  const float t = std::max(x, lowest) * 1.44269504088896341f;
  const float shifted = t + 12582912.0f;  // 1.5 · 2^23: the low mantissa bits hold round(t)
  const float f = t - (shifted - 12582912.0f);
  float p = 1.535336188319500e-4f;
  p = p * f + 1.339887440266574e-3f;
  p = p * f + 9.618437357674640e-3f;
  p = p * f + 5.550332471162809e-2f;
  p = p * f + 2.402264791363012e-1f;
  p = p * f + 6.931472028550421e-1f;
  p = p * f + 1.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  bits = (bits - 0x4B400000 + 127) << 23;  // 2^round(t)
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale * keep;
}
constexpr float kLowest = -87.0f;

// The largest logit, with 8 independent lanes (a single running max is one long dependency chain).
float max_logit(std::span<const float> l) {
  float m[8];
  for (float& x : m) x = -INFINITY;
  size_t i = 0;
  for (; i + 8 <= l.size(); i += 8)
    for (int j = 0; j < 8; ++j) m[j] = std::max(m[j], l[i + size_t(j)]);
  for (; i < l.size(); ++i) m[0] = std::max(m[0], l[i]);
  return *std::max_element(m, m + 8);
}


// An index drawn with probability w[i] / total (total = the sum of w[0..n)) from one uniform
// number: the inverse CDF in index order.
template <typename W>
size_t draw(const W& w, size_t n, double total, std::mt19937_64& rng) {
  const double u = std::uniform_real_distribution<double>(0.0, total)(rng);
  double cum = 0;
  size_t last = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!(w[i] > 0)) continue;
    cum += w[i];
    last = i;
    if (u < cum) return i;
  }
  return last;  // rounding left u at the end: the last candidate with weight
}

// Weights of a whole vocabulary in blocks: the draw finds the block from the block sums, then
// the index inside it, instead of one running sum over every weight.
constexpr size_t kBlock = 512;
struct BlockedWeights {
  std::vector<float> w;
  std::vector<double> sums;
  double total = 0;
};
// The block sums and the total of bw.w.
void block_sums(BlockedWeights& bw) {
  const size_t V = bw.w.size();
  bw.sums.assign((V + kBlock - 1) / kBlock, 0.0);
  bw.total = 0;
  for (size_t b = 0; b < bw.sums.size(); ++b) {
    const size_t lo = b * kBlock, hi = std::min(V, lo + kBlock);
    float acc[8] = {};
    size_t i = lo;
    for (; i + 8 <= hi; i += 8)
      for (size_t j = 0; j < 8; ++j) acc[j] += bw.w[i + j];
    for (; i < hi; ++i) acc[0] += bw.w[i];
    double s = 0;
    for (float a : acc) s += a;
    bw.sums[b] = s;
    bw.total += s;
  }
}

// w[i] = e^((l_i - m) / T) where l_i >= floor, else 0.
void weigh(std::span<const float> l, float m, float inv_t, float floor, BlockedWeights& bw) {
  const size_t V = l.size();
  bw.w.resize(V);
  const float lowest = std::max(kLowest, floor == -INFINITY ? kLowest : (floor - m) * inv_t);
  const float* __restrict in = l.data();
  float* __restrict w = bw.w.data();
  for (size_t i = 0; i < V; ++i) w[i] = exp_nonpos((in[i] - m) * inv_t, lowest);
  block_sums(bw);
}

size_t draw_blocked(const BlockedWeights& bw, std::mt19937_64& rng) {
  const double u = std::uniform_real_distribution<double>(0.0, bw.total)(rng);
  double cum = 0;
  size_t b = 0;
  while (b + 1 < bw.sums.size() && (bw.sums[b] <= 0 || u >= cum + bw.sums[b])) cum += bw.sums[b++];
  const size_t lo = b * kBlock, hi = std::min(bw.w.size(), lo + kBlock);
  const std::span<const float> in(bw.w.data() + lo, hi - lo);
  return lo + draw(in, in.size(), bw.sums[b], rng);
}

// Top-p by sorting this many candidates at most; more (a flat softmax) by a threshold instead.
constexpr size_t kSortMax = 4096;

// Top-p (then min-p) as a weight threshold: the largest tau whose tokens (w >= tau) hold top_p
// of the mass; with distinct weights that is exactly the set of the sorted prefix, ties at the
// bound are all kept. Two passes: the mass per 16-bit prefix of the weights' float bits (the order
// of non-negative floats), walked from the top to the prefix where the mass is reached; then the
// weights with that prefix, sorted. The draw is over the kept weights in id order.
size_t sample_by_threshold(BlockedWeights& bw, float top_p, float min_p, std::mt19937_64& rng) {
  const double target = double(top_p) * bw.total;
  auto prefix = [](float w) {
    uint32_t u;
    std::memcpy(&u, &w, sizeof u);
    return u >> 16;  // w in [0, 1]: prefixes 0 .. 0x3f80
  };
  std::vector<double> mass(0x3f81, 0.0);
  for (float x : bw.w) mass[prefix(x)] += x;
  double above = 0;
  uint32_t b = 0x3f80;
  for (; b > 0 && above + mass[b] < target; --b) above += mass[b];
  std::vector<float> in_b;
  for (float x : bw.w)
    if (prefix(x) == b) in_b.push_back(x);
  std::sort(in_b.begin(), in_b.end(), std::greater<>());
  float tau = 0.0f;
  for (float x : in_b) {
    above += x;
    tau = x;
    if (above >= target) break;
  }
  tau = std::max(tau, min_p);  // min-p: a weight of at least min_p times the largest
  for (float& x : bw.w) x = x >= tau ? x : 0.0f;
  block_sums(bw);
  return draw_blocked(bw, rng);
}

}  // namespace

// The largest logit first (8 lanes), then the first index holding it: the lowest id on ties.
int32_t argmax(std::span<const float> logits) {
  const float m = max_logit(logits);
  for (size_t i = 0; i < logits.size(); ++i)
    if (logits[i] == m) return int32_t(i);
  return 0;  // all NaN
}

// No top-k / top-p: the softmax in id order (min-p is a threshold on the logit), no sort.
int32_t Sampler::sample_unsorted(std::span<const float> logits) {
  const float m = max_logit(logits);
  const float floor = p_.min_p > 0.0f ? m + p_.temperature * std::log(p_.min_p) : -INFINITY;
  BlockedWeights bw;
  weigh(logits, m, 1.0f / p_.temperature, floor, bw);
  return int32_t(draw_blocked(bw, rng_));
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (p_.temperature <= 0.0f || p_.top_k == 1) return argmax(logits);
  const size_t V = logits.size();
  const bool top_k = p_.top_k > 0 && size_t(p_.top_k) < V;
  if (p_.top_p >= 1.0f && !top_k) return sample_unsorted(logits);
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  };
  const float m = max_logit(logits), inv_t = 1.0f / p_.temperature;
  auto weight = [&](int32_t id) { return double(exp_nonpos((logits[size_t(id)] - m) * inv_t, kLowest)); };
  // The candidates in descending order as far as `sorted`, and the softmax normaliser: with top-k
  // the top k and their sum; else the whole vocabulary's sum, and as candidates the tokens whose
  // weight (relative to the largest, 1) reaches a bound that still leaves top_p of the mass above
  // it: the top-p set is a prefix of those (1e-4, else 1e-8). More than kSortMax of them, or no
  // such bound: sample_by_threshold.
  std::vector<int32_t> ids;
  size_t n = 0, sorted = 0;
  double total = 0;
  if (top_k) {
    ids.resize(V);
    std::iota(ids.begin(), ids.end(), 0);
    n = size_t(p_.top_k);
    std::partial_sort(ids.begin(), ids.begin() + ptrdiff_t(n), ids.end(), by_logit);
    sorted = n;
    for (size_t i = 0; i < n; ++i) total += weight(ids[i]);
  } else {
    BlockedWeights bw;
    weigh(logits, m, inv_t, -INFINITY, bw);
    total = bw.total;
    // The ids above each bound while they are few; past kSortMax only their mass is counted.
    bool few = false;
    for (const float bound : {1e-4f, 1e-8f}) {
      ids.clear();
      double mass = 0;
      size_t count = 0;
      for (size_t i = 0; i < V; ++i)
        if (bw.w[i] >= bound) {
          mass += bw.w[i];
          if (++count <= kSortMax) ids.push_back(int32_t(i));
        }
      if (mass >= double(p_.top_p) * total) {
        few = count <= kSortMax;
        break;
      }
    }
    if (!few) return int32_t(sample_by_threshold(bw, p_.top_p, p_.min_p, rng_));
    n = ids.size();
  }
  auto sort_to = [&](size_t k) {  // ids[0..k) in order; k == n sorts the rest after a prefix
    k = std::min(k, n);
    if (k <= sorted) return;
    if (k == n)
      std::sort(ids.begin() + ptrdiff_t(sorted), ids.begin() + ptrdiff_t(n), by_logit);
    else
      std::partial_sort(ids.begin() + ptrdiff_t(sorted), ids.begin() + ptrdiff_t(k), ids.begin() + ptrdiff_t(n),
                        by_logit);
    sorted = k;
  };
  std::vector<double> prob;
  if (p_.top_p < 1.0f) {
    double cum = 0;
    size_t keep = 0;
    for (size_t want = 1024; keep < n && (keep == 0 || cum < p_.top_p); want = n) {
      sort_to(want);
      for (; keep < sorted && (keep == 0 || cum < p_.top_p); ++keep) {
        prob.push_back(weight(ids[keep]) / total);
        cum += prob.back();
      }
    }
    n = keep;
  } else {
    sort_to(n);
    for (size_t i = 0; i < n; ++i) prob.push_back(weight(ids[i]) / total);
  }
  if (p_.min_p > 0.0f) {
    const double floor = p_.min_p * prob[0];
    size_t keep = 1;
    while (keep < n && prob[keep] >= floor) ++keep;
    n = keep;
  }
  double kept = 0;
  for (size_t i = 0; i < n; ++i) kept += prob[i];
  return ids[draw(prob, n, kept, rng_)];
}

}  // namespace mx
