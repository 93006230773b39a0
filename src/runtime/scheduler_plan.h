// The scheduler's per-step plan, separate from running the model: which sequences feed which
// tokens this step (decode and prefill chunks within the token budget), admission of waiting
// requests by free KV blocks, and preemption by recompute when the pool runs out.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "runtime/scheduler_blocks.h"
#include "runtime/request.h"
#include "runtime/sampler.h"

namespace mx {

// One request inside the engine. `tokens` is the prompt followed by the generated ids; the first
// `computed` of them have their K/V in the cache. A sequence needs tokens[computed, size) fed;
// when the feed reaches the end, the logits of the last token give the next one. Preemption
// releases the blocks and sets computed = 0 (recomputed on re-admission, output unchanged).
struct Sequence {
  std::shared_ptr<RequestStream> stream;
  RequestParams params;
  Sampler sampler;
  std::vector<int32_t> tokens;
  std::vector<int32_t> table;  // KV block table
  std::vector<uint64_t> block_hashes;  // prefix-cache hash chain of its full computed blocks
  int64_t computed = 0;
  int generated = 0;
  FinishReason finished = FinishReason::None;
  RequestTiming timing;

  Sequence(std::shared_ptr<RequestStream> s, RequestParams p)
      : stream(std::move(s)), params(std::move(p)), sampler(params.sampling), tokens(params.prompt) {}
  int64_t remaining() const { return int64_t(tokens.size()) - computed; }
};

// Tokens [start, start + count) of seq fed this step; `samples` when they reach its end.
struct Chunk {
  Sequence* seq = nullptr;
  int64_t start = 0, count = 0;
  bool samples = false;
};

struct PlanLimits {
  int max_num_seqs = 0;
  int max_num_batched_tokens = 0;
};

struct PlanState {
  std::deque<std::unique_ptr<Sequence>> waiting;   // arrival order; preempted ones go first
  std::vector<std::unique_ptr<Sequence>> running;  // admission order (oldest first)
  uint64_t preemptions = 0;
};

// Fills `chunks` for one step: running sequences oldest first (each its remaining tokens, at
// most the budget left), then waiting ones admitted while blocks, budget and seats allow. When a
// running sequence cannot get blocks, the newest running sequence is preempted. A request admitted
// with nothing computed starts after its longest cached prefix (prefix caching).
void plan_step(PlanState& st, BlockManager& blocks, const PlanLimits& lim, std::vector<Chunk>& chunks);

}  // namespace mx
