// `mxserve run MODEL`: generate from prompt ids or text through the Engine (the loop `serve` runs),
// stream the output, optionally dump the logits each token was chosen from as a .npy file.
#pragma once

#include <cstdint>
#include <string>

#include "cli/backend.h"
#include "cli/command.h"

namespace mx::cli {

struct RunFlags {
  std::string model;       // folder, HF repo id or synthetic:…; empty: the demo model
  std::string tokenizer;   // --tokenizer; empty: the model folder's, else $MXSERVE_TOKENIZER
  std::string prompt, prompt_ids, backend = "auto", dump_logits;
  std::string moe_activation = "bf16", mxfp4_layers = "moe";
  int tensor_parallel = 1;  // --tensor-parallel-size
  KvCacheFlags kv_cache;
  std::string speculative;  // --speculative-config JSON
  int max_tokens = 64, top_k = 0;
  float temperature = 0.0f, top_p = 1.0f, min_p = 0.0f;
  uint64_t seed = 0;
  bool ignore_eos = false, raw = false;
  std::string effort = "medium";  // --reasoning-effort of the chat prompt
};

Status run(const RunFlags& f);
Command register_run(CLI::App& app);

}  // namespace mx::cli
