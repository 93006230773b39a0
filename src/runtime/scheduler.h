// Engine: continuous batching over one model — the one decode path of `serve`, `run` and `bench`.
// Owns the paged KV pool (the sliding-window layers in a pool of their own that holds only the
// blocks each sequence's window reaches), the step runner (device buffers, CUDA graphs) and a loop
// on its own thread that admits requests (by free KV blocks), does chunked prefill within a token
// budget, decodes every running sequence in one step and streams tokens to each RequestStream.
// Sampling runs on the device; only the sampled ids (and requested logprobs) come back. With
// async scheduling the host plans and stages step N+1 while the device runs step N: a decode
// token sampled by step N is fed to step N+1 on the device.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "core/parallel.h"
#include "model/forward.h"
#include "model/model.h"
#include "runtime/eagle3_drafter.h"
#include "runtime/kv_cache.h"
#include "runtime/request.h"
#include "runtime/scheduler_plan.h"
#include "runtime/speculative.h"
#include "runtime/step_runner.h"

namespace mx {

enum class AsyncScheduling { Off, On };

// The start of submit()'s error when the waiting queue is full (the server answers 503).
inline constexpr std::string_view kOverloaded = "the server is overloaded";
enum class Warmup { No, Yes };

// The token budget of a step when the user gives none (`--max-num-batched-tokens`): 8192 on a CUDA
// GPU with at least 70 GiB and compute capability 9.0 or later (H100, H200, B200; vLLM's server
// default on such GPUs), else 2048. A bigger step reads each layer's expert weights once for more
// prompt tokens, which raised 120b's serving throughput at concurrency 64 on an H100
// (docs/lab/RUNS_21-30.md, run 28); the price is longer steps while prompts are prefilled (the
// decode streams of other requests wait for them).
inline constexpr int kDefaultBatchedTokens = 2048, kLargeGpuBatchedTokens = 8192;
Result<int> default_max_num_batched_tokens(Device device);

struct EngineArgs {
  int max_num_seqs = 256;                              // sequences in one step at most
  int max_num_batched_tokens = kDefaultBatchedTokens;  // tokens in one forward call at most (>= max_num_seqs)
  int max_model_len = 0;              // prompt + generated tokens per request; 0: the model's
  int kv_block_size = 16;             // tokens per KV block
  int num_kv_blocks = 0;              // size of the KV pool; must hold one max_model_len request
  PrefixCaching prefix_caching = PrefixCaching::Off;
  double stats_interval_seconds = 10;  // periodic stats log line while busy; 0: never
  bool enforce_eager = false;          // never replay CUDA graphs (vLLM's --enforce-eager)
  AsyncScheduling async_scheduling = AsyncScheduling::On;
  Warmup warmup = Warmup::Yes;  // CUDA: one prefill-sized and one decode-sized step at creation
  double watermark = 0.01;      // fraction of the KV pool a new request must leave free while others run
  int max_waiting = 0;          // requests queued beyond this are refused (submit: Overloaded); 0: unbounded
  KvCacheDtype kv_cache_dtype = KvCacheDtype::Auto;  // --kv-cache-dtype: act, or fp8 e4m3 (1 byte per element)
  std::optional<std::array<float, 2>> kv_scales;     // --kv-scale (K, V), fp8 only; none: the first prefill's
  SpeculativeConfig speculative;                     // --speculative-config; off by default
  ops::MoeActivation moe_activation = ops::MoeActivation::BF16;  // --moe-activation (the prefill MoE GEMMs)
  // Tests: proposes the drafts instead of the config's method (which still gives k and the batch
  // limit).
  std::shared_ptr<const DraftProposer> draft_proposer;
  // bench only (--spec-acceptance-rate): every round drafts k tokens and accepts them by a seeded
  // generator at this rate (ForcedAcceptance), whatever the target samples; < 0: off.
  double spec_acceptance_rate = -1;
};

// Device memory of the KV cache for EngineArgs: per block of the full-attention pool, and the
// fixed window pool of the sliding layers (none with prefix caching: then every layer is paged
// in the one pool, as cached prefix blocks must hold the sliding layers' keys too). An element is
// kv_element_dtype's size: 1 byte with fp8, so the same memory holds twice the tokens as bf16.
struct KvLayout {
  size_t bytes_per_block = 0;
  size_t window_pool_bytes = 0;
  int window_pool_blocks = 0;
};
KvLayout kv_layout(const ModelConfig& c, const EngineArgs& a, Device device);

// Counters for /metrics and the stats line (totals since start, gauges now).
struct EngineStats {
  int running = 0, waiting = 0;
  int kv_blocks_used = 0, kv_blocks_total = 0;
  uint64_t prompt_tokens_total = 0, generation_tokens_total = 0, preemptions_total = 0;
  uint64_t prefix_cache_queries = 0, prefix_cache_hits = 0;
  uint64_t steps_total = 0;
  uint64_t graph_replays_total = 0, graph_captures_total = 0;  // decode steps as CUDA graphs
  int spec_tokens = 0;  // k of speculative decoding, 0: off
  SpecStats spec;
};

class Engine {
 public:
  // The model must outlive the engine.
  static Result<std::unique_ptr<Engine>> create(const Model& model, const EngineArgs& args);
  ~Engine();  // stops the loop; requests still open end with FinishReason::Cancelled

  // Thread-safe. Checks the request (prompt ids in the vocabulary, prompt + max_tokens within
  // max_model_len, sampling settings) and queues it; the stream delivers its tokens.
  Result<std::shared_ptr<RequestStream>> submit(RequestParams params);
  // Several requests queued at once (the loop sees all of them or none; bench batches).
  Result<std::vector<std::shared_ptr<RequestStream>>> submit_all(std::vector<RequestParams> params);

  EngineStats stats() const;
  const EngineArgs& args() const { return args_; }
  int max_model_len() const { return args_.max_model_len; }
  const Model& model() const { return model_; }
  // bench: fills the KV cache with random values (a prefilled context for RequestParams::prefilled).
  Status fill_cache_random(uint64_t seed);
  // The KV layout chosen at creation, one line (for the start-up log).
  std::string kv_summary() const;
  const KvCache& kv_cache() const { return *kv_; }  // tests; its scale state changes on the engine thread
  // The ops' context of rank 0 (its stream, scratch, settings and profiler); the ops run on the
  // engine's thread. bench profiles through it; the dispatch lines are made from it.
  ops::Context& context() const { return *cx_; }

 private:
  Engine(const Model& model, const EngineArgs& args, std::unique_ptr<KvCache> kv);
  Status warm_up();
  Result<std::unique_ptr<Sequence>> make_sequence(RequestParams p);
  void loop();
  void drop_cancelled();
  bool needs_sync() const;  // the next plan needs every launched step read (penalties, logits, constraints, drafts)
  // Whether this step drafts: speculation on, the running batch small enough, and some sequence
  // offered a draft lately (else only every kProbeEvery-th step looks, and the others run ahead
  // asynchronously as without speculation).
  bool wants_drafts() const;
  static constexpr int kIdleBeforeProbing = 4, kProbeEvery = 16;
  Status propose_drafts();
  Status launch_step(const std::vector<Chunk>& chunks);
  // The guided-decoding masks of the step's constrained draws, per chunk (empty: none).
  std::vector<std::span<const uint32_t>> constraint_masks(const std::vector<Chunk>& chunks);
  Status collect_step();
  // eagle3: the draft's pass over what each sequence of the step kept, and its drafts after it.
  struct LaunchedStep;
  void queue_draft_passes(const LaunchedStep& rec);
  Status run_draft_passes(const std::function<int(const Sequence&)>& len);
  bool calibrates(const std::vector<Chunk>& chunks) const;
  void log_kv_scales(int64_t tokens) const;
  // The rows [row, row + drafts] of one sequence's chunk: its tokens (the accepted drafts and one
  // sample); returns how many it emitted.
  uint64_t accept_round(Sequence& s, const StepOutput& out, int64_t row, int drafts);
  void emit(Sequence& s, int32_t token, const StepOutput& out, int64_t row);
  void finish(Sequence& s, FinishReason reason, const std::string& error = {});
  void fail_in_flight(const std::string& error);
  void retire_finished();
  void update_stats();
  void maybe_log_stats();

  const Model& model_;
  EngineArgs args_;
  std::unique_ptr<ops::Context> cx_;  // before the runner and drafter that use it
  std::unique_ptr<KvCache> kv_;
  std::vector<std::unique_ptr<KvCache>> peer_kv_;  // tensor-parallel ranks 1..N-1 (same blocks as kv_)
  BlockManager blocks_;  // over kv_
  std::unique_ptr<StepRunner> runner_;
  PlanState plan_;  // waiting and running sequences (engine thread only)
  PlanLimits limits_;

  // Launched steps not read yet: which sequences fed which tokens, and their sampled rows.
  struct LaunchedStep {
    uint64_t id = 0;
    std::vector<Chunk> chunks;
    std::vector<Sequence*> row_seq;  // (R)
    int64_t calibrated_from = 0;     // tokens of the step that set the FP8 cache's scales, else 0
    Clock::time_point launched;
    bool timed = false;  // a uniform step launched with nothing else in flight: its time is the policy's
    int64_t tokens = 0;
  };
  std::deque<LaunchedStep> launched_;
  uint64_t next_step_ = 0;
  // Finished sequences that launched steps still name (freed once those steps are read).
  std::vector<std::unique_ptr<Sequence>> retired_;
  StepBatch batch_;  // reused
  std::shared_ptr<const DraftProposer> proposer_;  // null: no host proposer (no speculation, or eagle3)
  std::unique_ptr<Eagle3Draft> draft_model_;        // eagle3: the draft, on the target's device
  std::unique_ptr<Eagle3Drafter> drafter_;          // eagle3: runs it after every step it can draft for
  std::vector<Eagle3Drafter::Pass> draft_passes_;   // eagle3: the step read last, for the draft's pass 1
  std::vector<Sequence*> draft_pass_seqs_;          // (the sequence of each)
  std::optional<ForcedAcceptance> forced_;          // bench's fixed acceptance
  std::optional<DraftPolicy> policy_;               // the steps' draft length (adaptive)
  bool drafting_ = false;                           // wants_drafts() of the step being planned
  int idle_proposals_ = 0;                          // drafting steps in a row that found no offer
  // Computes the masks of a step's constrained draws side by side: started by the first step with
  // two of them, stopped once no running sequence is constrained.
  std::unique_ptr<ThreadPool> mask_pool_;

  mutable std::mutex mu_;  // guards inbox_, stop_, stats_
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Sequence>> inbox_;
  bool stop_ = false;
  EngineStats stats_;
  std::atomic<uint64_t> next_id_{1};
  std::thread thread_;

  uint64_t logged_prompt_ = 0, logged_generation_ = 0;
  SpecStats logged_spec_;
  Clock::time_point last_log_ = Clock::now();
};

}  // namespace mx
