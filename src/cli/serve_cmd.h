// `mxserve serve [MODEL]`: the OpenAI-compatible server with vLLM's flag names. Binds first
// (/health is 503 while loading), loads the model (or the bundled demo model), sizes the paged KV
// cache from --gpu-memory-utilization, starts the engine and serves until SIGINT/SIGTERM.
#pragma once

#include <cstddef>
#include <string>

#include "cli/backend.h"
#include "cli/command.h"
#include "server/http_limits.h"
#include "server/request_params.h"
#include "server/response_store.h"

namespace mx::cli {

struct ServeFlags {
  std::string config, model, tokenizer, host = "0.0.0.0", api_key, served_model_name, backend = "auto";
  std::string moe_activation = "bf16", mxfp4_layers = "moe";
  int tensor_parallel = 1;  // --tensor-parallel-size
  KvCacheFlags kv_cache;
  std::string speculative;  // --speculative-config JSON
  int port = 8000, max_model_len = 0, max_num_seqs = 256, block_size = 16;
  int max_num_batched_tokens = 0;  // 0: default_max_num_batched_tokens (8192 on H100-class GPUs, else 2048)
  int num_gpu_blocks_override = 0;
  int max_json_depth = server::kDefaultMaxJsonDepth;
  int max_tools = 128;
  size_t max_prompt_bytes = 32u << 20;
  int max_waiting_requests = 1024;
  server::HttpLimits http;
  std::string allowed_origins, allowed_methods = "*", allowed_headers = "*";  // CORS (cors.h)
  bool allow_credentials = false;
  server::ResponseStoreLimits responses_store;
  int shutdown_timeout = 20;
  int max_reasoning_tokens = -1;
  double gpu_memory_utilization = 0.9;
  bool enable_prefix_caching = false;
  bool enforce_eager = false;
  bool no_async_scheduling = false;
};

// Serves until SIGINT or SIGTERM (the handlers are installed here), then drains and returns.
Status serve(const ServeFlags& f);
Command register_serve(CLI::App& app);

}  // namespace mx::cli
