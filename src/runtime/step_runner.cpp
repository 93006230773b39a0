// StepRunner: packing a step into pinned memory, the device step (prologue -> forward -> sampling
// stage), decode buckets and their CUDA graphs, and the launch/collect pipeline.
#include "runtime/step_runner.h"

#include <algorithm>
#include <cstring>

#include "core/log.h"
#include "kernels/heuristics.h"
#include "runtime/tp_followers.h"

namespace mx {
namespace {

// 4-byte words of the fixed input area, in this order.
struct InLayout {
  size_t tokens, positions, seats, from_prev, rows, params, seeds, draw, rows_k, penalties, offsets, counts, total;
  InLayout(int64_t T, int64_t R) {
    size_t at = 0;
    auto take = [&](int64_t n) { return std::exchange(at, at + size_t(n)); };
    tokens = take(T), positions = take(T), seats = take(T), from_prev = take(T), rows = take(R);
    params = take(4 * R), seeds = take(R), draw = take(R), rows_k = take(R), penalties = take(3 * R);
    offsets = take(R + 1), counts = take(2), total = at;
  }
};

// Output words: ids, logprob, lse (R each), then top ids and top logprobs (R x kMaxTopLogprobs each).
constexpr int64_t kOutWordsPerRow = 3 + 2 * ops::kMaxTopLogprobs;

// Grows a device buffer and its two pinned mirrors to hold `need` records of `bytes` each.
Status grow(Device dev, ops::Buffer& device_buf, ops::Buffer (&host)[2], int64_t& cap, int64_t need, size_t bytes) {
  if (need <= cap) return ok_status();
  cap = std::max<int64_t>({need, 2 * cap, 256});
  MX_ASSIGN(device_buf, ops::Buffer::allocate(dev, size_t(cap) * bytes));
  for (auto& h : host) {
    MX_ASSIGN(h, ops::Buffer::allocate_pinned(size_t(cap) * bytes));
  }
  return ok_status();
}

}  // namespace

struct StepRunner::Arena {
  InLayout in{0, 0};
  int64_t T = 0, R = 0, entry_cap = 0, update_cap = 0;
  ops::Buffer dev_in, host_in[2];
  ops::Buffer dev_out, host_out[2];
  ops::Buffer dev_entries, host_entries[2], dev_saved;
  ops::Buffer dev_updates[2], host_updates[2][2];  // [table|window], [slot]
  ops::Buffer logits, tables, windows;
  ops::Buffer aux;  // an EAGLE-3 draft's features of the step's tokens (StepRunnerArgs::aux_boundaries)
  ops::Event done[2];
  int32_t* in_words(int slot) const { return static_cast<int32_t*>(host_in[slot].data()); }
};

struct StepRunner::Views {
  ForwardArgs fa;
  ops::TakePrevTokensArgs prev;
  ops::TableUpdatesArgs table_updates, window_updates;
  Tensor params, seeds, draw, rows_k, penalties, offsets, entries, saved;
  Tensor ids, logprob, lse, top_ids, top_lp;
};

StepRunner::StepRunner(ops::Context& cx, const Model& model, const KvCache& kv, const StepRunnerArgs& args)
    : cx_(cx), model_(model), kv_(kv), args_(args), device_(model.weights.device),
      buckets_(heuristics::decode_buckets(args.max_rows)) {}

StepRunner::~StepRunner() {
  while (!launched_.empty()) (void)collect();  // the device must be done with the buffers
  followers_.reset();  // after rank 0's steps are done, every rank's are
}

Result<std::unique_ptr<StepRunner>> StepRunner::create(ops::Context& cx, const Model& model, const KvCache& kv,
                                                       const StepRunnerArgs& args, std::vector<const KvCache*> peer_kv) {
  MX_CHECK(args.max_tokens >= args.max_rows && args.max_rows >= 1 && args.seats >= 1 && args.max_blocks >= 1,
           "step runner: bad limits (tokens {}, rows {}, seats {}, blocks {})", args.max_tokens, args.max_rows,
           args.seats, args.max_blocks);
  std::unique_ptr<StepRunner> r(new StepRunner(cx, model, kv, args));
  if (model.tp_size() > 1) {
    const ops::CollectiveShape shape{.max_tokens = args.max_tokens,
                                     .width = model.config.hidden_size,
                                     .max_rows = args.max_rows,
                                     .vocab_starts = model.tp.plan.vocab_starts()};
    MX_ASSIGN(auto collectives, ops::make_collectives(model.weights.device, model.tp_size(), shape));
    log_info("tensor parallelism: {}", ops::describe_collectives(model.weights.device, model.tp_size()));
    r->tp_ = collectives[0];
    MX_TRY(r->allocate());
    MX_ASSIGN(r->followers_, TpFollowers::start(model, peer_kv, args, collectives, cx.moe_activation()));
    return r;
  }
  MX_TRY(r->allocate());
  return r;
}

Result<std::unique_ptr<StepRunner>> StepRunner::create_follower(ops::Context& cx, const Model& model,
                                                                const KvCache& kv, const StepRunnerArgs& args,
                                                                std::shared_ptr<ops::Collective> tp) {
  std::unique_ptr<StepRunner> r(new StepRunner(cx, model, kv, args));
  r->tp_ = std::move(tp);
  r->samples_ = false;
  MX_TRY(r->allocate());
  return r;
}

Status StepRunner::allocate() {
  const ModelConfig& c = model_.config;
  // The ops' scratch for this engine's largest step, before any graph holds its address.
  const int64_t max_keys = int64_t(args_.max_blocks) * kv_.block_size();
  MX_TRY(cx_.reserve_scratch(cx_.scratch_bytes_for(
      forward_call_shapes(model_.rank_config(), args_.max_tokens, args_.max_rows, max_keys, kv_.dtype() == KvCacheDtype::Fp8))));
  MX_ASSIGN(Workspace ws, Workspace::create(model_.rank_config(), device_, args_.max_tokens, args_.max_rows));
  ws_ = std::make_unique<Workspace>(std::move(ws));
  arena_ = std::make_unique<Arena>();
  Arena& a = *arena_;
  a.T = args_.max_tokens;
  a.R = args_.max_rows;
  a.in = InLayout(a.T, a.R);
  MX_ASSIGN(a.dev_in, ops::Buffer::allocate(device_, a.in.total * 4));
  MX_ASSIGN(a.dev_out, ops::Buffer::allocate(device_, size_t(a.R * kOutWordsPerRow) * 4));
  for (int s = 0; s < 2; ++s) {
    MX_ASSIGN(a.host_in[s], ops::Buffer::allocate_pinned(a.in.total * 4));
    MX_ASSIGN(a.host_out[s], ops::Buffer::allocate_pinned(size_t(a.R * kOutWordsPerRow) * 4));
    MX_ASSIGN(a.done[s], ops::Event::create(device_));
  }
  if (samples_) {
    MX_ASSIGN(a.logits, ops::Buffer::allocate(device_, size_t(a.R) * size_t(c.vocab_size) * 4));
  }
  if (samples_ && !args_.aux_boundaries.empty()) {
    const Tensor probe(nullptr, ops::act_dtype(device_), {a.T, int64_t(args_.aux_boundaries.size()) * c.hidden_size});
    MX_ASSIGN(a.aux, ops::Buffer::allocate(device_, probe.nbytes()));
  }
  // The sampled ids: rank 0's reach the other ranks' through this buffer (each step's broadcast).
  if (tp_) MX_TRY(tp_->bind_broadcast(a.dev_out.view(DType::I32, {a.R})));
  // One more table row than seats: the pad seat of graph batches (its blocks are all kPadBlock).
  const size_t table_bytes = size_t(args_.seats + 1) * size_t(args_.max_blocks) * 4;
  MX_ASSIGN(a.tables, ops::Buffer::allocate(device_, table_bytes));
  std::vector<int32_t> zeros(table_bytes / 4, kPadBlock);
  MX_TRY(ops::copy(a.tables.view(DType::I32, {int64_t(zeros.size())}), Tensor(zeros.data(), DType::I32, {int64_t(zeros.size())})));
  // Room for a step's entries and table updates from the start (growing later drops the graphs):
  // a decode step appends at most one block per sequence and table.
  MX_TRY(grow(device_, a.dev_entries, a.host_entries, a.entry_cap, 4 * a.R, sizeof(ops::LogitsEntry)));
  MX_ASSIGN(a.dev_saved, ops::Buffer::allocate(device_, size_t(a.entry_cap) * 4));
  const int64_t updates = 2 * a.R + (a.T + 15) / 16 + 16;
  for (int k = 0; k < 2; ++k) {
    int64_t cap = 0;
    MX_TRY(grow(device_, a.dev_updates[k], a.host_updates[k], cap, updates, 12));
    a.update_cap = cap;
  }
  if (kv_.has_window_pool()) {
    MX_ASSIGN(a.windows, ops::Buffer::allocate(device_, table_bytes));
    MX_TRY(ops::copy(a.windows.view(DType::I32, {int64_t(zeros.size())}), Tensor(zeros.data(), DType::I32, {int64_t(zeros.size())})));
  }
  return ok_status();
}

Tensor StepRunner::aux() const {
  const Arena& a = *arena_;
  if (!a.aux.data()) return {};
  return a.aux.view(ops::act_dtype(device_), {a.T, int64_t(args_.aux_boundaries.size()) * model_.config.hidden_size});
}

int StepRunner::bucket(int n) const {
  if (args_.graphs == UseGraphs::No || device_ != Device::CUDA) return n;
  auto it = std::lower_bound(buckets_.begin(), buckets_.end(), n);
  return it == buckets_.end() ? n : *it;
}

namespace {

template <typename T>
void put(int32_t* words, size_t at, const std::vector<T>& v, size_t n, T fill) {
  static_assert(sizeof(T) == 4);
  if (!v.empty()) std::memcpy(words + at, v.data(), v.size() * 4);  // an empty vector's data() may be null
  for (size_t i = v.size(); i < n; ++i) std::memcpy(words + at + i, &fill, 4);
}

}  // namespace

// Writes the batch (padded to T tokens and R rows) into the slot's pinned buffers and grows the
// growable ones (entries, table updates) when the batch needs more; growing drops the graphs that
// hold their addresses.
Status StepRunner::pack(const StepBatch& b, int64_t T, int64_t R, int slot) {
  Arena& a = *arena_;
  const SampleRows& s = b.sampling;
  MX_CHECK(T <= a.T && R <= a.R && b.size() <= T && s.rows() <= R && int64_t(b.logit_rows.size()) == s.rows(),
           "step: {} tokens / {} rows for buffers of {} / {}", b.size(), s.rows(), a.T, a.R);
  const int64_t max_position = int64_t(args_.max_blocks) * kv_.block_size();
  for (int32_t pos : b.positions)
    MX_CHECK(pos >= 0 && pos < max_position, "step: position {} outside the block tables ({} positions)", pos,
             max_position);
  const int64_t entries = int64_t(s.entries.size());
  const int64_t updates = int64_t(std::max(b.table_updates.size(), b.window_updates.size()) / 3);
  const int64_t entry_cap = a.entry_cap, update_cap = a.update_cap;
  MX_TRY(grow(device_, a.dev_entries, a.host_entries, a.entry_cap, entries, sizeof(ops::LogitsEntry)));
  if (a.entry_cap != entry_cap) {
    MX_ASSIGN(a.dev_saved, ops::Buffer::allocate(device_, size_t(a.entry_cap) * 4));
  }
  for (int k = 0; k < 2; ++k) {
    int64_t cap = update_cap;
    MX_TRY(grow(device_, a.dev_updates[k], a.host_updates[k], cap, updates, 12));
    if (k == 1) a.update_cap = cap;
  }
  if (a.entry_cap != entry_cap || a.update_cap != update_cap) graphs_.clear();

  int32_t* w = a.in_words(slot);
  const int32_t pad_seat = args_.seats;
  put(w, a.in.tokens, b.tokens, size_t(T), 0);
  put(w, a.in.positions, b.positions, size_t(T), 0);
  put(w, a.in.seats, b.seats, size_t(T), pad_seat);
  put(w, a.in.from_prev, b.from_prev, size_t(T), -1);
  std::vector<int32_t> rows = b.logit_rows;
  for (int64_t r = s.rows(); r < R; ++r) rows.push_back(int32_t(r));  // padding rows: their own token
  put(w, a.in.rows, rows, size_t(R), 0);
  put(w, a.in.params, s.params, size_t(4 * R), 0.0f);
  put(w, a.in.seeds, s.seeds, size_t(R), 0);
  put(w, a.in.draw, s.draw_positions, size_t(R), 0);
  put(w, a.in.rows_k, s.rows_k, size_t(R), -1);
  std::vector<float> pen = s.penalties;
  while (int64_t(pen.size()) < 3 * R) pen.insert(pen.end(), {1.0f, 0.0f, 0.0f});
  put(w, a.in.penalties, pen, size_t(3 * R), 0.0f);
  put(w, a.in.offsets, s.offsets, size_t(R + 1), s.offsets.back());
  w[a.in.counts] = int32_t(b.table_updates.size() / 3);
  w[a.in.counts + 1] = int32_t(b.window_updates.size() / 3);
  if (entries) std::memcpy(a.host_entries[slot].data(), s.entries.data(), size_t(entries) * sizeof(ops::LogitsEntry));
  if (!b.table_updates.empty())
    std::memcpy(a.host_updates[0][slot].data(), b.table_updates.data(), b.table_updates.size() * 4);
  if (!b.window_updates.empty())
    std::memcpy(a.host_updates[1][slot].data(), b.window_updates.data(), b.window_updates.size() * 4);
  return ok_status();
}

StepRunner::Views StepRunner::views(int64_t T, int64_t R, bool all_rows, int64_t num_seqs) const {
  const Arena& a = *arena_;
  auto in = [&](size_t at, DType dt, std::initializer_list<int64_t> shape) {
    return Tensor(static_cast<int32_t*>(a.dev_in.data()) + at, dt, shape, device_);
  };
  auto out = [&](int64_t at, DType dt, std::initializer_list<int64_t> shape) {
    return Tensor(static_cast<int32_t*>(a.dev_out.data()) + at, dt, shape, device_);
  };
  Views v;
  const Tensor tables = a.tables.view(DType::I32, {args_.seats + 1, args_.max_blocks});
  v.fa.tokens = in(a.in.tokens, DType::I32, {T});
  v.fa.batch = {.positions = in(a.in.positions, DType::I32, {T}), .seq_index = in(a.in.seats, DType::I32, {T}),
                .block_tables = tables, .num_seqs = num_seqs};
  v.fa.cache = kv_.layers();
  if (kv_.has_window_pool()) v.fa.sliding_block_tables = a.windows.view(DType::I32, {args_.seats + 1, args_.max_blocks});
  v.fa.logit_rows = in(a.in.rows, DType::I32, {R});
  v.fa.all_rows = all_rows;
  if (samples_) v.fa.logits = a.logits.view(DType::F32, {R, model_.config.vocab_size});
  v.fa.tp = tp_.get();
  if (a.aux.data()) {
    v.fa.aux_boundaries = args_.aux_boundaries;
    v.fa.aux = aux();
  }
  v.prev = {.tokens = v.fa.tokens, .from = in(a.in.from_prev, DType::I32, {T}), .prev = out(0, DType::I32, {a.R})};
  const int64_t U = std::max<int64_t>(a.update_cap, 1);
  if (a.update_cap > 0) {
    v.table_updates = {.tables = tables, .updates = a.dev_updates[0].view(DType::I32, {U, 3}),
                       .count = in(a.in.counts, DType::I32, {1})};
    if (kv_.has_window_pool())
      v.window_updates = {.tables = v.fa.sliding_block_tables, .updates = a.dev_updates[1].view(DType::I32, {U, 3}),
                          .count = in(a.in.counts + 1, DType::I32, {1})};
  }
  v.params = in(a.in.params, DType::F32, {R, 4});
  v.seeds = in(a.in.seeds, DType::I32, {R});
  v.draw = in(a.in.draw, DType::I32, {R});
  v.rows_k = in(a.in.rows_k, DType::I32, {R});
  v.penalties = in(a.in.penalties, DType::F32, {R, 3});
  v.offsets = in(a.in.offsets, DType::I32, {R + 1});
  if (a.entry_cap > 0) {
    v.entries = a.dev_entries.view(DType::I32, {a.entry_cap, 4});
    v.saved = a.dev_saved.view(DType::F32, {a.entry_cap});
  }
  v.ids = out(0, DType::I32, {R});
  v.logprob = out(a.R, DType::F32, {R});
  v.lse = out(2 * a.R, DType::F32, {R});
  v.top_ids = out(3 * a.R, DType::I32, {R, ops::kMaxTopLogprobs});
  v.top_lp = out(3 * a.R + a.R * ops::kMaxTopLogprobs, DType::F32, {R, ops::kMaxTopLogprobs});
  return v;
}

// Everything a step runs on the device, in stream order (what a graph captures).
Status StepRunner::device_step(const Views& v, bool logprobs, bool entries) {
  if (!v.table_updates.tables.empty()) MX_TRY(ops::apply_table_updates(cx_, v.table_updates));
  if (!v.window_updates.tables.empty()) MX_TRY(ops::apply_table_updates(cx_, v.window_updates));
  if (tp_) MX_TRY(ops::broadcast(cx_, *tp_, arena_->R, device_));  // rank 0's previous samples, for take_prev_tokens
  MX_TRY(ops::take_prev_tokens(cx_, v.prev));
  MX_TRY(forward(cx_, model_, *ws_, v.fa));
  if (!samples_) return ok_status();
  if (logprobs)
    MX_TRY(ops::logprobs_topk(cx_, {.logits = v.fa.logits, .rows_k = v.rows_k, .lse = v.lse, .top_ids = v.top_ids,
                               .top_logprobs = v.top_lp}));
  if (entries)
    MX_TRY(ops::logits_process(cx_, {.logits = v.fa.logits, .penalties = v.penalties, .offsets = v.offsets,
                                .entries = v.entries, .saved = v.saved}));
  MX_TRY(ops::sample(cx_, {.logits = v.fa.logits, .params = v.params, .seeds = v.seeds, .positions = v.draw, .ids = v.ids}));
  if (logprobs)
    MX_TRY(ops::logprobs_chosen(cx_, {.logits = v.fa.logits, .offsets = v.offsets, .entries = v.entries, .saved = v.saved,
                                 .ids = v.ids, .rows_k = v.rows_k, .lse = v.lse, .logprobs = v.logprob}));
  return ok_status();
}

// A decode bucket replays its graph (captured on first use, after one eager run that loads the
// kernels and picks cuBLASLt's algorithms); anything else runs eagerly. The graphs hold the
// context's scratch address, which never moves (reserved once in create()).
Status StepRunner::run(const Views& v, bool logprobs, bool entries, bool graph) {
  MX_CHECK(!graph || !v.fa.calibrate_kv, "step runner: a calibrating step cannot be captured or replayed");
  if (!graph || graphs_failed_) return device_step(v, logprobs, entries);
  const auto key = std::make_tuple(v.fa.tokens.dim(0), int(v.fa.tokens.dim(0) / std::max<int64_t>(v.fa.batch.num_seqs, 1)),
                                   logprobs, entries);
  if (auto it = graphs_.find(key); it != graphs_.end()) {
    ++replays_;
    return it->second.replay();
  }
  MX_TRY(device_step(v, logprobs, entries));
  // The graph reads every input from the staged buffers, which each launch refills before replaying.
  auto g = ops::StepGraph::capture(cx_, [this, v, logprobs, entries] { return device_step(v, logprobs, entries); });
  if (!g.ok()) {
    log_warn("decode steps stay eager: {}", g.status().message());
    graphs_failed_ = true;
    return ok_status();
  }
  graphs_.emplace(key, std::move(*g));
  ++captures_;
  return ok_status();
}

Status StepRunner::launch(const StepBatch& b) {
  MX_CHECK(in_flight() < kMaxInFlight, "step runner: {} steps in flight", in_flight());
  const SampleRows& s = b.sampling;
  const int q = b.tokens_per_seq;
  MX_CHECK(q <= 0 || (s.rows() == b.size() && b.size() == q * b.num_seqs),
           "step: {} tokens per sequence over {} sequences must be the {} tokens, each sampled ({} rows)", q, b.num_seqs,
           b.size(), s.rows());
  // A calibrating step runs eagerly: a graph would replay the calibration on every later step, and
  // padding tokens would count in the scales.
  bool graph = q > 0 && !b.calibrate_kv && args_.graphs == UseGraphs::Yes && device_ == Device::CUDA;
  int64_t T = b.size(), R = s.rows(), seqs = b.num_seqs;
  if (graph) {
    seqs = bucket(int(b.num_seqs));
    graph = seqs * q <= arena_->T && seqs * q <= arena_->R;
    if (graph) T = R = seqs * q;
    else seqs = b.num_seqs;
  }
  const int slot = next_slot_;
  next_slot_ ^= 1;
  MX_TRY(pack(b, T, R, slot));
  if (!followers_) return launch_packed(b, T, R, seqs, slot, graph);
  // The other ranks launch this step now: from here an error on rank 0 would leave them waiting
  // inside a collective, so it ends the process as theirs do (tp_followers.cpp).
  followers_->launch(b);
  if (Status st = launch_packed(b, T, R, seqs, slot, graph); !st.ok()) tp_rank_failed(0, st);
  return ok_status();
}

// The device part of launch(): inputs copied in, the step run (a graph where it can be), the
// samples copied out.
Status StepRunner::launch_packed(const StepBatch& b, int64_t T, int64_t R, int64_t seqs, int slot, bool graph) {
  const SampleRows& s = b.sampling;
  const int q = b.tokens_per_seq;
  Arena& a = *arena_;
  MX_TRY(ops::copy_async(cx_, a.dev_in.view(DType::I32, {int64_t(a.in.total)}),
                         Tensor(a.host_in[slot].data(), DType::I32, {int64_t(a.in.total)})));
  if (!s.entries.empty())
    MX_TRY(ops::copy_async(cx_, a.dev_entries.view(DType::I32, {int64_t(s.entries.size()) * 4}),
                           Tensor(a.host_entries[slot].data(), DType::I32, {int64_t(s.entries.size()) * 4})));
  for (int k = 0; k < 2; ++k) {
    const std::vector<int32_t>& u = k == 0 ? b.table_updates : b.window_updates;
    if (!u.empty())
      MX_TRY(ops::copy_async(cx_, a.dev_updates[k].view(DType::I32, {int64_t(u.size())}),
                             Tensor(a.host_updates[k][slot].data(), DType::I32, {int64_t(u.size())})));
  }
  Views v = views(T, R, q > 0, seqs);
  v.fa.calibrate_kv = b.calibrate_kv;
  MX_TRY(run(v, s.any_logprobs, s.any_entries, graph));
  // The ids, or everything up to the last row's top logprobs (the areas are laid out for a.R rows).
  const int64_t out_words = s.any_logprobs ? (3 + ops::kMaxTopLogprobs) * a.R + R * ops::kMaxTopLogprobs : R;
  if (samples_)
    MX_TRY(ops::copy_async(cx_, Tensor(a.host_out[slot].data(), DType::I32, {out_words}),
                           a.dev_out.view(DType::I32, {out_words})));
  MX_TRY(a.done[slot].record(cx_));
  launched_.push_back({.slot = slot,
                       .rows = samples_ ? s.rows() : 0,
                       .logprobs = samples_ && s.any_logprobs,
                       .keep_logits = samples_ && b.keep_logits});
  return ok_status();
}

Result<StepOutput> StepRunner::collect() {
  MX_CHECK(!launched_.empty(), "step runner: nothing to collect");
  const Launched l = launched_.front();
  launched_.pop_front();
  Arena& a = *arena_;
  if (Status st = a.done[l.slot].wait(); !st.ok()) {
    if (!followers_) return st;
    tp_rank_failed(0, st);
  }
  StepOutput out;
  const int32_t* w = static_cast<const int32_t*>(a.host_out[l.slot].data());
  out.ids.assign(w, w + l.rows);
  if (l.logprobs) {
    const float* f = reinterpret_cast<const float*>(w);
    out.logprobs.assign(f + a.R, f + a.R + l.rows);
    const int64_t K = ops::kMaxTopLogprobs;
    out.top_ids.assign(w + 3 * a.R, w + 3 * a.R + l.rows * K);
    out.top_logprobs.assign(f + 3 * a.R + a.R * K, f + 3 * a.R + a.R * K + l.rows * K);
  }
  if (l.keep_logits) {
    const int64_t V = model_.config.vocab_size;
    out.logits.resize(size_t(l.rows * V));
    MX_TRY(ops::copy(Tensor(out.logits.data(), DType::F32, {l.rows, V}),
                     a.logits.view(DType::F32, {a.R, V}).rows(0, l.rows)));
  }
  return out;
}

}  // namespace mx
