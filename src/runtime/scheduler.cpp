// Engine: creation and checks, the submission API, and the loop thread (plan -> stage -> forward
// -> sample -> stream); the plan itself is in scheduler_plan.cpp.
#include "runtime/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/log.h"

namespace mx {
namespace {

// Token counts (sequences decoding together) up to which decode steps replay CUDA graphs; one
// graph per count, captured on first use (~1 ms each).
constexpr int64_t kMaxGraphTokens = 64;

bool contains(const std::vector<int32_t>& v, int32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// log_softmax of the row at `tok`, and the `top` most likely ids (lower id first on ties).
TokenLogprob token_logprob(std::span<const float> row, int32_t tok, int top) {
  const float m = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (float x : row) sum += std::exp(double(x) - m);
  const double log_z = double(m) + std::log(sum);
  TokenLogprob lp{.logprob = float(double(row[size_t(tok)]) - log_z)};
  if (top <= 0) return lp;
  std::vector<int32_t> ids(row.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  const size_t k = std::min(ids.size(), size_t(top));
  std::partial_sort(ids.begin(), ids.begin() + ptrdiff_t(k), ids.end(), [&](int32_t a, int32_t b) {
    return row[size_t(a)] > row[size_t(b)] || (row[size_t(a)] == row[size_t(b)] && a < b);
  });
  for (size_t i = 0; i < k; ++i) lp.top.emplace_back(ids[i], float(double(row[size_t(ids[i])]) - log_z));
  return lp;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(const Model& model, const EngineArgs& args_in) {
  EngineArgs a = args_in;
  const ModelConfig& c = model.config;
  if (a.max_model_len <= 0) a.max_model_len = c.max_position_embeddings;
  MX_CHECK(a.max_model_len <= c.max_position_embeddings, "max_model_len {} exceeds the model's context of {}",
           a.max_model_len, c.max_position_embeddings);
  MX_CHECK(a.max_num_seqs >= 1, "max_num_seqs must be >= 1");
  MX_CHECK(a.max_num_batched_tokens >= a.max_num_seqs, "max_num_batched_tokens ({}) must be >= max_num_seqs ({})",
           a.max_num_batched_tokens, a.max_num_seqs);
  MX_CHECK(a.kv_block_size >= 1, "kv_block_size must be >= 1");
  const int blocks_per_seq = (a.max_model_len + a.kv_block_size - 1) / a.kv_block_size;
  MX_CHECK(a.num_kv_blocks >= blocks_per_seq,
           "the KV cache ({} blocks of {} tokens) cannot hold one request of max_model_len {}; lower max_model_len "
           "or give the cache more memory",
           a.num_kv_blocks, a.kv_block_size, a.max_model_len);
  const Device dev = model.weights.device;
  MX_ASSIGN(KvCache kv, KvCache::create(c, dev, a.num_kv_blocks, a.kv_block_size));
  MX_ASSIGN(Workspace ws, Workspace::create(c, dev, a.max_num_batched_tokens, a.max_num_seqs));
  MX_ASSIGN(BatchStaging st,
            BatchStaging::create(dev, a.max_num_batched_tokens, a.max_num_seqs, blocks_per_seq, a.max_num_seqs,
                                 c.vocab_size));
  return std::unique_ptr<Engine>(new Engine(model, a, std::move(kv), std::move(ws), std::move(st)));
}

Engine::Engine(const Model& model, const EngineArgs& args, KvCache kv, Workspace ws, BatchStaging staging)
    : model_(model),
      args_(args),
      kv_(std::move(kv)),
      blocks_(kv_, args.prefix_caching),
      ws_(std::move(ws)),
      staging_(std::move(staging)) {
  stats_.kv_blocks_total = kv_.num_blocks();
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& s : inbox_) s->stream->finish(FinishReason::Cancelled);
  for (auto& s : plan_.waiting) s->stream->finish(FinishReason::Cancelled);
  for (auto& s : plan_.running) s->stream->finish(FinishReason::Cancelled);
}

Result<std::shared_ptr<RequestStream>> Engine::submit(RequestParams p) {
  const ModelConfig& c = model_.config;
  MX_CHECK(!p.prompt.empty(), "the prompt is empty");
  MX_CHECK(p.max_tokens >= 1, "max_tokens must be at least 1, got {}", p.max_tokens);
  MX_CHECK(p.logprobs >= -1 && p.logprobs <= 20, "logprobs must be in [-1, 20], got {}", p.logprobs);
  MX_CHECK(p.min_tokens >= 0 && p.min_tokens <= p.max_tokens, "min_tokens ({}) must be in [0, max_tokens ({})]",
           p.min_tokens, p.max_tokens);
  for (size_t i = 0; i < p.prompt.size(); ++i)
    MX_CHECK(p.prompt[i] >= 0 && p.prompt[i] < c.vocab_size,
             "prompt token {} at index {} is outside the vocabulary (size {})", p.prompt[i], i, c.vocab_size);
  const int64_t total = int64_t(p.prompt.size()) + p.max_tokens;
  MX_CHECK(total <= args_.max_model_len,
           "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the prompt, {} "
           "to generate).",
           args_.max_model_len, total, p.prompt.size(), p.max_tokens);
  auto stream = std::make_shared<RequestStream>(next_id_++);
  auto seq = std::make_unique<Sequence>(stream, std::move(p));
  seq->timing.arrival = Clock::now();
  seq->timing.prompt_tokens = int(seq->tokens.size());
  {
    std::lock_guard lock(mu_);
    MX_CHECK(!stop_, "the engine is shutting down");
    inbox_.push_back(std::move(seq));
  }
  cv_.notify_all();
  return stream;
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Engine::loop() {
  std::vector<Chunk> chunks;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      const bool idle = plan_.running.empty() && plan_.waiting.empty();
      if (idle) cv_.wait(lock, [&] { return stop_ || !inbox_.empty(); });
      if (stop_) return;
      for (auto& s : inbox_) plan_.waiting.push_back(std::move(s));
      inbox_.clear();
    }
    drop_cancelled();
    plan_step(plan_, blocks_, {.max_num_seqs = args_.max_num_seqs, .max_num_batched_tokens = args_.max_num_batched_tokens},
              chunks);
    if (!chunks.empty()) {
      const Status st = run_step(chunks);
      if (!st.ok()) {
        log_error("engine step failed: {}", st.message());
        for (const Chunk& ch : chunks) finish(*ch.seq, FinishReason::Error, st.message());
      }
    } else if (!plan_.waiting.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // nothing fits yet: do not spin
    }
    remove_finished();
    update_stats();
    maybe_log_stats();
  }
}

void Engine::drop_cancelled() {
  for (auto& s : plan_.running)
    if (s->stream->cancelled()) finish(*s, FinishReason::Cancelled);
  remove_finished();
  for (auto it = plan_.waiting.begin(); it != plan_.waiting.end();) {
    if ((*it)->stream->cancelled()) {
      finish(**it, FinishReason::Cancelled);
      blocks_.release((*it)->table);
      it = plan_.waiting.erase(it);
    } else {
      ++it;
    }
  }
}

Status Engine::run_step(const std::vector<Chunk>& chunks) {
  HostBatch hb;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Chunk& ch = chunks[i];
    for (int64_t k = 0; k < ch.count; ++k) {
      hb.tokens.push_back(ch.seq->tokens[size_t(ch.start + k)]);
      hb.positions.push_back(int32_t(ch.start + k));
      hb.seq_index.push_back(int32_t(i));
    }
    hb.tables.push_back(ch.seq->table);
    if (ch.samples) hb.logit_rows.push_back(int32_t(hb.tokens.size() - 1));
  }
  MX_ASSIGN(ForwardArgs fa, staging_.stage(hb, kv_.layers()));
  const bool decode_only = std::all_of(chunks.begin(), chunks.end(), [](const Chunk& c) {
    return c.count == 1 && c.samples;
  });
  MX_TRY(run_forward(fa, decode_only));
  if (!hb.logit_rows.empty()) MX_TRY(staging_.read_logits(int64_t(hb.logit_rows.size()), logits_));
  for (const Chunk& ch : chunks) {
    Sequence& s = *ch.seq;
    s.computed += ch.count;
    blocks_.register_blocks(s.tokens, s.table, s.computed, s.block_hashes);
  }
  {
    std::lock_guard lock(mu_);
    for (const Chunk& ch : chunks)
      if (ch.seq->generated == 0 && ch.seq->timing.preemptions == 0) stats_.prompt_tokens_total += uint64_t(ch.count);
    stats_.steps_total++;
  }
  sample_and_emit(chunks, logits_);
  return ok_status();
}

// A decode-only forward is a pure function of the token count once staged (fixed staging buffers,
// the block-table width fixed): the first step of each count runs eagerly (it also grows the ops'
// scratch to that size) and is captured; later ones replay. Any other step runs eagerly.
Status Engine::run_forward(const ForwardArgs& fa, bool decode_only) {
  const int64_t T = fa.tokens.dim(0);
  if (!decode_only || args_.enforce_eager || graphs_failed_ || model_.weights.device != Device::CUDA ||
      T > kMaxGraphTokens)
    return forward(model_, ws_, fa);
  if (ops::scratch_generation() != graphs_generation_) {  // the graphs hold the old scratch address
    decode_graphs_.clear();
    graphs_generation_ = ops::scratch_generation();
  }
  if (auto it = decode_graphs_.find(T); it != decode_graphs_.end()) {
    MX_TRY(it->second.replay());
    std::lock_guard lock(mu_);
    stats_.graph_replays_total++;
    return ok_status();
  }
  MX_TRY(forward(model_, ws_, fa));
  if (ops::scratch_generation() != graphs_generation_) {
    decode_graphs_.clear();
    graphs_generation_ = ops::scratch_generation();
  }
  auto g = ops::StepGraph::capture(Device::CUDA, [this, fa] { return forward(model_, ws_, fa); });
  if (!g.ok()) {
    log_warn("decode steps stay eager: {}", g.status().message());
    graphs_failed_ = true;
    return ok_status();
  }
  decode_graphs_.emplace(T, std::move(*g));
  std::lock_guard lock(mu_);
  stats_.graph_captures_total++;
  return ok_status();
}

void Engine::sample_and_emit(const std::vector<Chunk>& chunks, const std::vector<float>& logits) {
  const size_t V = size_t(model_.config.vocab_size);
  size_t row = 0;
  uint64_t emitted = 0;
  for (const Chunk& ch : chunks) {
    if (!ch.samples) continue;
    Sequence& s = *ch.seq;
    const RequestParams& p = s.params;
    std::span<const float> r(logits.data() + row * V, V);
    const std::span<const float> raw = r;
    std::vector<float> masked;
    if (s.generated < p.min_tokens) {  // stop and eos ids may not end the request yet
      masked.assign(r.begin(), r.end());
      for (int32_t id : p.stop_ids) if (id >= 0 && size_t(id) < V) masked[size_t(id)] = -std::numeric_limits<float>::infinity();
      if (p.ignore_eos == IgnoreEos::No)
        for (int32_t id : p.eos_ids) if (id >= 0 && size_t(id) < V) masked[size_t(id)] = -std::numeric_limits<float>::infinity();
      r = masked;
    }
    ++row;
    const int32_t tok = s.sampler.sample(r);
    s.tokens.push_back(tok);
    s.generated++;
    emitted++;
    if (s.generated == 1) s.timing.first_token = Clock::now();
    if (p.logprobs >= 0) s.stream->push(tok, token_logprob(raw, tok, p.logprobs));
    else s.stream->push(tok);
    if (contains(p.stop_ids, tok) || (p.ignore_eos == IgnoreEos::No && contains(p.eos_ids, tok)))
      finish(s, FinishReason::Stop);
    else if (s.generated >= p.max_tokens)
      finish(s, FinishReason::Length);
  }
  std::lock_guard lock(mu_);
  stats_.generation_tokens_total += emitted;
}

void Engine::finish(Sequence& s, FinishReason reason, const std::string& error) {
  if (s.finished != FinishReason::None) return;
  s.finished = reason;
  s.timing.finished = Clock::now();
  s.timing.generated_tokens = s.generated;
  s.stream->set_timing(s.timing);
  s.stream->finish(reason, error);
}

void Engine::remove_finished() {
  auto& run = plan_.running;
  for (auto& s : run)
    if (s->finished != FinishReason::None) blocks_.release(s->table);
  run.erase(std::remove_if(run.begin(), run.end(), [](const auto& s) { return s->finished != FinishReason::None; }),
            run.end());
}

void Engine::update_stats() {
  std::lock_guard lock(mu_);
  stats_.running = int(plan_.running.size());
  stats_.waiting = int(plan_.waiting.size() + inbox_.size());
  stats_.kv_blocks_used = blocks_.used_blocks();
  stats_.prefix_cache_queries = blocks_.query_tokens();
  stats_.prefix_cache_hits = blocks_.hit_tokens();
  stats_.preemptions_total = plan_.preemptions;
}

void Engine::maybe_log_stats() {
  if (args_.stats_interval_seconds <= 0) return;
  const auto now = Clock::now();
  const double dt = std::chrono::duration<double>(now - last_log_).count();
  if (dt < args_.stats_interval_seconds) return;
  const EngineStats s = stats();
  if (s.prompt_tokens_total == logged_prompt_ && s.generation_tokens_total == logged_generation_) return;
  log_info("Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: {:.1f} tokens/s, Running: {} reqs, "
           "Waiting: {} reqs, KV cache usage: {:.1f}%, Preemptions: {}",
           double(s.prompt_tokens_total - logged_prompt_) / dt, double(s.generation_tokens_total - logged_generation_) / dt,
           s.running, s.waiting, 100.0 * s.kv_blocks_used / std::max(1, s.kv_blocks_total), s.preemptions_total);
  logged_prompt_ = s.prompt_tokens_total;
  logged_generation_ = s.generation_tokens_total;
  last_log_ = now;
}

}  // namespace mx
