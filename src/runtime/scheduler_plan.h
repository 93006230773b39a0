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
#include "runtime/speculative.h"

namespace mx {

// One request inside the engine. `tokens` is the prompt followed by the generated ids known to the
// host; `pending` more were sampled on the device by steps whose results are not read yet (the
// last of them is fed to the next step from the device). The first `computed` positions have
// their K/V in the cache (or will have, once the launched steps finish). A sequence needs
// positions [computed, length()) fed; when the feed reaches the end, the last token's logits give
// the next one. Preemption releases the blocks and sets computed = 0 (recomputed on re-admission,
// output unchanged).
struct Sequence {
  std::shared_ptr<RequestStream> stream;
  RequestParams params;
  std::vector<int32_t> tokens;
  std::vector<int32_t> table;   // KV block table (full-attention layers; every layer without a window pool)
  std::vector<int32_t> window;  // the sliding layers' block table (window pool), else empty
  std::vector<uint64_t> block_hashes;  // prefix-cache hash chain of its full computed blocks
  int64_t computed = 0;
  int generated = 0;  // tokens sampled and read (in tokens)
  int pending = 0;    // rows sampled by launched steps, not read yet
  // Speculative decoding: the draft tokens to feed after the last token (proposed before the plan;
  // the plan may shorten it to the token budget), kept until the round's samples are read.
  std::vector<int32_t> draft;
  int draft_offered = 0;       // of which the proposer's (the rest pads the step to one length)
  AcceptanceRate spec_rate;    // how its drafts have fared
  int slot = -1;      // row of the engine's device block tables while it holds blocks
  size_t synced_table = 0, synced_window = 0;  // table entries already on the device
  uint64_t last_step = 0;  // the last step it was fed in (steps count from 1; it stays alive until read)
  int pending_row = -1;     // with pending: its row in the last launched step's samples
  uint64_t pending_step = 0;
  std::unique_ptr<TokenCounts> counts;  // penalties: occurrences of its tokens
  FinishReason finished = FinishReason::None;
  RequestTiming timing;

  Sequence(std::shared_ptr<RequestStream> s, RequestParams p)
      : stream(std::move(s)), params(std::move(p)), tokens(params.prompt) {}
  int64_t length() const { return int64_t(tokens.size()) + pending; }
  int64_t remaining() const { return length() - computed; }
  // Every token it may still sample is already scheduled (max_tokens): feed nothing more.
  bool fully_scheduled() const { return generated + pending >= params.max_tokens && remaining() <= 1; }
};

// Tokens [start, start + count) of seq fed this step; `samples` when they reach its end (then its
// last `drafts` tokens are the sequence's draft, and each of the last drafts + 1 tokens is sampled).
struct Chunk {
  Sequence* seq = nullptr;
  int64_t start = 0, count = 0;
  bool samples = false;
  int drafts = 0;
};

struct PlanLimits {
  int max_num_seqs = 0;
  int max_num_batched_tokens = 0;
  int window = 0;  // the sliding window (tokens) when the cache has a window pool, else 0
  // Admission leaves at least this many blocks free while others run (room for the running
  // sequences to grow: admitting into a full pool preempted them at once, over and over).
  int watermark_blocks = 0;
};

struct PlanState {
  std::deque<std::unique_ptr<Sequence>> waiting;   // arrival order; preempted ones go first
  std::vector<std::unique_ptr<Sequence>> running;  // admission order (oldest first)
  std::vector<int> free_slots;                     // device table rows not held by a sequence
  uint64_t preemptions = 0;
};

// Gives a sequence's blocks (both tables) and its slot back.
void release_sequence(PlanState& st, BlockManager& blocks, Sequence& s);

// Fills `chunks` for one step: running sequences oldest first (each its remaining tokens and its
// draft, at most the budget left, the draft shortened first; none once fully_scheduled), then waiting ones admitted while blocks,
// budget and seats allow (a sequence whose sampled tokens are not read yet waits for them; a new one
// is admitted only if the watermark stays free, unless nothing runs). When a
// running sequence cannot get blocks, the newest running sequence is preempted, and nothing is
// admitted in that step unless nothing runs (a victim admitted straight back would be preempted
// again). A request admitted
// with nothing computed starts after its longest cached prefix (prefix caching).
void plan_step(PlanState& st, BlockManager& blocks, const PlanLimits& lim, std::vector<Chunk>& chunks);

}  // namespace mx
