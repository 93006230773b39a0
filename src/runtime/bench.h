// `mxserve bench`: llama-bench-style throughput of prefill (pp<P>) and decode (tg<N>) at context
// depths and batch sizes, with decode measured against the bytes-moved floor (weights + KV read
// per step over the copy bandwidth measured at start), and an optional per-op profile of one step.
// Every test runs requests through the Engine, the loop that `serve` runs: the same steps,
// graphs, device sampling and host work.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/model.h"
#include "runtime/kv_cache.h"
#include "runtime/speculative.h"
#include "runtime/step_runner.h"

namespace mx {

struct BenchOptions {
  std::vector<int> prompt_lengths = {2048};  // pp tests (0 = none)
  std::vector<int> gen_lengths = {32, 128};  // tg tests
  std::vector<int> depths = {0};             // tokens already in the KV cache
  std::vector<int> batches = {1};            // sequences decoded together
  int reps = 3;
  bool profile = false;
  UseGraphs graphs = UseGraphs::Yes;
  int kv_block_size = 16;
  KvCacheDtype kv_cache_dtype = KvCacheDtype::Auto;  // fp8: random E4M3 bytes with scales 1
  ops::MoeActivation moe_activation = ops::MoeActivation::BF16;  // --moe-activation
  SpeculativeConfig speculative;  // decode tests speculate (--speculative-config)
  // Forced acceptance (--spec-acceptance-rate, EngineArgs::spec_acceptance_rate): every round
  // drafts k tokens and accepts each with this probability; < 0: the target's samples decide.
  double spec_acceptance_rate = -1;
};

struct BenchRow {
  std::string test;  // "pp2048", "tg128"
  int depth = 0, batch = 1;
  double mean = 0, sd = 0;  // tokens per second (all sequences of the batch together)
  double gbps = 0, floor_fraction = 0;  // decode rows: bytes read per step / step time, vs copy bandwidth
  double acceptance_length = 0;  // speculative decode rows: tokens per drafting round (forced or measured), else 0
  double draft_length = 0;       // draft tokens per drafting round
  double drafting_share = 0;     // rounds with a draft / decode steps (adaptive drafting skips some)
  bool forced_acceptance = false;
  std::string skipped;  // why the row was not run (memory), else empty
};

struct BenchReport {
  double copy_gbps = 0;  // device-to-device copy, bytes read + written
  std::vector<BenchRow> rows;
  std::vector<ops::OpProfile> profile;  // one decode step, when asked
  double profile_step_us = 0;
};

// Bytes one decode step reads: weights (experts expected for `batch` random routings; the dense
// weights named by `mxfp4` at 17/32 bytes per element) + KV (2 bytes per element, 1 with fp8).
double decode_step_bytes(const ModelConfig& c, int batch, int depth, const Mxfp4Layers& mxfp4 = {},
                         KvCacheDtype kv = KvCacheDtype::Auto);

Result<BenchReport> run_bench(const Model& model, const BenchOptions& opt,
                              const std::function<void(const BenchRow&)>& on_row = {});
std::string format_bench_table(const Model& model, const BenchReport& r);
std::string format_profile_table(const BenchReport& r);

}  // namespace mx
