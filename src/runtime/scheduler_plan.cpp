// plan_step: token budget, KV block admission and recompute preemption.
#include "runtime/scheduler_plan.h"

#include <algorithm>

namespace mx {
namespace {

void preempt(PlanState& st, BlockManager& blocks) {
  std::unique_ptr<Sequence> victim = std::move(st.running.back());
  st.running.pop_back();
  blocks.release(victim->table);
  victim->computed = 0;
  victim->timing.preemptions++;
  st.preemptions++;
  st.waiting.push_front(std::move(victim));
}

}  // namespace

void plan_step(PlanState& st, BlockManager& blocks, const PlanLimits& lim, std::vector<Chunk>& chunks) {
  chunks.clear();
  int64_t budget = lim.max_num_batched_tokens;
  // Running sequences, oldest first; the newest give way when blocks run out.
  for (size_t i = 0; i < st.running.size() && budget > 0;) {
    Sequence& s = *st.running[i];
    const int64_t n = std::min(s.remaining(), budget);
    bool self_preempted = false;
    while (!blocks.reserve(s.table, s.computed + n)) {
      self_preempted = st.running.size() == i + 1;
      preempt(st, blocks);
      if (self_preempted) break;
    }
    if (self_preempted) break;
    chunks.push_back({.seq = &s, .start = s.computed, .count = n, .samples = s.computed + n == int64_t(s.tokens.size())});
    budget -= n;
    ++i;
  }
  // Admission: waiting requests in order while there is budget, a seat and blocks for the chunk.
  while (budget > 0 && !st.waiting.empty() && int(st.running.size()) < lim.max_num_seqs) {
    Sequence& s = *st.waiting.front();
    int64_t cached = 0;
    if (s.computed == 0 && s.table.empty()) cached = s.computed = blocks.match_prefix(s.tokens, s.table, s.block_hashes);
    const int64_t n = std::min(s.remaining(), budget);
    if (!blocks.reserve(s.table, s.computed + n)) {
      blocks.release(s.table);  // undo the prefix match; it is matched again next time
      s.computed = 0;
      s.block_hashes.clear();
      break;
    }
    if (s.timing.first_scheduled == Clock::time_point{}) {
      s.timing.first_scheduled = Clock::now();
      s.timing.cached_prompt_tokens = int(cached);
    }
    chunks.push_back({.seq = &s, .start = s.computed, .count = n, .samples = s.computed + n == int64_t(s.tokens.size())});
    budget -= n;
    st.running.push_back(std::move(st.waiting.front()));
    st.waiting.pop_front();
  }
}

}  // namespace mx
