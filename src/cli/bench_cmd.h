// `mxserve bench MODEL`: llama-bench-style prefill/decode throughput table (see runtime/bench.h).
#pragma once

#include <string>

#include "cli/backend.h"
#include "cli/command.h"

namespace mx::cli {

struct BenchFlags {
  std::string model;  // folder, HF repo id or synthetic:20b / synthetic:120b / synthetic:tiny
  std::string prompts = "2048", gens = "32,128", depths = "0", batches = "1";  // the -p, -n, -d, -b lists
  std::string backend = "auto";
  std::string moe_activation = "bf16", mxfp4_layers = "moe";
  int tensor_parallel = 1;  // --tensor-parallel-size
  KvCacheFlags kv_cache;
  std::string speculative;           // --speculative-config JSON
  double spec_acceptance_rate = -1;  // < 0: the target decides
  int reps = 3;
  bool profile = false, no_graphs = false;
};

Status bench(const BenchFlags& f);
Command register_bench(CLI::App& app);

}  // namespace mx::cli
