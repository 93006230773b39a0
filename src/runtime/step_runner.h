// StepRunner: the engine's step on the device. One step = the block-table updates, the decode
// tokens taken from the previous step's samples, the forward, and the sampling stage (logprobs,
// logits processing, sampling) — only the sampled ids (and requested logprobs) come back. Inputs
// are packed into pinned host memory and sent in one copy; a decode-only step is padded to a
// bucket size and replayed as a CUDA graph captured per (bucket, sampling variant). Steps are
// launched without waiting: the host prepares step N+1 while the device runs step N, and
// collect() waits for the oldest step's ids.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "kernels/collective.h"
#include "kernels/ops.h"
#include "model/forward.h"
#include "model/model.h"
#include "runtime/kv_cache.h"
#include "runtime/sampler.h"

namespace mx {

enum class UseGraphs { No, Yes };

struct StepRunnerArgs {
  int max_tokens = 0;  // tokens per step (the engine's max_num_batched_tokens)
  int max_rows = 0;    // sampled rows per step (max_num_seqs): also the largest graph bucket
  int seats = 0;       // rows of the device block tables in use by sequences (max_num_seqs)
  int max_blocks = 0;  // block-table width: blocks of one max_model_len sequence
  UseGraphs graphs = UseGraphs::Yes;
  // An EAGLE-3 draft's target boundaries (ascending): each step keeps the residual stream there for
  // its tokens (aux()), rank 0 only. Empty: none.
  std::vector<int> aux_boundaries;
};

// One step's inputs, built by the engine from its plan. Token i belongs to table row seats[i];
// from_prev[i] >= 0 takes token i from row from_prev[i] of the previous step's samples.
struct StepBatch {
  std::vector<int32_t> tokens, positions, seats, from_prev;  // (T)
  std::vector<int32_t> logit_rows;  // (R) indices into the T tokens
  SampleRows sampling;              // (R) rows
  std::vector<int32_t> table_updates, window_updates;  // (U, 3) flattened: seat, index, block
  int64_t num_seqs = 0;
  // > 0: each of the num_seqs sequences feeds this many tokens and samples every one (a decode
  // step: 1; a speculative round: drafts + 1), rows are tokens 0..T-1, and the step is padded to a
  // bucket of sequences and replayed as a CUDA graph.
  int tokens_per_seq = 0;
  bool keep_logits = false;  // collect() also returns the (R, V) logits (slow; tests, --dump-logits)
  bool calibrate_kv = false;  // FP8 cache: this step sets every layer's scales from its K and V (runs eagerly)

  void clear() { *this = StepBatch(); }
  int64_t size() const { return int64_t(tokens.size()); }
};

struct StepOutput {
  std::vector<int32_t> ids;        // (R) sampled tokens
  std::vector<float> logprobs;     // (R) when any row asked: of the sampled token, raw logits
  std::vector<int32_t> top_ids;    // (R, kMaxTopLogprobs)
  std::vector<float> top_logprobs; // (R, kMaxTopLogprobs)
  std::vector<float> logits;       // (R, V) when keep_logits
};

class TpFollowers;

class StepRunner {
 public:
  // With a model split over N ranks (model.tp_size() > 1), `peer_kv` holds ranks 1..N-1's caches:
  // the runner makes the group's collectives and a follower thread per rank, which replays every
  // launched step on its GPU; rank 0 (this runner) alone samples.
  // The runner's ops run on `cx`, which must outlive it; it reserves cx's scratch for its largest
  // step before any graph is captured.
  static Result<std::unique_ptr<StepRunner>> create(ops::Context& cx, const Model& model, const KvCache& kv,
                                                    const StepRunnerArgs& args, std::vector<const KvCache*> peer_kv = {});
  // Rank r > 0 of a group: runs each step's forward with `tp` and does not sample.
  static Result<std::unique_ptr<StepRunner>> create_follower(ops::Context& cx, const Model& model, const KvCache& kv,
                                                             const StepRunnerArgs& args,
                                                             std::shared_ptr<ops::Collective> tp);
  ~StepRunner();

  // Queues a step; at most kMaxInFlight steps may be launched and not collected.
  Status launch(const StepBatch& b);
  // Waits for the oldest launched step and returns its samples.
  Result<StepOutput> collect();
  int in_flight() const { return int(launched_.size()); }
  // (max_tokens, n·D) act: the draft features of the last launched step's tokens, row i for token i
  // (valid once it is collected, until the next launch); empty without aux_boundaries.
  Tensor aux() const;
  static constexpr int kMaxInFlight = 2;

  // The bucket a batch of n sequences is padded to (n itself when graphs are off).
  int bucket(int n) const;
  uint64_t graph_replays() const { return replays_; }
  uint64_t graph_captures() const { return captures_; }

 private:
  StepRunner(ops::Context& cx, const Model& model, const KvCache& kv, const StepRunnerArgs& args);
  struct Arena;  // device and pinned host buffers of the step's inputs and outputs
  struct Views;  // the arena's tensors sized for one step
  Status allocate();
  Status pack(const StepBatch& b, int64_t T, int64_t R, int slot);
  Status launch_packed(const StepBatch& b, int64_t T, int64_t R, int64_t seqs, int slot, bool graph);
  Status device_step(const Views& v, bool logprobs, bool entries);
  Status run(const Views& v, bool logprobs, bool entries, bool graph);
  Views views(int64_t T, int64_t R, bool all_rows, int64_t num_seqs) const;

  ops::Context& cx_;
  const Model& model_;
  const KvCache& kv_;
  StepRunnerArgs args_;
  std::shared_ptr<ops::Collective> tp_;  // this rank's end of the group, or null
  bool samples_ = true;                  // rank 0 (or no tensor parallelism)
  std::unique_ptr<TpFollowers> followers_;  // rank 0 of a group: ranks 1..N-1
  Device device_;
  std::unique_ptr<Workspace> ws_;
  std::unique_ptr<Arena> arena_;
  std::vector<int> buckets_;
  std::map<std::tuple<int64_t, int, bool, bool>, ops::StepGraph> graphs_;  // (tokens, per seq, logprobs, entries)
  bool graphs_failed_ = false;
  uint64_t replays_ = 0, captures_ = 0;

  struct Launched {
    int slot = 0;
    int64_t rows = 0;
    bool logprobs = false, keep_logits = false;
  };
  std::deque<Launched> launched_;
  int next_slot_ = 0;
};

}  // namespace mx
