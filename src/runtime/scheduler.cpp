// Engine: creation and checks, the submission API, and the loop thread (plan -> launch step N+1
// -> read step N -> stream); the plan is in scheduler_plan.cpp, the device step in step_runner.cpp.
#include "runtime/scheduler.h"

#include <algorithm>
#include <cmath>
#include <future>

#include "core/log.h"

namespace mx {
namespace {

bool contains(const std::vector<int32_t>& v, int32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Workers of the guided-decoding mask pool, leaving two cores to the engine and HTTP threads. A
// mask takes ~0.02-0.06 ms (bench_grammar), so 64 draws give each of 8 workers ~8 of them; the cap
// is a guess not yet tuned on a many-core host (docs/lab/HOST_NOTES.md, guided decoding).
constexpr int kMaxMaskWorkers = 8;
int mask_workers() { return std::clamp(int(std::thread::hardware_concurrency()) - 2, 1, kMaxMaskWorkers); }

int blocks_for(int64_t tokens, int block_size) { return int((tokens + block_size - 1) / block_size); }

int draft_tokens(const EngineArgs& a) { return a.speculative.enabled() ? a.speculative.num_speculative_tokens : 0; }

// Sampled rows of a step at most: one per sequence, plus k per drafting sequence (at most
// disable_by_batch_size of them); never more than the step's tokens.
int max_step_rows(const EngineArgs& a) {
  const int drafting = std::min(a.max_num_seqs, a.speculative.disable_by_batch_size);
  return std::min(a.max_num_batched_tokens, a.max_num_seqs + drafting * draft_tokens(a));
}

// Blocks a sequence holds in the window pool while decoding (its window's positions and a round's
// drafts may straddle one more block), for every seat, plus two steps' worth of prefill chunks.
int window_pool_blocks(const ModelConfig& c, const EngineArgs& a) {
  const int per_seq = blocks_for(c.sliding_window - 1 + draft_tokens(a), a.kv_block_size) + 2;
  return a.max_num_seqs * per_seq + 2 * blocks_for(a.max_num_batched_tokens, a.kv_block_size) + 1;
}

bool uses_window_pool(const ModelConfig& c, const EngineArgs& a) {
  bool sliding = false;
  for (int l = 0; l < c.num_hidden_layers; ++l) sliding |= c.window_of_layer(l) > 0;
  return sliding && a.prefix_caching == PrefixCaching::Off;
}

}  // namespace

KvLayout kv_layout(const ModelConfig& c, const EngineArgs& a, Device device) {
  const size_t element = dtype_size(kv_element_dtype(a.kv_cache_dtype, device));
  const size_t per_layer_block = 2 * size_t(a.kv_block_size) * size_t(c.kv_width()) * element;
  KvLayout k;
  int paged_layers = c.num_hidden_layers;
  if (uses_window_pool(c, a)) {
    int sliding = 0;
    for (int l = 0; l < c.num_hidden_layers; ++l) sliding += c.window_of_layer(l) > 0;
    paged_layers -= sliding;
    k.window_pool_blocks = window_pool_blocks(c, a);
    k.window_pool_bytes = size_t(sliding) * per_layer_block * size_t(k.window_pool_blocks + 1);
  }
  // An EAGLE-3 draft's layer uses the same blocks (runtime/eagle3_drafter.h); the published gpt-oss
  // drafts have the target's kv width.
  if (a.speculative.enabled() && a.speculative.method == SpecMethod::Eagle3) paged_layers += 1;
  k.bytes_per_block = size_t(paged_layers) * per_layer_block;
  return k;
}

Result<int> default_max_num_batched_tokens(Device device) {
  if (device != Device::CUDA) return kDefaultBatchedTokens;
  MX_ASSIGN(const ops::MemoryInfo mi, ops::memory_info(device));
  const bool large = mi.total_bytes >= (size_t(70) << 30) && ops::compute_capability(device) >= 90;
  return large ? kLargeGpuBatchedTokens : kDefaultBatchedTokens;
}

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
  MX_CHECK(a.spec_acceptance_rate <= 1, "the forced acceptance rate must be in [0, 1], got {}", a.spec_acceptance_rate);
  const int blocks_per_seq = blocks_for(a.max_model_len, a.kv_block_size);
  MX_CHECK(a.num_kv_blocks >= blocks_per_seq,
           "the KV cache ({} blocks of {} tokens) cannot hold one request of max_model_len {}; lower max_model_len "
           "or give the cache more memory",
           a.num_kv_blocks, a.kv_block_size, a.max_model_len);
  const Device dev = model.weights.device;
  const KvLayout layout = kv_layout(model.rank_config(), a, dev);
  KvCacheArgs kv_args{.num_blocks = a.num_kv_blocks,
                      .block_size = a.kv_block_size,
                      .pad = PadBlock::Reserved,
                      .dtype = a.kv_cache_dtype,
                      .fixed_scales = a.kv_scales};
  if (layout.window_pool_blocks > 0) {
    kv_args.sliding = SlidingLayers::Window;
    kv_args.window_blocks = layout.window_pool_blocks;
  }
  MX_ASSIGN(KvCache kv, KvCache::create(model.rank_config(), dev, kv_args));
  std::unique_ptr<Engine> e(new Engine(model, a, std::make_unique<KvCache>(std::move(kv))));
  MX_ASSIGN(e->cx_, ops::Context::create(dev, {.moe_activation = a.moe_activation}));
  for (const auto& line : ops::dispatch_summary(*e->cx_)) log_info("dispatch: {}", line);
  std::vector<int> aux_boundaries;
  if (a.speculative.enabled() && a.speculative.method == SpecMethod::Eagle3 && !a.draft_proposer) {
    MX_CHECK(model.tp_size() == 1, "--speculative-config eagle3 with --tensor-parallel-size {}: not supported yet",
             model.tp_size());
    const AuxLayerIds ids = *parse_aux_layer_ids(a.speculative.aux_layer_ids);
    MX_ASSIGN(Eagle3Draft draft, open_eagle3(a.speculative.model, model.config, model.weights, ids));
    log_info("{}", draft.config.summary(model.config.num_hidden_layers, ids));
    e->draft_model_ = std::make_unique<Eagle3Draft>(std::move(draft));
    aux_boundaries = e->draft_model_->boundaries;
  }
  // Tensor parallelism: every rank's cache has the same blocks (the block tables are shared), over
  // its own kv heads, on its own GPU.
  std::vector<const KvCache*> peer_kv;
  for (const auto& peer : model.tp.peers) {
    MX_ASSIGN(KvCache pkv,
              ops::on_gpu(dev, peer->tp.rank, [&] { return KvCache::create(peer->rank_config(), dev, kv_args); }));
    e->peer_kv_.push_back(std::make_unique<KvCache>(std::move(pkv)));
    peer_kv.push_back(e->peer_kv_.back().get());
  }
  MX_ASSIGN(e->runner_, StepRunner::create(*e->cx_, model, *e->kv_,
                                           {.max_tokens = a.max_num_batched_tokens,
                                            .max_rows = max_step_rows(a),
                                            .seats = a.max_num_seqs,
                                            .max_blocks = blocks_per_seq + 1,
                                            .graphs = a.enforce_eager ? UseGraphs::No : UseGraphs::Yes,
                                            .aux_boundaries = aux_boundaries},
                                           peer_kv));
  if (e->draft_model_) {
    MX_ASSIGN(e->drafter_, Eagle3Drafter::create(*e->cx_, *e->draft_model_, dev,
                                                 {.seats = a.max_num_seqs,
                                                  .max_tokens = a.max_num_batched_tokens,
                                                  .max_blocks = blocks_per_seq + 1,
                                                  .num_blocks = e->kv_->num_blocks() + 1,  // and the pad block
                                                  .block_size = a.kv_block_size,
                                                  .k = a.speculative.num_speculative_tokens}));
  }
  // The warm-up (a prefill-sized and a decode-sized step) runs on the loop thread, which runs every
  // later step on the same context: a scratch reserved too small fails here, not under load.
  const bool warm = a.warmup == Warmup::Yes && dev == Device::CUDA;
  std::promise<Status> warmed;
  auto ready = warmed.get_future();
  e->thread_ = std::thread([p = e.get(), &warmed, warm] {
    const Status st = warm ? p->warm_up() : ok_status();
    warmed.set_value(st);
    if (st.ok()) p->loop();
  });
  MX_TRY(ready.get());
  return e;
}

Engine::Engine(const Model& model, const EngineArgs& args, std::unique_ptr<KvCache> kv)
    : model_(model), args_(args), kv_(std::move(kv)), blocks_(*kv_, args.prefix_caching) {
  limits_ = {.max_num_seqs = args.max_num_seqs,
             .max_num_batched_tokens = args.max_num_batched_tokens,
             .window = kv_->has_window_pool() ? model.config.sliding_window : 0,
             .watermark_blocks = int(args.watermark * kv_->num_blocks())};
  for (int s = args.max_num_seqs - 1; s >= 0; --s) plan_.free_slots.push_back(s);
  stats_.kv_blocks_total = kv_->num_blocks();
  if (args.speculative.enabled()) {
    proposer_ = args.draft_proposer ? args.draft_proposer : std::shared_ptr<const DraftProposer>(make_proposer(args.speculative));
    stats_.spec_tokens = args.speculative.num_speculative_tokens;
    if (args.spec_acceptance_rate >= 0) forced_.emplace(args.spec_acceptance_rate, 1234);
    if (args.speculative.adaptive) policy_.emplace(args.speculative.num_speculative_tokens);
  }
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

std::string Engine::kv_summary() const {
  std::string dtype(kv_element_name(kv_->dtype(), model_.weights.device));
  if (kv_->dtype() == KvCacheDtype::Fp8)
    dtype += kv_->scales_fixed() ? " (per-layer K and V scales fixed by --kv-scale)"
                                 : " (per-layer K and V scales calibrated from the first prefill)";
  if (!kv_->has_window_pool())
    return fmt::format("{}; every layer paged in one pool of {} blocks of {} tokens", dtype, kv_->num_blocks(),
                       kv_->block_size());
  return fmt::format("{}; full-attention layers paged in {} blocks of {} tokens; sliding-window layers in a pool of "
                     "{} blocks holding each sequence's last {} positions",
                     dtype, kv_->num_blocks(), kv_->block_size(), kv_->window_pool_blocks(),
                     model_.config.sliding_window);
}

// The ops' scratch is sized by the largest shapes once, so that later steps never grow it (a
// growth would drop every captured graph): a prefill-sized step and a decode step of the most rows
// a step samples, both on the pad seat (their KV writes land in the pad block).
Status Engine::warm_up() {
  for (const bool decode : {false, true}) {
    const int T = decode ? max_step_rows(args_) : args_.max_num_batched_tokens;
    StepBatch b;
    b.tokens_per_seq = decode ? 1 : 0;
    b.num_seqs = decode ? T : 1;
    for (int i = 0; i < T; ++i) {
      b.tokens.push_back(0);
      b.positions.push_back(decode ? 0 : i % args_.max_model_len);  // within the pad seat's table
      b.seats.push_back(args_.max_num_seqs);
      b.from_prev.push_back(-1);
      if (decode || i == T - 1) {
        b.logit_rows.push_back(i);
        if (decode && model_.tp_size() > 1) {
          // Tensor parallelism: the sampling stage's scratch (logprobs, logits entries) is sized
          // here too, so that no rank frees and allocates device memory while the others wait in
          // a collective.
          SamplingParams p;
          p.logit_bias = {{0, 0.0f}};
          b.sampling.add(p, 0, ops::kMaxTopLogprobs, nullptr, {});
        } else {
          b.sampling.add_padding();
        }
      }
    }
    MX_TRY(runner_->launch(b));
    MX_TRY(runner_->collect().status());
  }
  return ok_status();
}

Status Engine::fill_cache_random(uint64_t seed) {
  MX_TRY(kv_->fill_random(*cx_, seed));
  for (size_t r = 0; r < peer_kv_.size(); ++r) {  // on rank r + 1's GPU, with a context of its own there
    MX_TRY(ops::on_gpu(model_.weights.device, int(r) + 1, [&]() -> Status {
      MX_ASSIGN(auto peer_cx, ops::Context::create(model_.weights.device));
      return peer_kv_[r]->fill_random(*peer_cx, seed + r + 1);
    }));
  }
  return ok_status();
}

Result<std::shared_ptr<RequestStream>> Engine::submit(RequestParams p) {
  MX_ASSIGN(auto streams, submit_all({std::move(p)}));
  return streams.front();
}

Result<std::vector<std::shared_ptr<RequestStream>>> Engine::submit_all(std::vector<RequestParams> params) {
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (RequestParams& p : params) {
    MX_ASSIGN(auto seq, make_sequence(std::move(p)));
    streams.push_back(seq->stream);
    seqs.push_back(std::move(seq));
  }
  {
    std::lock_guard lock(mu_);
    MX_CHECK(!stop_, "the engine is shutting down");
    if (args_.max_waiting > 0 && stats_.waiting + int(inbox_.size() + seqs.size()) > args_.max_waiting)
      return Status::error(fmt::format("{}: {} requests are waiting (--max-waiting-requests {})", kOverloaded,
                                       stats_.waiting + inbox_.size(), args_.max_waiting));
    for (auto& s : seqs) inbox_.push_back(std::move(s));
  }
  cv_.notify_all();
  return streams;
}

Result<std::unique_ptr<Sequence>> Engine::make_sequence(RequestParams p) {
  const ModelConfig& c = model_.config;
  MX_CHECK(!p.prompt.empty(), "the prompt is empty");
  MX_CHECK(p.max_tokens >= 1, "max_tokens must be at least 1, got {}", p.max_tokens);
  MX_CHECK(p.logprobs >= -1 && p.logprobs <= ops::kMaxTopLogprobs, "logprobs must be in [-1, {}], got {}",
           ops::kMaxTopLogprobs, p.logprobs);
  MX_CHECK(p.min_tokens >= 0 && p.min_tokens <= p.max_tokens, "min_tokens ({}) must be in [0, max_tokens ({})]",
           p.min_tokens, p.max_tokens);
  MX_CHECK(p.prefilled >= 0 && p.prefilled < int64_t(p.prompt.size()), "prefilled ({}) must be below the prompt length",
           p.prefilled);
  MX_CHECK(p.sampling.repetition_penalty > 0 && std::isfinite(p.sampling.repetition_penalty),
           "repetition_penalty must be > 0, got {}", p.sampling.repetition_penalty);
  for (size_t i = 0; i < p.prompt.size(); ++i)
    MX_CHECK(p.prompt[i] >= 0 && p.prompt[i] < c.vocab_size,
             "prompt token {} at index {} is outside the vocabulary (size {})", p.prompt[i], i, c.vocab_size);
  for (const auto& [t, b] : p.sampling.logit_bias)
    MX_CHECK(t >= 0 && t < c.vocab_size && std::isfinite(b), "logit_bias: token {} (bias {}) is outside the vocabulary "
             "(size {}) or not finite", t, b, c.vocab_size);
  const int64_t total = int64_t(p.prompt.size()) + p.max_tokens;
  MX_CHECK(total <= args_.max_model_len,
           "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the prompt, {} "
           "to generate).",
           args_.max_model_len, total, p.prompt.size(), p.max_tokens);
  auto stream = std::make_shared<RequestStream>(next_id_++);
  auto seq = std::make_unique<Sequence>(stream, std::move(p));
  if (seq->params.sampling.has_penalties()) {
    seq->counts = std::make_unique<TokenCounts>();
    seq->counts->add_prompt(seq->tokens);
  }
  seq->timing.arrival = Clock::now();
  seq->timing.prompt_tokens = int(seq->tokens.size());
  return seq;
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
      const bool idle = plan_.running.empty() && plan_.waiting.empty() && launched_.empty();
      if (idle) cv_.wait(lock, [&] { return stop_ || !inbox_.empty(); });
      if (stop_) break;
      for (auto& s : inbox_) plan_.waiting.push_back(std::move(s));
      inbox_.clear();
    }
    Status st = ok_status();
    drafting_ = wants_drafts();
    if (needs_sync())
      while (st.ok() && !launched_.empty()) st = collect_step();
    drop_cancelled();
    if (st.ok()) st = propose_drafts();
    if (st.ok()) plan_step(plan_, blocks_, limits_, chunks);
    if (st.ok() && !chunks.empty()) {
      st = launch_step(chunks);
      const int depth = args_.async_scheduling == AsyncScheduling::On ? 1 : 0;
      while (st.ok() && int(launched_.size()) > depth) st = collect_step();
    } else if (st.ok() && !launched_.empty()) {
      st = collect_step();  // nothing new to run: read what is in flight
    } else if (st.ok() && !plan_.waiting.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // nothing fits yet: do not spin
    }
    if (!st.ok()) {
      log_error("engine step failed: {}", st.message());
      fail_in_flight(st.message());
    }
    retire_finished();
    update_stats();
    maybe_log_stats();
  }
  while (!launched_.empty() && collect_step().ok()) {
  }
}

// Penalties count every generated token and kept logits are read per step: such a sequence's
// next step is planned only after the previous one is read. So is every step while drafts are
// proposed: a round's length is known once its samples are read.
bool Engine::needs_sync() const {
  if (drafting_ || drafter_) return true;  // eagle3: the draft reads each step's features before the next
  for (const auto& s : plan_.running) {
    if (s->counts || s->params.keep_logits) return true;
    if (s->params.constraint && s->pending > 0 && !s->params.constraint->can_run_ahead(s->pending)) return true;
  }
  return false;
}

bool Engine::wants_drafts() const {
  return (proposer_ || drafter_) && int(plan_.running.size()) <= args_.speculative.disable_by_batch_size &&
         (idle_proposals_ < kIdleBeforeProbing || next_step_ % kProbeEvery == 0);
}

// A draft for each running sequence at its decode position whose samples are all read, never
// past max_tokens (a round emits drafts + 1 tokens at most). Sequences with guided decoding do not
// draft (each row's mask would depend on the constraint's state after the drafts before it).
// Adaptive: every draft gets the policy's length for this step, the proposer's tokens cut or
// padded with the last token (a filler the target rarely confirms; it keeps the step uniform, one
// CUDA graph). Fixed: each sequence its proposal of up to k tokens. bench's forced rounds count
// every drafted position as offered.
Status Engine::propose_drafts() {
  for (auto& sp : plan_.running) sp->draft.clear();
  if (!drafting_) {
    if (drafter_) {  // too many running to draft: the draft's KV of the step read last, no drafts
      return run_draft_passes([](const Sequence&) { return 0; });
    }
    return ok_status();
  }
  std::vector<Sequence*> seqs;
  std::vector<int> limit;
  std::vector<DraftPolicy::Candidate> offers;
  for (auto& sp : plan_.running) {
    Sequence& s = *sp;
    if (s.pending > 0 || s.remaining() != 1 || s.fully_scheduled() || s.params.constraint) continue;
    const int k = std::min(args_.speculative.num_speculative_tokens, s.params.max_tokens - s.generated - 1);
    if (k <= 0) continue;
    // A draft model offers k (its drafts are made once the length is chosen); a host proposer its guess.
    if (!drafter_) proposer_->propose(s.tokens, k, s.draft);
    if (s.draft.size() > size_t(k)) s.draft.resize(size_t(k));
    s.draft_offered = forced_ || drafter_ ? k : int(s.draft.size());
    seqs.push_back(&s);
    limit.push_back(k);
    offers.push_back({.offered = s.draft_offered, .rate = s.spec_rate.rate()});
  }
  const bool offered = std::any_of(offers.begin(), offers.end(), [](const auto& o) { return o.offered > 0; });
  if (!seqs.empty()) idle_proposals_ = offered ? 0 : idle_proposals_ + 1;
  const int d = policy_ ? policy_->choose(offers) : -1;
  std::vector<size_t> lens(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i)
    lens[i] = size_t(d >= 0 ? std::min(d, limit[i]) : forced_ || drafter_ ? limit[i] : int(seqs[i]->draft.size()));
  if (drafter_) {
    std::map<const Sequence*, int> asked;
    for (size_t i = 0; i < seqs.size(); ++i) asked[seqs[i]] = int(lens[i]);
    MX_TRY(run_draft_passes([&](const Sequence& s) {
      auto it = asked.find(&s);
      return it == asked.end() ? 0 : it->second;
    }));
    for (Sequence* s : seqs) {
      const std::span<const int32_t> dr = drafter_->drafts(s->slot);
      s->draft.assign(dr.begin(), dr.end());
    }
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence& s = *seqs[i];
    const size_t len = lens[i];
    s.draft.resize(std::min(s.draft.size(), len));
    while (s.draft.size() < len) s.draft.push_back(s.tokens.back());
    if (len == 0 && s.draft_offered > 0) s.spec_rate.idle();
    s.draft_offered = std::min(s.draft_offered, int(len));
  }
  return ok_status();
}

void Engine::drop_cancelled() {
  for (auto& s : plan_.running)
    if (s->stream->cancelled()) finish(*s, FinishReason::Cancelled);
  for (auto& s : plan_.waiting)
    if (s->stream->cancelled()) finish(*s, FinishReason::Cancelled);
  retire_finished();
}

// Builds the step's inputs from the plan: each fed token (a decode token not read yet comes from
// the previous step on the device), each sampled row's settings, the block-table entries added
// since the last step; then launches it and moves the sequences' counters.
Status Engine::launch_step(const std::vector<Chunk>& chunks) {
  StepBatch& b = batch_;
  b.clear();
  LaunchedStep rec{.id = ++next_step_, .chunks = chunks};
  b.num_seqs = int64_t(chunks.size());
  // Every chunk sampling each of its tokens, all of one length: a decode step or a uniform round.
  const bool uniform = std::all_of(chunks.begin(), chunks.end(), [&](const Chunk& ch) {
    return ch.samples && ch.count == ch.drafts + 1 && ch.count == chunks.front().count;
  });
  b.tokens_per_seq = uniform ? int(chunks.front().count) : 0;
  const std::vector<std::span<const uint32_t>> masks = constraint_masks(chunks);
  for (size_t c = 0; c < chunks.size(); ++c) {
    const Chunk& ch = chunks[c];
    Sequence& s = *ch.seq;
    b.keep_logits |= s.params.keep_logits;
    for (int64_t k = 0; k < ch.count; ++k) {
      const int64_t pos = ch.start + k;
      const int64_t past = pos - int64_t(s.tokens.size());  // >= 0: a draft token or the last step's sample
      const bool known = past < 0;
      const bool drafted = !known && s.pending == 0 && past < int64_t(s.draft.size());
      MX_CHECK(known || drafted || (s.pending == 1 && s.pending_step == next_step_ - 1 && past == 0),
               "engine: position {} of request {} is neither read, a draft nor the last step's sample", pos,
               s.stream->id());
      b.tokens.push_back(known ? s.tokens[size_t(pos)] : drafted ? s.draft[size_t(past)] : 0);
      b.from_prev.push_back(known || drafted ? -1 : s.pending_row);
      b.positions.push_back(int32_t(pos));
      b.seats.push_back(s.slot);
    }
    for (size_t i = s.synced_table; i < s.table.size(); ++i) b.table_updates.insert(b.table_updates.end(), {s.slot, int32_t(i), s.table[i]});
    for (size_t i = s.synced_window; i < s.window.size(); ++i) b.window_updates.insert(b.window_updates.end(), {s.slot, int32_t(i), s.window[i]});
    s.synced_table = s.table.size();
    s.synced_window = s.window.size();
    if (!ch.samples) continue;
    const RequestParams& p = s.params;
    std::vector<int32_t> min_tokens_bans;  // stop and eos ids, for the rows drawn before min_tokens
    if (s.generated + s.pending < p.min_tokens) {
      min_tokens_bans = p.stop_ids;
      if (p.ignore_eos == IgnoreEos::No) min_tokens_bans.insert(min_tokens_bans.end(), p.eos_ids.begin(), p.eos_ids.end());
      std::sort(min_tokens_bans.begin(), min_tokens_bans.end());
      min_tokens_bans.erase(std::unique(min_tokens_bans.begin(), min_tokens_bans.end()), min_tokens_bans.end());
    }
    static const std::vector<int32_t> kNoBans;
    std::unique_ptr<TokenCounts> draft_counts;  // penalties: row i also counts drafts 1..i as generated
    for (int i = 0; i <= ch.drafts; ++i) {  // the last token's row, then one per draft token
      const TokenCounts* counts = s.counts.get();
      if (s.counts && i > 0) {
        if (!draft_counts) draft_counts = std::make_unique<TokenCounts>(*s.counts);
        draft_counts->add_generated(s.draft[size_t(i - 1)]);
        counts = draft_counts.get();
      }
      const int before = s.generated + s.pending + i;  // tokens generated before this draw
      const std::vector<int32_t>& banned = before < p.min_tokens ? min_tokens_bans : kNoBans;
      b.logit_rows.push_back(int32_t(b.tokens.size()) - 1 - ch.drafts + i);
      b.sampling.add(p.sampling, int32_t(s.length() + i), p.logprobs, counts, banned, masks[c]);
      rec.row_seq.push_back(&s);
    }
  }
  b.calibrate_kv = calibrates(chunks);
  const uint64_t captures = runner_->graph_captures();
  rec.launched = Clock::now();
  rec.tokens = b.size();
  MX_TRY(runner_->launch(b));
  // Timed for the draft policy: a uniform step that ran alone (drafting steps are planned after the
  // last is read), without a graph capture or a calibration inside.
  rec.timed = policy_ && drafting_ && b.tokens_per_seq > 0 && launched_.empty() && !b.calibrate_kv &&
              runner_->graph_captures() == captures;
  if (b.calibrate_kv) {
    kv_->mark_calibrated();
    rec.calibrated_from = b.size();
  }
  for (const Chunk& ch : chunks) {
    Sequence& s = *ch.seq;
    s.computed += ch.count;
    s.last_step = rec.id;
  }
  for (size_t r = 0; r < rec.row_seq.size(); ++r) {
    Sequence& s = *rec.row_seq[r];
    s.pending++;
    s.pending_row = int(r);
    s.pending_step = rec.id;
  }
  {
    std::lock_guard lock(mu_);
    for (const Chunk& ch : chunks)
      if (ch.seq->generated == 0 && ch.seq->timing.preemptions == 0) stats_.prompt_tokens_total += uint64_t(ch.count);
    stats_.steps_total++;
  }
  launched_.push_back(std::move(rec));
  return ok_status();
}

// An FP8 cache without fixed scales takes them from the first step that feeds prompt tokens (every
// layer's from this step's K and V, before they are written: ops::kv_scales). No step before it
// wrote the cache but the warm-up, whose tokens land in the pad block and are never read.
bool Engine::calibrates(const std::vector<Chunk>& chunks) const {
  if (!kv_->scales_pending()) return false;
  return std::any_of(chunks.begin(), chunks.end(),
                     [](const Chunk& ch) { return ch.start < int64_t(ch.seq->params.prompt.size()); });
}

// Once, when the calibrating step has been read: the range of the scales over the layers.
void Engine::log_kv_scales(int64_t tokens) const {
  auto s = kv_->read_scales();
  if (!s.ok()) {
    log_warn("KV cache fp8: cannot read the scales: {}", s.status().message());
    return;
  }
  float lo[2] = {INFINITY, INFINITY}, hi[2] = {0, 0};  // [K, V]
  for (size_t i = 0; i < s->size(); ++i) {
    lo[i % 2] = std::min(lo[i % 2], (*s)[i]);
    hi[i % 2] = std::max(hi[i % 2], (*s)[i]);
  }
  log_info("KV cache fp8: scales calibrated from the first prefill step ({} tokens): K {:.3g} to {:.3g}, V {:.3g} to "
           "{:.3g} over {} layers",
           tokens, lo[0], hi[0], lo[1], hi[1], s->size() / 2);
}

// Each sequence's mask depends on its own constraint only, so different sequences' masks are
// computed on the mask pool side by side; a constraint object that several draws share (never from
// the server: each choice has its own) keeps them in order on this thread.
std::vector<std::span<const uint32_t>> Engine::constraint_masks(const std::vector<Chunk>& chunks) {
  std::vector<std::span<const uint32_t>> masks(chunks.size());
  std::vector<size_t> draws;  // chunks with a constrained draw
  for (size_t c = 0; c < chunks.size(); ++c)
    if (chunks[c].samples && chunks[c].seq->params.constraint) draws.push_back(c);
  const auto constrained = [](const auto& s) { return s->params.constraint != nullptr; };
  if (std::none_of(plan_.running.begin(), plan_.running.end(), constrained)) mask_pool_.reset();
  auto mask_of = [&](int64_t i) {
    Sequence& s = *chunks[draws[size_t(i)]].seq;
    masks[draws[size_t(i)]] = s.params.constraint->next_mask(s.pending);
  };
  std::vector<const TokenConstraint*> objects;
  for (size_t c : draws) objects.push_back(chunks[c].seq->params.constraint.get());
  std::sort(objects.begin(), objects.end());
  const bool distinct = std::adjacent_find(objects.begin(), objects.end()) == objects.end();
  if (draws.size() < 2 || !distinct) {
    for (size_t i = 0; i < draws.size(); ++i) mask_of(int64_t(i));
    return masks;
  }
  if (!mask_pool_) mask_pool_ = std::make_unique<ThreadPool>(mask_workers());
  mask_pool_->run(int64_t(draws.size()), mask_of);
  return masks;
}

// Reads the oldest launched step: its samples become tokens of the sequences that are still
// generating (a finished one's sample is dropped), and the prefix cache learns their full blocks.
Status Engine::collect_step() {
  MX_ASSIGN(StepOutput out, runner_->collect());
  LaunchedStep rec = std::move(launched_.front());
  launched_.pop_front();
  if (rec.timed) policy_->observe(rec.tokens, std::chrono::duration<double>(Clock::now() - rec.launched).count());
  if (rec.calibrated_from > 0) log_kv_scales(rec.calibrated_from);
  uint64_t emitted = 0;
  for (size_t r = 0; r < rec.row_seq.size();) {  // a sequence's rows are adjacent: its round
    Sequence& s = *rec.row_seq[r];
    size_t rows = 1;
    while (r + rows < rec.row_seq.size() && rec.row_seq[r + rows] == &s) ++rows;
    s.pending -= int(rows);
    if (s.finished == FinishReason::None) emitted += accept_round(s, out, int64_t(r), int(rows) - 1);
    r += rows;
  }
  for (const Chunk& ch : rec.chunks) {
    Sequence& s = *ch.seq;
    if (s.finished == FinishReason::None && s.slot >= 0)
      blocks_.register_blocks(s.tokens, s.table, std::min<int64_t>(s.computed, int64_t(s.tokens.size())),
                              s.block_hashes);
  }
  if (drafter_) queue_draft_passes(rec);
  {
    std::lock_guard lock(mu_);
    stats_.generation_tokens_total += emitted;
    stats_.graph_replays_total = runner_->graph_replays();
    stats_.graph_captures_total = runner_->graph_captures();
  }
  // Retired sequences that no launched step names any more can go.
  const uint64_t oldest = launched_.empty() ? next_step_ + 1 : launched_.front().id;
  std::erase_if(retired_, [&](const auto& s) { return s->last_step < oldest && s->pending == 0; });
  return ok_status();
}

// eagle3: the kept positions of each sequence of the step just read (a prefill chunk's; a round's
// accepted drafts and its sample), each with the token that follows it, for the draft's pass 1 over
// the step's features, which propose_drafts runs once the draft lengths are chosen.
void Engine::queue_draft_passes(const LaunchedStep& rec) {
  draft_passes_.clear();
  draft_pass_seqs_.clear();
  int64_t row = 0;
  for (const Chunk& ch : rec.chunks) {
    Sequence& s = *ch.seq;
    const int64_t first = row;
    row += ch.count;
    if (s.finished != FinishReason::None || s.slot < 0) continue;
    const int64_t end = std::min<int64_t>(s.computed, int64_t(s.tokens.size()) - 1);  // positions with a next token
    const int64_t kept = std::min<int64_t>(ch.count, end - ch.start);
    if (kept <= 0) continue;
    Eagle3Drafter::Pass p{.seat = s.slot, .table = &s.table, .first_row = first, .start = ch.start};
    for (int64_t j = 0; j < kept; ++j) p.tokens.push_back(s.tokens[size_t(ch.start + j + 1)]);
    draft_passes_.push_back(std::move(p));
    draft_pass_seqs_.push_back(&s);
  }
}

// eagle3: pass 1 over the queued positions (the draft's KV there), then `len(s)` drafts for each
// sequence that asks (a sequence whose positions were not in the step read last has none).
Status Engine::run_draft_passes(const std::function<int(const Sequence&)>& len) {
  std::vector<Eagle3Drafter::Pass> passes;
  for (size_t i = 0; i < draft_passes_.size(); ++i) {
    const Sequence& s = *draft_pass_seqs_[i];
    if (s.finished != FinishReason::None || s.slot != draft_passes_[i].seat) continue;  // ended since
    Eagle3Drafter::Pass p = std::move(draft_passes_[i]);
    const bool at_end = p.start + int64_t(p.tokens.size()) == int64_t(s.tokens.size()) - 1;
    p.drafts = at_end ? len(s) : 0;
    passes.push_back(std::move(p));
  }
  draft_passes_.clear();
  draft_pass_seqs_.clear();
  if (passes.empty()) {
    drafter_->clear_drafts();
    return ok_status();
  }
  return drafter_->run(runner_->aux(), passes);
}

// Without drafts: the row's sample. With drafts: the samples up to and including the first that
// differs from its draft (with all drafts accepted, every row's); the positions of the rejected
// drafts are no longer computed (their K/V is rewritten by the next step that feeds them).
uint64_t Engine::accept_round(Sequence& s, const StepOutput& out, int64_t row, int drafts) {
  if (drafts == 0) {
    emit(s, out.ids[size_t(row)], out, row);
    return 1;
  }
  const std::span<const int32_t> samples(out.ids.data() + row, size_t(drafts) + 1);
  const int accepted = forced_ ? forced_->accepted(drafts) : accepted_prefix(s.draft, samples);
  {
    std::lock_guard lock(mu_);  // counted before the tokens go out: a client that sees its end sees the round
    stats_.spec.add_round(drafts, accepted);
  }
  uint64_t n = 0;
  for (int i = 0; i <= accepted && s.finished == FinishReason::None; ++i, ++n)
    emit(s, forced_ && i < accepted ? s.draft[size_t(i)] : samples[size_t(i)], out, row + i);
  s.computed -= drafts - accepted;
  // The proposer's part of what was fed (the plan may have cut the draft to the token budget).
  const int offered = std::min(s.draft_offered, drafts);
  if (offered > 0) s.spec_rate.add(offered, std::min(accepted, offered));
  s.draft.clear();
  return n;
}

void Engine::emit(Sequence& s, int32_t tok, const StepOutput& out, int64_t row) {
  const RequestParams& p = s.params;
  if (p.constraint) {  // a token drawn ahead under an older mask gives way to the forced one
    tok = p.constraint->accept(tok);
    if (tok < 0) return finish(s, FinishReason::Error, "guided decoding reached a state that allows no token");
  }
  s.tokens.push_back(tok);
  s.generated++;
  if (s.counts) s.counts->add_generated(tok);
  if (s.generated == 1) s.timing.first_token = Clock::now();
  std::optional<TokenLogprob> lp;
  if (p.logprobs >= 0 && !out.logprobs.empty()) {
    lp = TokenLogprob{.logprob = out.logprobs[size_t(row)]};
    for (int k = 0; k < p.logprobs; ++k) {
      const size_t at = size_t(row) * ops::kMaxTopLogprobs + size_t(k);
      lp->top.emplace_back(out.top_ids[at], out.top_logprobs[at]);
    }
  }
  std::span<const float> logits;
  if (!out.logits.empty()) {
    const size_t V = size_t(model_.config.vocab_size);
    logits = std::span<const float>(out.logits.data() + size_t(row) * V, V);
  }
  s.stream->push(tok, std::move(lp), logits);
  if (contains(p.stop_ids, tok) || (p.ignore_eos == IgnoreEos::No && contains(p.eos_ids, tok)))
    finish(s, FinishReason::Stop);
  else if (s.generated >= p.max_tokens)
    finish(s, FinishReason::Length);
}

void Engine::finish(Sequence& s, FinishReason reason, const std::string& error) {
  if (s.finished != FinishReason::None) return;
  s.finished = reason;
  s.timing.finished = Clock::now();
  s.timing.generated_tokens = s.generated;
  s.stream->set_timing(s.timing);
  s.stream->finish(reason, error);
}

// A failed step: every sequence it or a later launched step fed ends with the error; the device
// queue is drained (its outputs are not trusted).
void Engine::fail_in_flight(const std::string& error) {
  for (const LaunchedStep& rec : launched_)
    for (const Chunk& ch : rec.chunks) finish(*ch.seq, FinishReason::Error, error);
  while (runner_->in_flight() > 0) (void)runner_->collect();
  for (const LaunchedStep& rec : launched_)
    for (Sequence* s : rec.row_seq) s->pending--;
  launched_.clear();
  for (auto& s : plan_.running) finish(*s, FinishReason::Error, error);
}

// Finished sequences leave the plan at once and give their blocks and seat back (a launched step
// still writing them is ordered before any later step that reuses them); the object lives on in
// retired_ while a launched step names it.
void Engine::retire_finished() {
  auto retire = [&](std::unique_ptr<Sequence>& s) {
    release_sequence(plan_, blocks_, *s);
    retired_.push_back(std::move(s));  // dropped below unless a launched step names it
  };
  for (auto& s : plan_.running)
    if (s->finished != FinishReason::None) retire(s);
  std::erase_if(plan_.running, [](const auto& s) { return !s; });
  for (auto& s : plan_.waiting)
    if (s->finished != FinishReason::None) retire(s);
  std::erase_if(plan_.waiting, [](const auto& s) { return !s; });
  const uint64_t oldest = launched_.empty() ? next_step_ + 1 : launched_.front().id;
  std::erase_if(retired_, [&](const auto& s) { return s->last_step < oldest && s->pending == 0; });
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
  if (s.spec.drafts > logged_spec_.drafts) {  // the rounds since the last line (vLLM's SpecDecoding line)
    const uint64_t rounds = s.spec.drafts - logged_spec_.drafts;
    const uint64_t drafted = s.spec.draft_tokens - logged_spec_.draft_tokens;
    const uint64_t accepted = s.spec.accepted_tokens - logged_spec_.accepted_tokens;
    std::string per_pos;
    for (size_t i = 0; i < s.spec.accepted_per_position.size(); ++i) {
      const uint64_t before = i < logged_spec_.accepted_per_position.size() ? logged_spec_.accepted_per_position[i] : 0;
      per_pos += fmt::format("{}{:.3f}", i ? ", " : "", double(s.spec.accepted_per_position[i] - before) / double(rounds));
    }
    log_info("SpecDecoding metrics: Mean acceptance length: {:.2f}, Accepted: {} tokens, Drafted: {} tokens, "
             "Per-position acceptance rate: {}, Avg Draft acceptance rate: {:.1f}%",
             1.0 + double(accepted) / double(rounds), accepted, drafted, per_pos,
             100.0 * double(accepted) / double(std::max<uint64_t>(drafted, 1)));
    logged_spec_ = s.spec;
  }
}

}  // namespace mx
