// Bench runner: random KV contents stand in for a prefilled context of the given depth (the
// decode step reads the same bytes); decode steps run as a captured graph (forward -> greedy sample ->
// next tokens, positions + 1) replayed N times; prefill runs one forward over P tokens.
#include "runtime/bench.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>

#include "core/log.h"
#include "model/forward.h"
#include "runtime/batch_staging.h"
#include "runtime/kv_cache.h"

namespace mx {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Result<double> measure_copy_gbps(Device device) {
  const size_t bytes = device == Device::CPU ? (256u << 20) : (1u << 30);
  MX_ASSIGN(ops::Buffer a, ops::Buffer::allocate(device, bytes));
  MX_ASSIGN(ops::Buffer b, ops::Buffer::allocate(device, bytes));
  const Tensor ta = a.view(DType::U8, {int64_t(bytes)}), tb = b.view(DType::U8, {int64_t(bytes)});
  MX_TRY(ops::fill_random({.out = ta, .seed = 1}));
  MX_TRY(ops::copy(tb, ta));  // warm-up
  MX_TRY(ops::synchronize(device));
  constexpr int kReps = 10;
  const auto t0 = Clock::now();
  for (int i = 0; i < kReps; ++i) MX_TRY(ops::copy(i % 2 ? ta : tb, i % 2 ? tb : ta));
  MX_TRY(ops::synchronize(device));
  return 2.0 * double(bytes) * kReps / seconds_since(t0) / 1e9;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}

double sd_of(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size() - 1));
}

// Bytes of the dense (non-expert) weights read by every step, and of one expert.
struct WeightBytes {
  double dense = 0, expert = 0;
};

WeightBytes weight_bytes(const ModelConfig& c) {
  const double D = c.hidden_size, F = c.intermediate_size, E = c.num_local_experts, V = c.vocab_size;
  WeightBytes w;
  const double per_layer = 2 * (double(c.qkv_width()) * D + c.qkv_width() + D * c.q_width() + D +
                                c.num_attention_heads + 2 * D + E * D + E);
  w.dense = c.num_hidden_layers * per_layer + 2 * (V * D + D) + 2 * D;  // + lm_head, final norm, one embedding row
  // gate_up: 2F rows of D/32 blocks (16 bytes + 1 scale) + bias; down: D rows of F/32 blocks + bias.
  w.expert = 2 * F * (D / 32) * 17 + 2 * F * 2 + D * (F / 32) * 17 + D * 2;
  return w;
}

// KV reads of a decode step for one sequence at `depth` (keys 0..depth), all layers.
double kv_step_bytes(const ModelConfig& c, int depth) {
  double n = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const int w = c.window_of_layer(l);
    n += w ? std::min(w, depth + 1) : depth + 1;
  }
  return n * 2.0 * c.kv_width() * 2.0;  // K and V, bf16
}

class Runner {
 public:
  Runner(const Model& m, const BenchOptions& o) : m_(m), c_(m.config), o_(o), dev_(m.weights.device) {}

  Result<BenchRow> prefill(int P, int depth) {
    BenchRow row{.test = fmt::format("pp{}", P), .depth = depth, .batch = 1};
    MX_TRY(setup(1, depth + P, P, 1, row));
    if (!row.skipped.empty()) return row;
    HostBatch hb = batch_at(1, depth, P);
    hb.logit_rows = {int32_t(P - 1)};
    std::vector<double> tps;
    for (int r = 0; r < o_.reps + 1; ++r) {  // first run warms up
      MX_ASSIGN(ForwardArgs a, staging_->stage(hb, *kv_));
      MX_TRY(ops::synchronize(dev_));
      const auto t0 = Clock::now();
      MX_TRY(forward(m_, *ws_, a));
      MX_TRY(ops::synchronize(dev_));
      if (r > 0) tps.push_back(P / seconds_since(t0));
    }
    row.mean = mean_of(tps);
    row.sd = sd_of(tps);
    return row;
  }

  Result<BenchRow> decode(int N, int depth, int B, BenchReport* profile_into) {
    BenchRow row{.test = fmt::format("tg{}", N), .depth = depth, .batch = B};
    MX_TRY(setup(B, depth + N, B, B, row));
    if (!row.skipped.empty()) return row;
    HostBatch hb = batch_at(B, depth, 1);
    for (int b = 0; b < B; ++b) hb.logit_rows.push_back(b);
    MX_ASSIGN(ForwardArgs a, staging_->stage(hb, *kv_));
    const Tensor next_ids = a.tokens;
    MX_TRY(make_sampling_inputs(B));
    auto step = [&]() -> Status {
      MX_TRY(forward(m_, *ws_, a));
      MX_TRY(ops::sample({.logits = a.logits, .params = params_, .seeds = seeds_, .positions = a.batch.positions,
                          .ids = next_ids}));
      return ops::add_i32({.x = a.batch.positions, .value = 1});
    };
    MX_TRY(step());  // eager warm-up: grows backend scratch before any capture
    MX_TRY(ops::synchronize(dev_));
    if (profile_into) {
      ops::set_profiling(true);
      const auto t0 = Clock::now();
      MX_TRY(step());
      MX_TRY(ops::synchronize(dev_));
      profile_into->profile_step_us = seconds_since(t0) * 1e6;
      ops::set_profiling(false);
      profile_into->profile = ops::take_profile();
      for (auto& p : profile_into->profile)
        if (p.name.starts_with("attention")) p.bytes += kv_step_bytes(c_, depth) * B;
    }
    std::optional<ops::StepGraph> graph;
    if (o_.graphs == UseGraphs::Yes) {
      MX_ASSIGN(ops::StepGraph g, ops::StepGraph::capture(dev_, step));
      graph = std::move(g);
    }
    std::vector<double> tps;
    for (int r = 0; r < o_.reps + 1; ++r) {
      MX_ASSIGN(a, staging_->stage(hb, *kv_));  // positions back to the depth
      MX_TRY(ops::synchronize(dev_));
      const auto t0 = Clock::now();
      for (int i = 0; i < N; ++i) MX_TRY(graph ? graph->replay() : step());
      MX_TRY(ops::synchronize(dev_));
      if (r > 0) tps.push_back(double(B) * N / seconds_since(t0));
    }
    row.mean = mean_of(tps);
    row.sd = sd_of(tps);
    const double step_s = double(B) / row.mean;
    row.gbps = decode_step_bytes(c_, B, depth + N / 2) / step_s / 1e9;
    return row;
  }

 private:
  // Allocates the KV cache, workspace and staging for B sequences of `tokens` positions each;
  // marks the row skipped when they would not fit in free device memory.
  Status setup(int B, int tokens, int max_tokens, int max_rows, BenchRow& row) {
    kv_.reset();
    ws_.reset();
    staging_.reset();
    const int blocks_per_seq = (tokens + o_.kv_block_size - 1) / o_.kv_block_size;
    const KvCacheArgs kv_args{.num_blocks = B * blocks_per_seq,
                              .block_size = o_.kv_block_size,
                              .sliding = SlidingLayers::Ring,
                              .max_seqs = B,
                              .max_call_tokens = max_tokens / B};
    int full_layers = 0;
    for (int l = 0; l < c_.num_hidden_layers; ++l) full_layers += c_.window_of_layer(l) == 0;
    const int ring_blocks = (kv_args.max_call_tokens + c_.sliding_window + 2 * o_.kv_block_size) / o_.kv_block_size;
    const double kv_bytes = (double(full_layers) * B * blocks_per_seq +
                             double(c_.num_hidden_layers - full_layers) * B * ring_blocks) *
                            o_.kv_block_size * 2.0 * c_.kv_width() * (dev_ == Device::CPU ? 4 : 2);
    MX_ASSIGN(ops::MemoryInfo mem, ops::memory_info(dev_));
    const double act_bytes = double(max_tokens) * (4.0 * c_.hidden_size + c_.qkv_width() + c_.q_width()) * 4 +
                             double(max_rows) * c_.vocab_size * 4 + (1u << 30);  // + scratch headroom
    if (kv_bytes + act_bytes > double(mem.free_bytes)) {
      row.skipped = fmt::format("needs {:.1f} GB, {:.1f} GB free", (kv_bytes + act_bytes) / 1e9, mem.free_bytes / 1e9);
      return ok_status();
    }
    MX_ASSIGN(KvCache kv, KvCache::create(c_, dev_, kv_args));
    kv_ = std::make_unique<KvCache>(std::move(kv));
    for (const auto& layer : kv_->layers()) {  // a context of random keys and values
      MX_TRY(ops::fill_random({.out = layer.k, .seed = 11, .scale = 1.0f}));
      MX_TRY(ops::fill_random({.out = layer.v, .seed = 12, .scale = 1.0f}));
    }
    tables_.assign(size_t(B), {});
    for (auto& t : tables_) MX_TRY(kv_->reserve(t, tokens));
    MX_ASSIGN(Workspace ws, Workspace::create(c_, dev_, max_tokens, max_rows));
    ws_ = std::make_unique<Workspace>(std::move(ws));
    MX_ASSIGN(BatchStaging st, BatchStaging::create(dev_, max_tokens, B, blocks_per_seq, max_rows, c_.vocab_size));
    staging_ = std::make_unique<BatchStaging>(std::move(st));
    return ok_status();
  }

  // Greedy sampling parameters (all zero) for B rows, on the device.
  Status make_sampling_inputs(int B) {
    std::vector<float> zeros_f(size_t(B) * 4, 0.0f);
    std::vector<int32_t> zeros_i(size_t(B), 0);
    MX_ASSIGN(sampling_storage_[0], ops::Buffer::allocate(dev_, zeros_f.size() * 4));
    MX_ASSIGN(sampling_storage_[1], ops::Buffer::allocate(dev_, zeros_i.size() * 4));
    params_ = sampling_storage_[0].view(DType::F32, {B, 4});
    seeds_ = sampling_storage_[1].view(DType::I32, {B});
    MX_TRY(ops::copy(params_, Tensor(zeros_f.data(), DType::F32, {B, 4})));
    return ops::copy(seeds_, Tensor(zeros_i.data(), DType::I32, {B}));
  }

  // T tokens per sequence for B sequences starting at `depth`; token ids are arbitrary.
  HostBatch batch_at(int B, int depth, int T) const {
    HostBatch hb;
    hb.tables = tables_;
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        hb.tokens.push_back(int32_t((1000 + 7919 * (b * T + t)) % c_.vocab_size));
        hb.positions.push_back(depth + t);
        hb.seq_index.push_back(b);
      }
    return hb;
  }

  const Model& m_;
  const ModelConfig& c_;
  const BenchOptions& o_;
  Device dev_;
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<Workspace> ws_;
  std::unique_ptr<BatchStaging> staging_;
  std::vector<std::vector<int32_t>> tables_;
  ops::Buffer sampling_storage_[2];
  Tensor params_, seeds_;
};

}  // namespace

double decode_step_bytes(const ModelConfig& c, int batch, int depth) {
  const WeightBytes w = weight_bytes(c);
  const double E = c.num_local_experts, K = c.num_experts_per_tok;
  const double experts_read = E * (1.0 - std::pow(1.0 - K / E, batch));  // expected distinct experts
  return w.dense + c.num_hidden_layers * experts_read * w.expert + batch * kv_step_bytes(c, depth);
}

Result<BenchReport> run_bench(const Model& model, const BenchOptions& opt,
                              const std::function<void(const BenchRow&)>& on_row) {
  BenchReport rep;
  MX_ASSIGN(rep.copy_gbps, measure_copy_gbps(model.weights.device));
  log_info("copy bandwidth {:.0f} GB/s (read + write)", rep.copy_gbps);
  Runner run(model, opt);
  bool profiled = false;
  auto add = [&](BenchRow row) {
    if (row.gbps > 0) row.floor_fraction = row.gbps / rep.copy_gbps;
    if (on_row) on_row(row);
    rep.rows.push_back(std::move(row));
  };
  for (int d : opt.depths) {
    for (int p : opt.prompt_lengths) {
      if (p <= 0) continue;
      MX_ASSIGN(BenchRow row, run.prefill(p, d));
      add(row);
    }
    for (int b : opt.batches)
      for (int n : opt.gen_lengths) {
        if (n <= 0) continue;
        const bool profile_this = opt.profile && !profiled;
        MX_ASSIGN(BenchRow row, run.decode(n, d, b, profile_this ? &rep : nullptr));
        profiled |= profile_this && row.skipped.empty();
        add(row);
      }
  }
  return rep;
}

std::string format_bench_table(const Model& model, const BenchReport& r) {
  const char* backend = model.weights.device == Device::CPU ? "cpu" : "cuda";
  std::string s = "| model | backend | test | batch | t/s | GB/s | % of floor |\n|---|---|---|--:|--:|--:|--:|\n";
  for (const auto& row : r.rows) {
    const std::string test = row.depth ? fmt::format("{} @ d{}", row.test, row.depth) : row.test;
    if (!row.skipped.empty()) {
      s += fmt::format("| {} | {} | {} | {} | skipped: {} | | |\n", model.path.string(), backend, test, row.batch,
                       row.skipped);
      continue;
    }
    const std::string gb = row.gbps > 0 ? fmt::format("{:.0f}", row.gbps) : "";
    const std::string pct = row.gbps > 0 ? fmt::format("{:.1f}%", 100 * row.floor_fraction) : "";
    s += fmt::format("| {} | {} | {} | {} | {:.2f} ± {:.2f} | {} | {} |\n", model.path.string(), backend, test,
                     row.batch, row.mean, row.sd, gb, pct);
  }
  return s;
}

std::string format_profile_table(const BenchReport& r) {
  double total = 0;
  for (const auto& p : r.profile) total += p.microseconds;
  std::string s = fmt::format("one decode step, ops timed one by one: {:.1f} µs in ops, {:.1f} µs wall\n\n",
                              total, r.profile_step_us);
  s += "| op | calls | µs | % of step | GB/s |\n|---|--:|--:|--:|--:|\n";
  for (const auto& p : r.profile)
    s += fmt::format("| {} | {} | {:.1f} | {:.1f}% | {:.0f} |\n", p.name, p.calls, p.microseconds,
                     100 * p.microseconds / total, p.bytes / (p.microseconds * 1e-6) / 1e9);
  return s;
}

}  // namespace mx
