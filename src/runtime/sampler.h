// A request's sampling settings and how they become one row of the GPU sampling stage (ops.h:
// logprobs_topk -> logits_process -> sample -> logprobs_chosen): the (temperature, top_p, min_p,
// top_k) parameters, the draw's seed and position, the penalty weights and the row's logits
// entries (history for penalties, logit_bias, min_tokens bans). The engine and generate() build
// their rows here, so a seed gives the same tokens through either.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/ops.h"

namespace mx {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  uint64_t seed = 0;
  float repetition_penalty = 1.0f;  // > 0; 1: off (prompt and generated tokens, HF/vLLM rule)
  float presence_penalty = 0.0f;    // generated tokens: x -= presence if seen
  float frequency_penalty = 0.0f;   // generated tokens: x -= frequency * count
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to the logits (OpenAI logit_bias)

  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
};

// The draw's 32-bit seed (ops::sample hashes it with the position of the token drawn).
inline int32_t sample_seed(uint64_t seed) { return int32_t(uint32_t(seed ^ (seed >> 32))); }

// Occurrences of the tokens of a sequence, kept up to date as tokens are added (penalties).
class TokenCounts {
 public:
  void add_prompt(const std::vector<int32_t>& prompt) {
    for (int32_t t : prompt) counts_[t].in_prompt = true;
  }
  void add_generated(int32_t t) { counts_[t].generated++; }
  // One Penalty entry per distinct token.
  void append_entries(std::vector<ops::LogitsEntry>& out) const {
    for (const auto& [t, c] : counts_)
      out.push_back({.token = t, .kind = ops::LogitsEntryKind::Penalty, .count = c.generated, .aux = c.in_prompt});
  }

 private:
  struct Count {
    int generated = 0;
    bool in_prompt = false;
  };
  std::unordered_map<int32_t, Count> counts_;
};

// The sampling stage's inputs for R rows, as host arrays (uploaded by the engine's step runner).
struct SampleRows {
  std::vector<float> params;      // (R, 4): temperature, top_p, min_p, top_k
  std::vector<int32_t> seeds;     // (R)
  std::vector<int32_t> draw_positions;  // (R): position of the token drawn
  std::vector<int32_t> rows_k;    // (R): logprob alternatives, -1 = none
  std::vector<float> penalties;   // (R, 3): repetition, presence, frequency
  std::vector<int32_t> offsets = {0};  // (R + 1) into entries
  std::vector<ops::LogitsEntry> entries;
  bool any_logprobs = false, any_entries = false;

  int64_t rows() const { return int64_t(seeds.size()); }
  void clear() { *this = SampleRows(); }

  // One row. `counts` (penalties; may be null when off); `banned` ids are -inf (min_tokens);
  // `mask`: the guided-decoding bits of the row (32 ids a word; empty: no mask): one Mask entry per
  // word that forbids some id, or, where fewer words allow some id than forbid some (a structural
  // JSON state: a few dozen allowed tokens), MaskOthers and one Mask entry per word that allows some.
  void add(const SamplingParams& p, int32_t draw_position, int logprobs, const TokenCounts* counts,
           const std::vector<int32_t>& banned, std::span<const uint32_t> mask = {}) {
    params.insert(params.end(), {p.temperature, p.top_p, p.min_p, float(p.top_k)});
    seeds.push_back(sample_seed(p.seed));
    draw_positions.push_back(draw_position);
    rows_k.push_back(logprobs);
    penalties.insert(penalties.end(), {p.repetition_penalty, p.presence_penalty, p.frequency_penalty});
    if (counts && p.has_penalties()) counts->append_entries(entries);
    for (const auto& [t, b] : p.logit_bias) {
      ops::LogitsEntry e{.token = t, .kind = ops::LogitsEntryKind::Bias};
      static_assert(sizeof(float) == sizeof(int32_t));
      __builtin_memcpy(&e.aux, &b, 4);
      entries.push_back(e);
    }
    for (int32_t t : banned) entries.push_back({.token = t, .kind = ops::LogitsEntryKind::Ban});
    size_t allowing = 0, forbidding = 0;
    for (uint32_t m : mask) {
      allowing += m != 0u;
      forbidding += m != ~0u;
    }
    const bool others = allowing < forbidding;
    if (others)
      entries.push_back({.token = 0, .kind = ops::LogitsEntryKind::MaskOthers, .count = int32_t(allowing)});
    for (size_t w = 0; w < mask.size(); ++w)
      if (others ? mask[w] != 0u : mask[w] != ~0u)
        entries.push_back({.token = int32_t(w * 32), .kind = ops::LogitsEntryKind::Mask, .aux = int32_t(mask[w])});
    offsets.push_back(int32_t(entries.size()));
    any_logprobs |= logprobs >= 0;
    any_entries |= offsets.back() != offsets[offsets.size() - 2];
  }
  // A padding row of a graph batch: greedy, nothing else.
  void add_padding() { add(SamplingParams{}, 0, -1, nullptr, {}); }
};

}  // namespace mx
