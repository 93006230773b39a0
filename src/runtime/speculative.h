// Speculative decoding (docs/SPECULATIVE.md): `--speculative-config` (vLLM's JSON keys), the draft
// proposers, and the acceptance rule. A round feeds a sequence's last token and k draft tokens in
// one step and samples every one of those k + 1 rows with the request's own sampler (the draw of a
// row depends on the seed and the position only); draft i is accepted while it equals the sample
// of the row before it, and the first differing sample (or, with every draft accepted, the last
// row's sample) is emitted in its place. For a draft that is one token (a point mass q), accepting
// d with probability p(d) and otherwise drawing from p without d is exactly "draw x ~ p, accept iff
// x = d": the rejection-sampling rule, and the same tokens, seed for seed, as decoding without
// speculation.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace mx {

enum class SpecMethod { None, Ngram, Eagle3 };

// Above this many running sequences no drafts are proposed (vLLM's disable_by_batch_size): large
// batches are bound by the weights they share, and a round's extra tokens stop being free.
inline constexpr int kSpecDefaultDisableBatch = 32;

struct SpeculativeConfig {
  SpecMethod method = SpecMethod::None;
  int num_speculative_tokens = 0;  // k: draft tokens per round
  int prompt_lookup_min = 0, prompt_lookup_max = 0;  // ngram: suffix lengths tried (longest first)
  std::string model;               // eagle3: the draft (a local folder or a Hugging Face repo id in the cache)
  std::string aux_layer_ids = "literal";  // eagle3 (mxserve's key): how the draft's listed ids name target
                                          // states, "literal" (vLLM) or "plus_one" (model/eagle3.h)
  int disable_by_batch_size = kSpecDefaultDisableBatch;
  bool adaptive = true;  // "adaptive" (mxserve's key): the draft length of each step by DraftPolicy, else k

  bool enabled() const { return method != SpecMethod::None && num_speculative_tokens > 0; }
  std::string describe() const;  // "ngram, up to 3 tokens per round, prompt lookup 2..5, off above 32 ..."
};

// Parses --speculative-config, e.g. {"method": "ngram", "num_speculative_tokens": 3,
// "prompt_lookup_min": 2, "prompt_lookup_max": 5} or {"method": "eagle3", "model": DIR,
// "num_speculative_tokens": 3}. Unknown methods and keys are errors that list what is supported;
// "" gives the disabled config.
Result<SpeculativeConfig> parse_speculative_config(std::string_view json);

// Proposes up to k tokens to follow `tokens` (the prompt and every token generated so far);
// fewer or none when it has no guess.
class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  virtual void propose(std::span<const int32_t> tokens, int k, std::vector<int32_t>& out) const = 0;
};

// Prompt lookup (n-gram): the longest suffix of `tokens` of n_min..n_max tokens that also occurs
// earlier; proposes the (up to) k tokens that followed its latest earlier occurrence.
class NgramProposer final : public DraftProposer {
 public:
  NgramProposer(int n_min, int n_max) : n_min_(n_min), n_max_(n_max) {}
  void propose(std::span<const int32_t> tokens, int k, std::vector<int32_t>& out) const override;

 private:
  int n_min_, n_max_;
};

// The host proposer a config asks for (null when disabled, and for eagle3: its drafts come from the
// draft model after each step, runtime/eagle3_drafter.h).
std::unique_ptr<DraftProposer> make_proposer(const SpeculativeConfig& c);

// Drafts accepted in a round: the leading i with samples[i] == draft[i] (samples has one more row).
int accepted_prefix(std::span<const int32_t> draft, std::span<const int32_t> samples);

// bench only (`--spec-acceptance-rate`): acceptance fixed by a seeded generator instead of by the
// target's samples, each draft position accepted with probability `rate` while the previous one
// was; the tokens emitted are then the drafts themselves, so only the cost of a round is real.
class ForcedAcceptance {
 public:
  ForcedAcceptance(double rate, uint64_t seed) : rate_(rate), rng_(seed) {}
  int accepted(int drafts);

 private:
  double rate_;
  std::mt19937_64 rng_;
};

// A sequence's recent acceptance as a per-token rate: each round counts its accepted draft tokens
// as hits and its rejected one, if any, as a miss; older rounds weigh less (about the last 20). The
// prior (2 hits, 1 miss) lets a new sequence draft; a step in which it offered a draft but the
// policy chose none moves it back toward the prior (about 30 such steps), so that a sequence
// whose early drafts failed is tried again instead of never being measured.
struct AcceptanceRate {
  double hits = kPriorHits, misses = kPriorMisses;
  double rate() const { return hits / (hits + misses); }
  void add(int drafted, int accepted) {
    hits = kDecay * hits + accepted;
    misses = kDecay * misses + (accepted < drafted ? 1 : 0);
  }
  void idle() {
    hits += kRecover * (kPriorHits - hits);
    misses += kRecover * (kPriorMisses - misses);
  }
  static constexpr double kDecay = 0.95, kRecover = 0.03, kPriorHits = 2, kPriorMisses = 1;
};

// The draft length d of a step, one for every drafting sequence (so that the step stays uniform
// and replays a CUDA graph): the d in 0..k that maximises the expected tokens per second,
// sum_i (1 + sum_{j <= min(d, m_i)} a_i^j) / time(n (1 + d)), where m_i is what sequence i's
// proposer offered, a_i its acceptance rate, and time(T) the measured time of a uniform step of T
// tokens. A length not yet measured for this n is tried first; every kReprobe-th choice re-measures
// the lengths in turn (the times drift as contexts grow). A decode step's extra tokens cost what
// their experts cost: with random routing a 4-token round of gpt-oss-120b takes ~2.2 steps, so at
// low acceptance d falls to 0 instead of losing half the speed.
class DraftPolicy {
 public:
  struct Candidate {
    int offered = 0;    // draft tokens the proposer offered (at most k)
    double rate = 0;    // AcceptanceRate::rate()
  };
  explicit DraftPolicy(int k) : k_(k) {}
  int choose(std::span<const Candidate> seqs);
  void observe(int64_t tokens, double seconds);  // a uniform step of `tokens` tokens took this long
  static constexpr int kReprobe = 32;

 private:
  int k_;
  std::map<int64_t, double> time_;  // seconds of a uniform step by its tokens (moving average)
  uint64_t choices_ = 0;
};

// Counters of the rounds (vLLM's spec_decode metrics).
struct SpecStats {
  uint64_t drafts = 0;           // rounds with at least one draft token
  uint64_t draft_tokens = 0;     // tokens proposed
  uint64_t accepted_tokens = 0;  // drafts accepted
  std::vector<uint64_t> accepted_per_position;  // [i]: rounds whose draft i was accepted
  // Tokens a round emits on average: 1 + accepted / rounds (1 when no round ran).
  double mean_acceptance_length() const { return drafts ? 1.0 + double(accepted_tokens) / double(drafts) : 1.0; }
  void add_round(int drafted, int accepted);
};

}  // namespace mx
