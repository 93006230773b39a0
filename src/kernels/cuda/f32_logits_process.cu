// f32_logits_process: the sampling stage's logits processing on the GPU (ops::logits_process), one
// block per row with entries, in place: every entry's token's raw logit into saved[], then the
// four phases (penalties, biases, bans, mask words) with a barrier between them. A row without entries exits
// at once; entries whose token lies outside [0, V) are skipped (device data, not validated).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/util_kernels.h"
#include "kernels/logits_rule.h"

namespace mx::cuda::kern {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) f32_logits_process(LogitsProcessParams p) {
  const int64_t r = blockIdx.x;
  const EntryRange e = entry_range(p.offsets, r, p.N);
  if (e.begin >= e.end) return;
  float* l = p.logits + r * p.V;
  // f(token, i) for each entry i of the row of the given kind (any kind: -1) with a token in range.
  auto each = [&](int32_t kind, auto f) {
    for (int64_t i = e.begin + threadIdx.x; i < e.end; i += kThreads) {
      const int32_t t = p.entries[4 * i];
      if (t >= 0 && t < p.V && (kind < 0 || p.entries[4 * i + 1] == kind)) f(t, i);
    }
  };
  each(-1, [&](int32_t t, int64_t i) { p.saved[i] = l[t]; });
  __syncthreads();
  const float repetition = p.penalties[3 * r], presence = p.penalties[3 * r + 1], frequency = p.penalties[3 * r + 2];
  each(kEntryPenalty, [&](int32_t t, int64_t i) {
    l[t] = penalized_logit(l[t], repetition, presence, frequency, p.entries[4 * i + 2], p.entries[4 * i + 3]);
  });
  __syncthreads();
  each(kEntryBias, [&](int32_t t, int64_t i) { l[t] = __fadd_rn(l[t], __int_as_float(p.entries[4 * i + 3])); });
  __syncthreads();
  each(kEntryBan, [&](int32_t t, int64_t) { l[t] = -INFINITY; });
  __shared__ int64_t others;  // the MaskOthers entry's index, or -1
  if (threadIdx.x == 0) others = -1;
  __syncthreads();
  each(kEntryMaskOthers, [&](int32_t, int64_t i) { others = i; });
  __syncthreads();
  if (others < 0) {  // words without a Mask entry stay allowed
    each(kEntryMask, [&](int32_t t, int64_t i) {
      const uint32_t bits = uint32_t(p.entries[4 * i + 3]);
      for (int b = 0; b < 32 && t + b < p.V; ++b)
        if (!((bits >> b) & 1u)) l[t + b] = -INFINITY;
    });
    return;
  }
  // Every word: its Mask entry's bits (found by bisection in the sorted entries after MaskOthers),
  // else none allowed.
  const int64_t lo0 = others + 1, hi0 = min(e.end, lo0 + max(p.entries[4 * others + 2], 0));
  for (int64_t w = threadIdx.x; w * 32 < p.V; w += kThreads) {
    int64_t lo = lo0, hi = hi0;
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (p.entries[4 * mid] < w * 32) lo = mid + 1; else hi = mid;
    }
    const uint32_t bits = lo < hi0 && p.entries[4 * lo] == w * 32 && p.entries[4 * lo + 1] == kEntryMask
                              ? uint32_t(p.entries[4 * lo + 3]) : 0u;
    for (int b = 0; b < 32 && w * 32 + b < p.V; ++b)
      if (!((bits >> b) & 1u)) l[w * 32 + b] = -INFINITY;
  }
}

}  // namespace

cudaError_t run_f32_logits_process(const LogitsProcessParams& p, cudaStream_t s) {
  if (p.R == 0) return cudaSuccess;
  f32_logits_process<<<unsigned(p.R), kThreads, 0, s>>>(p);
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
