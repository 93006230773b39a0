// Engine: continuous batching over one model. Owns the paged KV pool, the workspace and the
// staging buffers, and runs a loop on its own thread that admits requests (by free KV blocks),
// does chunked prefill within a token budget, decodes every running sequence in one forward call
// per step, samples per request on the host and streams tokens to each RequestStream. On CUDA a
// decode-only step (every sequence one token) replays a CUDA graph captured per token count.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "model/forward.h"
#include "model/model.h"
#include "runtime/batch_staging.h"
#include "runtime/kv_cache.h"
#include "runtime/request.h"
#include "runtime/scheduler_plan.h"

namespace mx {

struct EngineArgs {
  int max_num_seqs = 256;             // sequences in one step at most
  int max_num_batched_tokens = 2048;  // tokens in one forward call at most (>= max_num_seqs)
  int max_model_len = 0;              // prompt + generated tokens per request; 0: the model's
  int kv_block_size = 16;             // tokens per KV block
  int num_kv_blocks = 0;              // size of the KV pool; must hold one max_model_len request
  PrefixCaching prefix_caching = PrefixCaching::Off;
  double stats_interval_seconds = 10;  // periodic stats log line while busy; 0: never
  bool enforce_eager = false;          // never replay CUDA graphs (vLLM's --enforce-eager)
};

// Counters for /metrics and the stats line (totals since start, gauges now).
struct EngineStats {
  int running = 0, waiting = 0;
  int kv_blocks_used = 0, kv_blocks_total = 0;
  uint64_t prompt_tokens_total = 0, generation_tokens_total = 0, preemptions_total = 0;
  uint64_t prefix_cache_queries = 0, prefix_cache_hits = 0;
  uint64_t steps_total = 0;
  uint64_t graph_replays_total = 0, graph_captures_total = 0;  // decode steps as CUDA graphs
};

class Engine {
 public:
  // The model must outlive the engine.
  static Result<std::unique_ptr<Engine>> create(const Model& model, const EngineArgs& args);
  ~Engine();  // stops the loop; requests still open end with FinishReason::Cancelled

  // Thread-safe. Checks the request (prompt ids in the vocabulary, prompt + max_tokens within
  // max_model_len) and queues it; the stream delivers its tokens.
  Result<std::shared_ptr<RequestStream>> submit(RequestParams params);

  EngineStats stats() const;
  const EngineArgs& args() const { return args_; }
  int max_model_len() const { return args_.max_model_len; }
  const Model& model() const { return model_; }

 private:
  Engine(const Model& model, const EngineArgs& args, KvCache kv, Workspace ws, BatchStaging staging);
  void loop();
  void drop_cancelled();
  Status run_step(const std::vector<Chunk>& chunks);
  Status run_forward(const ForwardArgs& fa, bool decode_only);
  void sample_and_emit(const std::vector<Chunk>& chunks, const std::vector<float>& logits);
  void finish(Sequence& s, FinishReason reason, const std::string& error = {});
  void remove_finished();
  void update_stats();
  void maybe_log_stats();

  const Model& model_;
  EngineArgs args_;
  KvCache kv_;
  BlockManager blocks_;  // over kv_
  Workspace ws_;
  BatchStaging staging_;
  PlanState plan_;  // waiting and running sequences (engine thread only)

  mutable std::mutex mu_;  // guards inbox_, stop_, stats_
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Sequence>> inbox_;
  bool stop_ = false;
  EngineStats stats_;
  std::atomic<uint64_t> next_id_{1};
  std::thread thread_;

  std::vector<float> logits_;  // the step's sampled rows on the host, reused (no 0.8 MB alloc per token)
  // Decode-step graphs by token count, valid for one scratch generation (ops::scratch_generation).
  std::map<int64_t, ops::StepGraph> decode_graphs_;
  uint64_t graphs_generation_ = 0;
  bool graphs_failed_ = false;  // a capture failed: eager from then on

  uint64_t logged_prompt_ = 0, logged_generation_ = 0;
  Clock::time_point last_log_ = Clock::now();
};

}  // namespace mx
