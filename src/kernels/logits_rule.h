// The rules shared by the CPU and CUDA backends of the sampling stage's logits ops (ops.h:
// logprobs_topk, logits_process): the ranking key of a logit (NaN counts as -inf) and the penalty
// arithmetic, spelled once with explicit rounding so that both backends compute the same floats.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/sample_rule.h"

namespace mx {

// float_key with NaN mapped to -inf: NaN logits hold no probability mass and rank with -inf.
MX_HOST_DEVICE inline int32_t logit_key(float x) { return x == x ? float_key(x) : float_key(-INFINITY); }

// The same order as unsigned integers (radix digits): a < b  <=>  logit_ukey(a) < logit_ukey(b).
MX_HOST_DEVICE inline uint32_t logit_ukey(float x) { return uint32_t(logit_key(x)) ^ 0x80000000u; }
MX_HOST_DEVICE inline float ukey_logit(uint32_t u) { return key_float(int32_t(u ^ 0x80000000u)); }

// Row r's entries [offsets[r], offsets[r + 1]) clamped to [0, N] (on the device the offsets are
// not validated: a bad range reads nothing rather than out of bounds).
struct EntryRange {
  int64_t begin, end;
};
MX_HOST_DEVICE inline EntryRange entry_range(const int32_t* offsets, int64_t r, int64_t N) {
  const int64_t b = offsets[r] < 0 ? 0 : offsets[r] > N ? N : offsets[r];
  const int64_t e = offsets[r + 1] < b ? b : offsets[r + 1] > N ? N : offsets[r + 1];
  return {b, e};
}

// One Penalty entry applied to its token's logit x: repetition r when the token is in the prompt or
// was generated (x > 0 ? x / r : x * r), then x -= frequency * count + presence * (count > 0).
// The device spells each rounding (no FMA contraction); the host compiler contracts nothing on
// x86-64 without -mfma, where the two agree bit for bit.
MX_HOST_DEVICE inline float penalized_logit(float x, float repetition, float presence, float frequency,
                                            int32_t count, int32_t in_prompt) {
  const float shift = fmaf(frequency, float(count), count > 0 ? presence : 0.0f);
#if defined(__CUDA_ARCH__)
  if (count > 0 || in_prompt != 0) x = x > 0.0f ? __fdiv_rn(x, repetition) : __fmul_rn(x, repetition);
  return __fsub_rn(x, shift);
#else
  if (count > 0 || in_prompt != 0) x = x > 0.0f ? x / repetition : x * repetition;
  return x - shift;
#endif
}

}  // namespace mx
