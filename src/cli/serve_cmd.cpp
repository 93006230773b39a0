// `mxserve serve`: the KV cache sized from the memory budget, the engine planned and logged, the
// server started before the model loads, and the flags with their help text.
#include "cli/serve_cmd.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <limits>
#include <thread>

#include "cli/demo_model.h"
#include "core/log.h"
#include "kernels/collective.h"
#include "runtime/scheduler.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_file.h"

namespace mx::cli {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop = true; }

namespace fs = std::filesystem;

// Activation scratch of one step token beyond what the fixed headroom covers: the grouped MoE's
// act (BF16) and y (FP32) rows of its K pairs and its permuted x, and the forward's BF16
// activations (x, xn, residual, MoE input, qkv, attention output). ~116 KB for 120b.
double step_bytes_per_token(const ModelConfig& c) {
  const double D = c.hidden_size, F = c.intermediate_size, K = c.num_experts_per_tok;
  return K * (2 * F + 4 * D) + 2 * D + 2 * (4 * D + c.qkv_width() + c.q_width());
}

// KV blocks that fit the memory budget: on CUDA a fraction of the device memory not taken by the
// weights (minus headroom for activations — 1.5 GiB, plus the scratch of a step budget above
// 2048 tokens — and the sliding layers' window pool); on the CPU a fraction of 4 GiB.
Result<int> kv_blocks(const Model& m, const ServeFlags& f, const KvLayout& kv, uint64_t draft_bytes,
                      int batched_tokens) {
  if (f.num_gpu_blocks_override > 0) return f.num_gpu_blocks_override;
  double budget = -double(draft_bytes);  // an EAGLE-3 draft's weights, loaded with the engine
  if (m.weights.device == Device::CUDA) {
    // Every rank's cache has the same blocks: the GPU with the least room decides.
    double room = std::numeric_limits<double>::max();
    for (int r = 0; r < m.tp_size(); ++r) {
      MX_ASSIGN(ops::MemoryInfo mi, ops::on_gpu(Device::CUDA, r, [] { return ops::memory_info(Device::CUDA); }));
      const double used = double(mi.total_bytes - mi.free_bytes);
      const double headroom = 1.5 * double(1u << 30) + std::max(0, batched_tokens - kDefaultBatchedTokens) *
                                                          step_bytes_per_token(m.rank_config());
      room = std::min(room, f.gpu_memory_utilization * double(mi.total_bytes) - used - headroom);
    }
    budget += room;
  } else {
    budget += f.gpu_memory_utilization * double(4ull << 30);
  }
  budget -= double(kv.window_pool_bytes);
  return int(std::min<double>(std::max(0.0, budget) / double(kv.bytes_per_block), double(1u << 30)));
}

// The request limits in force, once at start-up (docs/SERVING.md explains each).
void log_limits(const ServeFlags& f) {
  const server::HttpLimits& h = f.http;
  log_info("limits: body {} bytes, headers {} bytes within {} s, body within {} s, idle keep-alive {} s, "
           "connections {} ({} per client), JSON depth {}, {} tools, prompt {} bytes, shutdown drain {} s",
           h.max_body_bytes, h.max_header_bytes, h.header_timeout_s, h.body_timeout_s, h.keep_alive_timeout_s, h.max_connections,
           h.max_connections_per_client, f.max_json_depth, f.max_tools, f.max_prompt_bytes, f.shutdown_timeout);
  if (f.max_reasoning_tokens >= 0) log_info("reasoning: at most {} tokens per answer (--max-reasoning-tokens)", f.max_reasoning_tokens);
  log_info("API key: {}", f.api_key.empty() ? "none (every route is open)"
                                            : "required on every route but GET /health, GET /metrics, GET /metrics.json and the web pages");
}

// The limits on what a client may send (http_limits.h, request_params.h).
void add_limit_options(CLI::App* cmd, ServeFlags& f) {
  server::HttpLimits& h = f.http;
  cmd->add_option("--max-body-bytes", h.max_body_bytes, "Largest request body, after de-chunking (larger: 413)")
      ->default_val(h.max_body_bytes)->check(CLI::Range(size_t(1024), size_t(1) << 32));
  cmd->add_option("--max-header-bytes", h.max_header_bytes, "Largest request line + headers (larger: 431)")
      ->default_val(h.max_header_bytes)->check(CLI::Range(size_t(1024), size_t(1) << 24));
  cmd->add_option("--header-timeout", h.header_timeout_s,
                  "Seconds a client has to send the whole request line and headers (slower: 408, closed)")
      ->default_val(h.header_timeout_s)->check(CLI::Range(1, 3600));
  cmd->add_option("--keep-alive-timeout", h.keep_alive_timeout_s,
                  "Seconds an idle kept-alive connection stays open (sent to clients as Keep-Alive: timeout=N)")
      ->default_val(h.keep_alive_timeout_s)->check(CLI::Range(1, 3600));
  cmd->add_option("--body-timeout", h.body_timeout_s, "Seconds a client has to send the whole request body (slower: 408)")
      ->default_val(h.body_timeout_s)->check(CLI::Range(1, 3600));
  cmd->add_option("--max-connections", h.max_connections, "Open connections at most, all clients together (more: 503)")
      ->default_val(h.max_connections)->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-connections-per-client", h.max_connections_per_client,
                  "Open connections at most from one IP address (IPv6: one /64) (more: 429); raise it behind a proxy")
      ->default_val(h.max_connections_per_client)->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--shutdown-timeout", f.shutdown_timeout,
                  "On SIGTERM/SIGINT, seconds in-flight requests get to finish before they are cancelled")
      ->default_val(f.shutdown_timeout)->check(CLI::Range(0, 3600));
  cmd->add_option("--max-json-depth", f.max_json_depth,
                  "Deepest nesting of arrays/objects accepted in a request body (checked before parsing; deeper: 400)")
      ->default_val(server::kDefaultMaxJsonDepth)->check(CLI::Range(2, 1000));  // deeper: recursive copies
  cmd->add_option("--max-prompt-bytes", f.max_prompt_bytes,
                  "Largest rendered chat prompt text (schemas are indented on rendering), checked before encoding (larger: 400)")
      ->default_val(f.max_prompt_bytes)->check(CLI::Range(size_t(1024), size_t(1) << 32));
  cmd->add_option("--max-tools", f.max_tools, "Functions in one request's 'tools' at most (more: 400)")
      ->default_val(f.max_tools)->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-reasoning-tokens", f.max_reasoning_tokens,
                  "Reasoning (analysis) tokens per answer at most, then the answer is forced to follow; a request's "
                  "max_reasoning_tokens overrides it (-1: no limit)")
      ->default_val(f.max_reasoning_tokens)->check(CLI::Range(-1, 1 << 30));
}

// The settings in force, for the dashboard's side panel (GET /server_info); never the API key.
nlohmann::ordered_json startup_settings(const ServeFlags& f, const EngineArgs& ea, Device device, int bound_port,
                                        const std::string& mxfp4_applied, const std::string& kv_cache) {
  const server::HttpLimits& h = f.http;
  return {{"backend", device == Device::CPU ? "cpu" : "cuda"},
          {"host", f.host},
          {"port", bound_port},
          {"api_key", f.api_key.empty() ? "none" : "required"},
          {"max_model_len", ea.max_model_len},
          {"max_num_seqs", ea.max_num_seqs},
          {"max_num_batched_tokens", ea.max_num_batched_tokens},
          {"block_size", ea.kv_block_size},
          {"num_kv_blocks", ea.num_kv_blocks},
          {"kv_cache_tokens", int64_t(ea.num_kv_blocks) * ea.kv_block_size},
          {"kv_cache_dtype", kv_cache_dtype_name(ea.kv_cache_dtype)},
          {"kv_cache", kv_cache},
          {"gpu_memory_utilization", f.gpu_memory_utilization},
          {"enable_prefix_caching", f.enable_prefix_caching},
          {"async_scheduling", !f.no_async_scheduling},
          {"decode_steps", device == Device::CUDA && !f.enforce_eager ? "cuda graphs" : "eager"},
          {"moe_activation", f.moe_activation},
          {"mxfp4_layers", mxfp4_applied},
          {"tensor_parallel_size", f.tensor_parallel},
          {"speculative_config", ea.speculative.describe()},
          {"max_waiting_requests", f.max_waiting_requests},
          {"max_connections", h.max_connections},
          {"max_connections_per_client", h.max_connections_per_client},
          {"max_body_bytes", h.max_body_bytes},
          {"shutdown_timeout", f.shutdown_timeout},
          {"max_reasoning_tokens", f.max_reasoning_tokens},
          {"allowed_origins", f.allowed_origins.empty() ? "none" : f.allowed_origins}};
}

// --allowed-origins/-methods/-headers (JSON lists or comma-separated) and --allow-credentials.
Result<server::CorsPolicy> cors_policy(const ServeFlags& f) {
  server::CorsPolicy p{.credentials = f.allow_credentials};
  const std::pair<const std::string*, std::vector<std::string>*> lists[] = {
      {&f.allowed_origins, &p.origins}, {&f.allowed_methods, &p.methods}, {&f.allowed_headers, &p.headers}};
  for (const auto& [text, out] : lists) {
    auto parsed = server::parse_cors_list(*text);
    if (auto* err = std::get_if<std::string>(&parsed)) return Status::error(fmt::format("CORS flag: {}", *err));
    *out = std::move(std::get<std::vector<std::string>>(parsed));
  }
  if (p.enabled())
    log_info("CORS: origins {}, methods {}, headers {}{}", f.allowed_origins, f.allowed_methods, f.allowed_headers,
             p.credentials ? ", with credentials" : "");
  return p;
}

// The engine's settings, the KV cache sized from the memory budget, logged as vLLM does.
Result<EngineArgs> plan_engine(const Model& model, const ServeFlags& f, Device device, const KvCacheSettings& kv,
                               const SpeculativeConfig& spec) {
  const ModelConfig& c = model.config;
  int batched_tokens = f.max_num_batched_tokens;
  if (batched_tokens == 0) {
    MX_ASSIGN(batched_tokens, default_max_num_batched_tokens(device));
  }
  EngineArgs ea{.max_num_seqs = f.max_num_seqs,
                .max_num_batched_tokens = std::max(batched_tokens, f.max_num_seqs),
                .kv_block_size = f.block_size,
                .prefix_caching = f.enable_prefix_caching ? PrefixCaching::On : PrefixCaching::Off,
                .enforce_eager = f.enforce_eager,
                .async_scheduling = f.no_async_scheduling ? AsyncScheduling::Off : AsyncScheduling::On,
                .max_waiting = f.max_waiting_requests,
                .kv_cache_dtype = kv.dtype,
                .kv_scales = kv.scales,
                .speculative = spec};
  const KvLayout layout = kv_layout(model.rank_config(), ea, device);
  uint64_t draft_bytes = 0;
  if (spec.enabled() && spec.method == SpecMethod::Eagle3) {
    MX_ASSIGN(draft_bytes, eagle3_weight_bytes(spec.model, c));
  }
  MX_ASSIGN(ea.num_kv_blocks, kv_blocks(model, f, layout, draft_bytes, ea.max_num_batched_tokens));
  const int64_t kv_tokens = int64_t(ea.num_kv_blocks) * f.block_size;
  ea.max_model_len = f.max_model_len > 0 ? f.max_model_len : c.max_position_embeddings;
  if (f.max_model_len <= 0 && kv_tokens < ea.max_model_len) {
    ea.max_model_len = int(kv_tokens);
    log_warn("the KV cache holds {} tokens: max_model_len lowered to {}", kv_tokens, ea.max_model_len);
  }
  log_info("dtype: dense weights {}, experts {}, activations {}, KV cache {}",
           model.mxfp4_layers.any() ? "mxfp4 where --mxfp4-layers " + model.mxfp4_layers.describe() + ", else bf16"
                                    : std::string("bf16"),
           c.mxfp4_experts ? "mxfp4" : "bf16", device == Device::CPU ? "f32 (CPU reference)" : "bf16",
           describe_kv_cache(kv, device));
  log_info("KV cache: {} tokens ({:.2f} GiB, {}{}) + a {:.2f} GiB window pool; maximum concurrency for {} tokens per "
           "request: {:.2f}x",
           kv_tokens, double(layout.bytes_per_block) * ea.num_kv_blocks / double(1u << 30),
           kv_element_name(kv.dtype, device),
           model.tp_size() > 1 ? fmt::format("; on each of {} GPUs, for its kv heads", model.tp_size()) : std::string(),
           double(layout.window_pool_bytes) / double(1u << 30), ea.max_model_len,
           double(kv_tokens) / ea.max_model_len);
  log_info("scheduler: max_num_seqs {}, max_num_batched_tokens {}, chunked prefill on, prefix caching {}, async "
           "scheduling {}, decode steps {}",
           ea.max_num_seqs, ea.max_num_batched_tokens, f.enable_prefix_caching ? "on" : "off",
           f.no_async_scheduling ? "off" : "on",
           device == Device::CUDA && !f.enforce_eager
               ? "as CUDA graphs (one per batch bucket up to max_num_seqs, captured on first use), sampling on the GPU"
               : "eager");
  if (spec.enabled()) log_info("speculative decoding: {} (a round's tokens are planned once its samples are read)", spec.describe());
  return ea;
}

// find_tokenizer_file's tokenizer, or nullptr with a warning when there is none.
Result<std::shared_ptr<const Tokenizer>> load_tokenizer(const ServeFlags& f, const fs::path& model_dir) {
  MX_ASSIGN(const std::optional<fs::path> path, find_tokenizer_file({.file = f.tokenizer, .model_dir = model_dir}));
  if (path) return Tokenizer::load(*path);
  log_warn("{} has no tokenizer.json: only token-id prompts on /v1/completions will work", model_dir.string());
  return std::shared_ptr<const Tokenizer>();
}

Status serve_until_signal(ServeFlags f) {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const bool demo = f.model.empty();
  if (demo) {
    MX_ASSIGN(f.model, demo_model_dir());
  }
  if (f.served_model_name.empty()) f.served_model_name = demo ? "mxserve-demo" : f.model;
  MX_ASSIGN(const Device device, select_device(f.backend));
  MX_ASSIGN(const ops::MoeActivation moe_activation, moe_activation_setting(f.moe_activation));
  MX_ASSIGN(const Mxfp4Layers mxfp4, parse_mxfp4_layers(f.mxfp4_layers));
  MX_ASSIGN(const KvCacheSettings kv, kv_cache_settings(f.kv_cache));
  MX_ASSIGN(const SpeculativeConfig spec, parse_speculative_config(f.speculative));
  log_info("mxserve 0.1.0 serve: model {} (served as '{}'), backend {}", f.model, f.served_model_name,
           device == Device::CPU ? "cpu" : "cuda");
  MX_ASSIGN(server::CorsPolicy cors, cors_policy(f));
  server::Server srv({.host = f.host, .port = f.port, .api_key = f.api_key, .served_model_name = f.served_model_name,
                      .max_json_depth = f.max_json_depth, .max_tools = f.max_tools,
                      .max_prompt_bytes = f.max_prompt_bytes, .http = f.http,
                      .cors = std::move(cors), .responses_store = f.responses_store, .shutdown_timeout_s = f.shutdown_timeout,
                      .max_reasoning_tokens = f.max_reasoning_tokens});
  log_limits(f);
  MX_TRY(srv.start());
  MX_ASSIGN(auto model, Model::load(f.model, device, ShowProgress::Yes, mxfp4, f.tensor_parallel));
  MX_ASSIGN(const std::shared_ptr<const Tokenizer> tok, load_tokenizer(f, model->path));
  MX_ASSIGN(EngineArgs ea, plan_engine(*model, f, device, kv, spec));
  ea.moe_activation = moe_activation;
  MX_ASSIGN(auto engine, Engine::create(*model, ea));
  log_info("KV layout: {}", engine->kv_summary());
  srv.set_ready(std::move(engine), tok,
                startup_settings(f, ea, device, srv.port(), model->mxfp4_layers.describe(), describe_kv_cache(kv, device)));
  const std::string shown_host = f.host == "0.0.0.0" ? "0.0.0.0" : f.host;
  log_info("Starting API server on http://{}:{}", shown_host, srv.port());
  log_info("Routes: GET /health, GET /v1/models, GET /v1/models/{{id}}, POST /v1/chat/completions, POST /v1/completions, "
           "POST /v1/responses, GET and DELETE /v1/responses/{{id}}, POST /tokenize, POST /detokenize, GET /metrics, "
           "GET /metrics.json, GET /server_info, GET / (web chat), GET /dashboard (operator view)");
  log_info("Application startup complete.");
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  log_info("Shutting down");
  srv.stop();
  return ok_status();
}

}  // namespace

Status serve(const ServeFlags& f) {
  return catch_exceptions("serve", [&] { return serve_until_signal(f); });
}

Command register_serve(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  auto* cmd = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API (continuous batching)");
  // Read by expand_args before parsing; declared here for --help and so that it parses.
  cmd->add_option("--config", f->config,
                  "YAML file of flags, one `name: value` per line (vLLM style: `max-model-len: 32768`); "
                  "flags on the command line win");
  cmd->add_option("model", f->model, "Model folder or Hugging Face repo id; default: the bundled demo model");
  cmd->add_option("-m,--model", f->model, "Same as the positional MODEL (llama-server style)");
  cmd->add_option("--tokenizer", f->tokenizer,
                  "tokenizer.json to use; default: the model folder's, else $MXSERVE_TOKENIZER (synthetic models have none)");
  cmd->add_option("--host", f->host, "Address to listen on")->default_val("0.0.0.0");
  cmd->add_option("--port", f->port, "Port to listen on; 0 picks a free one")->default_val(8000)->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", f->api_key, "Require 'Authorization: Bearer KEY' on every route but GET /health, /metrics, /metrics.json and the web pages "
                  "(/, /dashboard, /assets/...); default: no auth");
  cmd->add_option("--served-model-name", f->served_model_name, "Model name in the API; default: the MODEL argument");
  cmd->add_option("-c,--max-model-len", f->max_model_len, "Context length (prompt + output) per request; 0: the model's, capped by the KV cache")
      ->default_val(0)->check(CLI::NonNegativeNumber);
  cmd->add_option("--parallel,--max-num-seqs", f->max_num_seqs, "Sequences decoded together at most (alias -np)")
      ->default_val(256)->check(CLI::Range(1, 4096));
  cmd->add_option("--max-num-batched-tokens", f->max_num_batched_tokens,
                  "Tokens per forward call (prefill chunk budget); 0: 8192 on GPUs with >= 70 GiB and compute "
                  "capability >= 9.0, else 2048")
      ->default_val(0)->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--gpu-memory-utilization", f->gpu_memory_utilization,
                  "Fraction of GPU memory for weights + activations + KV cache (on the CPU: of 4 GiB for the KV cache)")
      ->default_val(0.9)->check(CLI::Range(0.01, 1.0));
  cmd->add_option("--num-gpu-blocks-override", f->num_gpu_blocks_override, "KV cache size in blocks; 0: from the memory budget")
      ->default_val(0)->check(CLI::NonNegativeNumber);
  cmd->add_option("--block-size", f->block_size, "Tokens per KV cache block")->default_val(16)->check(CLI::Range(1, 1024));
  cmd->add_flag("--enable-prefix-caching", f->enable_prefix_caching, "Reuse the KV cache blocks of shared prompt prefixes (full blocks)");
  cmd->add_flag("--enforce-eager", f->enforce_eager, "Run every decode step op by op instead of replaying CUDA graphs");
  cmd->add_flag("--no-async-scheduling", f->no_async_scheduling,
                "Plan each step only after the previous one is read (default: the host prepares step N+1 while the "
                "GPU runs step N)");
  add_limit_options(cmd, *f);
  cmd->add_option("--allowed-origins", f->allowed_origins,
                  "Browser origins allowed to call the API (CORS), a JSON list ('[\"*\"]', vLLM's form) or comma-separated; "
                  "default: none (only the server's own page)");
  cmd->add_option("--allowed-methods", f->allowed_methods, "Methods allowed cross-origin (CORS), as --allowed-origins")
      ->default_val("*");
  cmd->add_option("--allowed-headers", f->allowed_headers, "Request headers allowed cross-origin (CORS), as --allowed-origins")
      ->default_val("*");
  cmd->add_flag("--allow-credentials", f->allow_credentials, "Allow cross-origin requests with credentials (CORS)");
  cmd->add_option("--responses-store-bytes", f->responses_store.max_bytes,
                  "Memory for stored /v1/responses (previous_response_id, GET /v1/responses/{id}), oldest evicted first; 0: store none")
      ->default_val(f->responses_store.max_bytes);
  cmd->add_option("--responses-store-ttl", f->responses_store.ttl_s, "Seconds a stored response is kept")
      ->default_val(f->responses_store.ttl_s)->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--max-waiting-requests", f->max_waiting_requests,
                  "Requests waiting for a seat at most; beyond: 503 with Retry-After (0: unbounded)")
      ->default_val(1024)->check(CLI::NonNegativeNumber);
  cmd->add_option("--backend", f->backend, "Where to run: auto (CUDA if present), cpu, cuda")
      ->default_val("auto")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  add_moe_activation_option(cmd, &f->moe_activation);
  add_mxfp4_layers_option(cmd, &f->mxfp4_layers);
  add_tensor_parallel_option(cmd, &f->tensor_parallel);
  add_kv_cache_dtype_options(cmd, &f->kv_cache, KvScaleOption::Yes);
  add_speculative_option(cmd, &f->speculative);
  return {.app = cmd, .run = [f] { return serve(*f); }};
}

}  // namespace mx::cli
