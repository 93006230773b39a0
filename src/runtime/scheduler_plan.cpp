// plan_step: token budget, KV block admission and recompute preemption.
#include "runtime/scheduler_plan.h"

#include <algorithm>

namespace mx {
namespace {

// Blocks for feeding positions [computed, computed + n): the full table up to there, and the
// window pool's blocks that those tokens' windows reach.
bool reserve(BlockManager& blocks, const PlanLimits& lim, Sequence& s, int64_t n) {
  if (!blocks.reserve(s.table, s.computed + n)) return false;
  return lim.window == 0 || blocks.reserve_window(s.window, s.computed - lim.window + 1, s.computed + n);
}

void preempt(PlanState& st, BlockManager& blocks) {
  std::unique_ptr<Sequence> victim = std::move(st.running.back());
  st.running.pop_back();
  release_sequence(st, blocks, *victim);
  victim->computed = 0;
  victim->draft.clear();
  victim->timing.preemptions++;
  st.preemptions++;
  st.waiting.push_front(std::move(victim));
}

Chunk chunk_of(Sequence& s, int64_t n) {
  const bool samples = s.computed + n == s.length() + int64_t(s.draft.size());
  return {.seq = &s, .start = s.computed, .count = n, .samples = samples, .drafts = samples ? int(s.draft.size()) : 0};
}

}  // namespace

void release_sequence(PlanState& st, BlockManager& blocks, Sequence& s) {
  blocks.release(s.table);
  blocks.release_window(s.window);
  s.block_hashes.clear();
  if (s.slot >= 0) st.free_slots.push_back(s.slot);
  s.slot = -1;
  s.synced_table = s.synced_window = 0;
}

void plan_step(PlanState& st, BlockManager& blocks, const PlanLimits& lim, std::vector<Chunk>& chunks) {
  chunks.clear();
  int64_t budget = lim.max_num_batched_tokens;
  const uint64_t preemptions_before = st.preemptions;
  // Running sequences, oldest first; the newest give way when blocks run out.
  for (size_t i = 0; i < st.running.size() && budget > 0;) {
    Sequence& s = *st.running[i];
    if (s.fully_scheduled()) {
      ++i;
      continue;
    }
    const int64_t want = s.remaining() + int64_t(s.draft.size());
    const int64_t n = std::min(want, budget);
    if (n < want) s.draft.resize(size_t(std::max<int64_t>(0, n - s.remaining())));
    bool self_preempted = false;
    while (!reserve(blocks, lim, s, n)) {
      self_preempted = st.running.size() == i + 1;
      preempt(st, blocks);
      if (self_preempted) break;
    }
    if (self_preempted) break;
    chunks.push_back(chunk_of(s, n));
    budget -= n;
    ++i;
  }
  // Admission: waiting requests in order while there is budget, a seat and blocks for the chunk;
  // none in a step that had to preempt (the victim would be admitted straight back and preempted
  // again next step), unless nothing runs.
  const bool preempted = st.preemptions != preemptions_before;
  while (budget > 0 && (!preempted || st.running.empty()) && !st.waiting.empty() && int(st.running.size()) < lim.max_num_seqs && !st.free_slots.empty()) {
    Sequence& s = *st.waiting.front();
    if (s.pending > 0) break;  // preempted with samples in flight: its tokens are read first
    int64_t cached = 0;
    if (s.computed == 0 && s.table.empty()) cached = s.computed = blocks.match_prefix(s.tokens, s.table, s.block_hashes);
    if (s.timing.preemptions == 0) s.computed = std::max<int64_t>(s.computed, s.params.prefilled);  // bench contexts
    const int64_t n = std::min(s.remaining(), budget);
    const bool room = st.running.empty() || blocks.free_blocks() - blocks.blocks_needed(s.table, s.computed + n) >=
                                                  lim.watermark_blocks;
    if (!room || !reserve(blocks, lim, s, n)) {
      blocks.release(s.table);  // undo the prefix match; it is matched again next time
      blocks.release_window(s.window);
      s.computed = 0;
      s.block_hashes.clear();
      break;
    }
    if (s.timing.first_scheduled == Clock::time_point{}) {
      s.timing.first_scheduled = Clock::now();
      s.timing.cached_prompt_tokens = int(cached);
    }
    s.slot = st.free_slots.back();
    st.free_slots.pop_back();
    chunks.push_back(chunk_of(s, n));
    budget -= n;
    st.running.push_back(std::move(st.waiting.front()));
    st.waiting.pop_front();
  }
}

}  // namespace mx
