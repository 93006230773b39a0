// `mxserve run`: the prompt (ids, text or a harmony chat turn), one request on an Engine, its
// tokens streamed to the terminal, the logits optionally written as .npy.
#include "cli/run_cmd.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>

#include "cli/demo_model.h"
#include "core/log.h"
#include "core/npy.h"
#include "runtime/scheduler.h"
#include "tokenizer/harmony.h"
#include "tokenizer/harmony_parser.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_file.h"

namespace mx::cli {
namespace {

// Chat prompt: the default system message (with the reasoning effort) and one user message,
// rendered as harmony for the assistant's turn.
Result<std::vector<int32_t>> chat_prompt(const Tokenizer& tok, const std::string& text, const std::string& effort) {
  harmony::SystemContent sys;
  sys.reasoning_effort = harmony::effort_from_name(effort).value_or(harmony::ReasoningEffort::Medium);
  const std::vector<harmony::Message> conv = {harmony::system_message(sys),
                                              harmony::text_message(harmony::Role::User, text)};
  MX_ASSIGN(harmony::Rendered r, harmony::render_for_completion(conv, harmony::Role::Assistant));
  return r.tokens(tok);
}

// Prints streamed harmony output: the analysis channel dimmed on stderr, everything else on stdout.
class ChatPrinter {
 public:
  static Result<ChatPrinter> create(std::shared_ptr<const Tokenizer> tok) {
    MX_ASSIGN(harmony::StreamParser p, harmony::StreamParser::create(
                                           tok, {.role = harmony::Role::Assistant, .mode = harmony::ParseMode::Lenient}));
    return ChatPrinter(std::move(p));
  }
  void push(int32_t id) {
    ids_.push_back(id);
    (void)parser_.push(id);
    const std::string& d = parser_.last_content_delta();
    if (d.empty()) return;
    printed_ = true;
    const bool analysis = parser_.current_channel().value_or("") == "analysis";
    if (analysis) std::fprintf(stderr, "\033[2m%s\033[0m", d.c_str());
    else std::fputs(d.c_str(), stdout);
    std::fflush(analysis ? stderr : stdout);
  }
  // Output that never reached a message body (e.g. a model with random weights) is shown raw.
  void finish(const Tokenizer& tok) {
    if (!printed_ && !ids_.empty())
      std::printf("(the output did not follow the harmony format; raw text:)\n%s", tok.decode(ids_).c_str());
  }

 private:
  explicit ChatPrinter(harmony::StreamParser p) : parser_(std::move(p)) {}
  harmony::StreamParser parser_;
  std::vector<int32_t> ids_;
  bool printed_ = false;
};

Result<std::vector<int32_t>> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const long v = std::stol(item, &used);
      MX_CHECK(used == item.size() && v >= 0 && v <= INT32_MAX, "--prompt-ids: '{}' is not a token id", item);
      ids.push_back(int32_t(v));
    } catch (const std::exception&) {
      return MX_ERROR("--prompt-ids: '{}' is not a token id", item);
    }
  }
  MX_CHECK(!ids.empty(), "--prompt-ids is empty");
  return ids;
}

// The flags that say how the model loads and the engine runs, checked before anything loads.
struct RunSettings {
  Device device = Device::CPU;
  Mxfp4Layers mxfp4;
  KvCacheSettings kv;
  SpeculativeConfig spec;
  ops::MoeActivation moe_activation = ops::MoeActivation::BF16;
};

Result<RunSettings> run_settings(const RunFlags& f) {
  RunSettings s;
  MX_ASSIGN(s.device, select_device(f.backend));
  MX_ASSIGN(s.moe_activation, moe_activation_setting(f.moe_activation));
  MX_ASSIGN(s.mxfp4, parse_mxfp4_layers(f.mxfp4_layers));
  MX_ASSIGN(s.kv, kv_cache_settings(f.kv_cache));
  MX_ASSIGN(s.spec, parse_speculative_config(f.speculative));
  return s;
}

// find_tokenizer_file's tokenizer, or nullptr: none found, or one that does not load (a warning;
// a prompt given as ids needs none).
Result<std::shared_ptr<const Tokenizer>> load_tokenizer(const RunFlags& f, const std::filesystem::path& model_dir) {
  MX_ASSIGN(const auto path, find_tokenizer_file({.file = f.tokenizer, .model_dir = model_dir}));
  std::shared_ptr<const Tokenizer> tok;
  if (!path) return tok;
  auto t = Tokenizer::load(*path);
  if (t.ok()) tok = t.value();
  else log_warn("tokenizer.json not usable: {}", t.status().message());
  return tok;
}

Result<std::vector<int32_t>> prompt_tokens(const RunFlags& f, const Tokenizer* tok) {
  if (!f.prompt_ids.empty()) return parse_ids(f.prompt_ids);
  MX_CHECK(tok, "-p needs a tokenizer: the model folder's tokenizer.json, --tokenizer FILE or ${} (or use "
                "--prompt-ids)", kTokenizerEnv);
  if (f.raw) return tok->encode(f.prompt);
  return chat_prompt(*tok, f.prompt, f.effort);
}

// The engine that `serve` runs, sized for this one request.
Result<std::unique_ptr<Engine>> request_engine(const Model& model, size_t prompt_size, int max_tokens,
                                               const RunSettings& s) {
  const int64_t total = int64_t(prompt_size) + std::max(max_tokens, 1);
  MX_CHECK(total <= model.config.max_position_embeddings,
           "prompt ({}) + max_tokens ({}) exceeds the model's context of {}", prompt_size, max_tokens,
           model.config.max_position_embeddings);
  constexpr int kBlock = 16;
  // The serve default, but no bigger than the prompt needs (the engine's warm-up runs a step of it).
  MX_ASSIGN(const int auto_tokens, default_max_num_batched_tokens(model.weights.device));
  const int batched_tokens = int(std::min<int64_t>(auto_tokens, std::max<int64_t>(int64_t(prompt_size), kDefaultBatchedTokens)));
  EngineArgs a{.max_num_seqs = 1,
               .max_num_batched_tokens = batched_tokens,
               .max_model_len = int(total),
               .kv_block_size = kBlock,
               .num_kv_blocks = int((total + kBlock - 1) / kBlock) + 1,
               .stats_interval_seconds = 0,
               .kv_cache_dtype = s.kv.dtype,
               .kv_scales = s.kv.scales,
               .speculative = s.spec};
  a.moe_activation = s.moe_activation;
  return Engine::create(model, a);
}

struct Generation {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // (tokens, V) when the request keeps them
  RequestTiming timing;
};

// Submits the request and hands each token to on_token as it arrives.
Result<Generation> generate(Engine& engine, RequestParams p, const std::function<void(int32_t)>& on_token) {
  Generation g;
  if (p.max_tokens <= 0) return g;
  MX_ASSIGN(auto s, engine.submit(std::move(p)));
  for (StreamUpdate u; !u.finished();) {
    u = s->wait(std::chrono::milliseconds(100));
    for (int32_t id : u.tokens) on_token(id);
    g.tokens.insert(g.tokens.end(), u.tokens.begin(), u.tokens.end());
    g.logits.insert(g.logits.end(), u.logits.begin(), u.logits.end());
    MX_CHECK(u.reason != FinishReason::Error, "generation failed: {}", u.error);
  }
  g.timing = s->timing();
  return g;
}

void log_speed(size_t prompt_size, const Generation& g) {
  auto secs = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  const double prefill_s = g.tokens.empty() ? 0 : secs(g.timing.arrival, g.timing.first_token);
  const double decode_s = g.tokens.empty() ? 0 : secs(g.timing.first_token, g.timing.finished);
  log_info("prompt {} tokens in {:.3f} s ({:.1f} t/s), generated {} tokens in {:.3f} s ({:.1f} t/s after the first)",
           prompt_size, prefill_s, double(prompt_size) / std::max(prefill_s, 1e-9), g.tokens.size(), decode_s,
           double(std::max<size_t>(g.tokens.size(), 1) - 1) / std::max(decode_s, 1e-9));
}

Status generate_and_print(RunFlags f) {
  MX_CHECK(!f.prompt.empty() || !f.prompt_ids.empty(), "give a prompt with -p TEXT or --prompt-ids 1,2,3");
  MX_ASSIGN(const RunSettings settings, run_settings(f));
  if (f.model.empty()) {
    MX_ASSIGN(f.model, demo_model_dir());
  }
  MX_ASSIGN(auto model, Model::load(f.model, settings.device, ShowProgress::Yes, settings.mxfp4, f.tensor_parallel));
  MX_ASSIGN(const std::shared_ptr<const Tokenizer> tok, load_tokenizer(f, model->path));
  MX_ASSIGN(const std::vector<int32_t> prompt, prompt_tokens(f, tok.get()));
  const bool chat = tok && f.prompt_ids.empty() && !f.raw;
  RequestParams p{.prompt = prompt, .max_tokens = f.max_tokens};
  p.sampling = {.temperature = f.temperature, .top_k = f.top_k, .top_p = f.top_p, .min_p = f.min_p, .seed = f.seed};
  p.eos_ids = model->config.eos_token_ids;
  if (f.ignore_eos) p.ignore_eos = IgnoreEos::Yes;
  if (chat && !f.ignore_eos)  // the assistant's turn ends with <|return|> or a tool <|call|>
    p.stop_ids = {harmony::marker_id(harmony::Marker::Return), harmony::marker_id(harmony::Marker::Call)};
  p.keep_logits = !f.dump_logits.empty();
  std::unique_ptr<StreamDecoder> stream = tok && !chat ? std::make_unique<StreamDecoder>(tok) : nullptr;
  std::optional<ChatPrinter> printer;
  if (chat) {
    MX_ASSIGN(printer, ChatPrinter::create(tok));
  }
  auto on_token = [&](int32_t id) {
    if (printer) printer->push(id);
    else if (stream) std::fputs(stream->push(id).c_str(), stdout);
    else std::printf("%d ", id);
    std::fflush(stdout);
  };
  MX_ASSIGN(auto engine, request_engine(*model, prompt.size(), f.max_tokens, settings));
  MX_ASSIGN(const Generation g, generate(*engine, std::move(p), on_token));
  if (stream) std::fputs(stream->flush().c_str(), stdout);
  if (printer) printer->finish(*tok);
  std::printf("\n");
  log_speed(prompt.size(), g);
  if (settings.spec.enabled()) {
    const SpecStats st = engine->stats().spec;
    log_info("speculative decoding ({}): {} rounds drafted {} tokens, {} accepted: mean acceptance length {:.2f}",
             settings.spec.describe(), st.drafts, st.draft_tokens, st.accepted_tokens, st.mean_acceptance_length());
  }
  if (!f.dump_logits.empty()) {
    const int64_t V = model->config.vocab_size;
    MX_TRY(write_npy_f32(f.dump_logits, g.logits, {int64_t(g.logits.size()) / V, V}));
    log_info("wrote logits of {} steps to {}", g.logits.size() / size_t(V), f.dump_logits);
  }
  return ok_status();
}

}  // namespace

Status run(const RunFlags& f) {
  return catch_exceptions("run", [&] { return generate_and_print(f); });
}

Command register_run(CLI::App& app) {
  auto f = std::make_shared<RunFlags>();
  auto* cmd = app.add_subcommand("run", "Generate from one prompt and stream the output to the terminal");
  cmd->add_option("model", f->model,
                  "Model folder, Hugging Face repo id (in the HF cache) or synthetic:…; default: the bundled demo model");
  cmd->add_option("--tokenizer", f->tokenizer,
                  "tokenizer.json to use; default: the model folder's, else $MXSERVE_TOKENIZER (synthetic models have none)");
  auto* text = cmd->add_option("-p,--prompt", f->prompt, "Prompt text (needs the model's tokenizer.json)");
  auto* ids = cmd->add_option("--prompt-ids", f->prompt_ids, "Prompt as comma-separated token ids, e.g. 1,2,3");
  text->excludes(ids);
  cmd->add_option("-n,--max-tokens", f->max_tokens, "Tokens to generate")->default_val(64)->check(CLI::NonNegativeNumber);
  cmd->add_option("--temperature", f->temperature, "Sampling temperature; 0 = greedy")->default_val(0.0f)->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", f->top_p, "Nucleus sampling mass")->default_val(1.0f)->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--top-k", f->top_k, "Keep the k most likely tokens; 0 = off")->default_val(0)->check(CLI::NonNegativeNumber);
  cmd->add_option("--min-p", f->min_p, "Drop tokens below min-p times the top probability")->default_val(0.0f)->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--seed", f->seed, "Sampling seed")->default_val(0);
  cmd->add_option("--backend", f->backend, "Where to run: auto (CUDA if present), cpu, cuda")
      ->default_val("auto")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  add_moe_activation_option(cmd, &f->moe_activation);
  add_mxfp4_layers_option(cmd, &f->mxfp4_layers);
  add_tensor_parallel_option(cmd, &f->tensor_parallel);
  add_kv_cache_dtype_options(cmd, &f->kv_cache, KvScaleOption::Yes);
  add_speculative_option(cmd, &f->speculative);
  cmd->add_option("--dump-logits", f->dump_logits, "Write the logits of every step as a float32 .npy [steps, vocab]");
  cmd->add_flag("--ignore-eos", f->ignore_eos, "Do not stop at the end-of-sequence token");
  cmd->add_flag("--raw", f->raw, "Complete -p TEXT as plain text instead of a harmony chat turn");
  cmd->add_option("--reasoning-effort", f->effort, "Reasoning effort of the chat prompt")
      ->default_val("medium")->check(CLI::IsMember({"low", "medium", "high"}));
  return {.app = cmd, .run = [f] { return run(*f); }};
}

}  // namespace mx::cli
