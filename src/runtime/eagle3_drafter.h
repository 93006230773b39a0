// Eagle3Drafter: an EAGLE-3 draft run after every engine step (docs/spec/EAGLE3_SPEC.md §4). Pass 1
// feeds, for every sequence of the step, the positions it kept (a prefill chunk's, or a round's
// accepted drafts and its new token) with the target's features of those tokens (the residual
// stream at the draft's boundaries, StepRunner::aux) and, for position p, the token of p + 1; this
// writes the draft's KV there, so committed positions always hold KV made from target features.
// Its last row gives draft 1 of a sequence that decodes next; steps 2..k feed one row per such
// sequence (the draft before, at the next position, with the hidden state that row handed on).
// Drafts are greedy and mapped to target ids (d2t). The draft's KV uses the target's block ids
// (one more buffer of the same blocks); positions past a sequence's allocated blocks, which only
// steps 2..k reach, go to blocks of its own seat.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "model/eagle3_forward.h"

namespace mx {

class Eagle3Drafter {
 public:
  struct Args {
    int seats = 0;        // the engine's seats (max_num_seqs)
    int max_tokens = 0;   // tokens per step (max_num_batched_tokens)
    int max_blocks = 0;   // block-table width
    int num_blocks = 0;   // blocks of the target's paged pool, the pad block included
    int block_size = 0;
    int k = 0;            // draft tokens per round at most
  };
  // Runs on the target's context `cx` (its stream: drafts are ordered after the target's step),
  // whose scratch it grows for the draft's largest call; cx must outlive the drafter.
  static Result<std::unique_ptr<Eagle3Drafter>> create(ops::Context& cx, const Eagle3Draft& draft, Device device,
                                                       const Args& args);

  // One sequence's part of the step just collected.
  struct Pass {
    int seat = 0;
    const std::vector<int32_t>* table = nullptr;  // its block ids (host)
    int64_t first_row = 0;  // its first token among the step's (a row of aux)
    int64_t start = 0;      // position of that token
    std::vector<int32_t> tokens;  // per kept position p: the token of p + 1
    int drafts = 0;         // draft tokens to propose after it (0: only the KV)
  };
  // aux: the step's features (StepRunner::aux()); drafts(seat) of every pass with drafts > 0 after.
  Status run(const Tensor& aux, std::span<const Pass> passes);
  std::span<const int32_t> drafts(int seat) const { return drafts_[size_t(seat)]; }
  void clear_drafts() {
    for (auto& d : drafts_) d.clear();
  }
  const Eagle3Draft& draft() const { return draft_; }

 private:
  Eagle3Drafter(ops::Context& cx, const Eagle3Draft& draft, Device device, const Args& args)
      : cx_(cx), draft_(draft), device_(device), args_(args) {}
  Status allocate();
  Status set_table(int seat, const std::vector<int32_t>& table, int64_t last_position);
  // Greedy draft ids of the R logit rows into row j of draft_ids_, and their target ids into
  // step_tokens_ (the next step's tokens).
  Status greedy(int64_t R, int j);

  ops::Context& cx_;
  const Eagle3Draft& draft_;
  Device device_;
  Args args_;
  int per_seat_ = 0;  // blocks of a seat's own beyond its table
  std::unique_ptr<Eagle3Workspace> ws_;
  std::vector<ops::Buffer> storage_;
  ops::KvLayer cache_;
  // A call's inputs, staged in one pinned buffer and copied in one go (Staged: offsets in words):
  // pass 1's tokens, positions, seats, feature rows (T each) and logit rows (R); the later steps'
  // positions and seats (R each) and their logit rows 0..R-1.
  ops::Buffer stage_;
  Tensor staged_;  // the device copy, (4T + 4R) i32
  Tensor tables_, params_, seeds_, draw_, ids_, logits_, d2t_dev_, step_tokens_, draft_ids_;
  Tensor features_, hidden_[2];
  std::vector<int32_t> host_tables_;
  std::vector<int32_t> d2t_;  // draft id -> target id (host copy)
  std::vector<std::vector<int32_t>> drafts_;
};

}  // namespace mx
