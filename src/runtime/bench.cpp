// Bench runner: requests through the Engine (the loop `serve` runs). Random KV contents stand in
// for a prefilled context of the given depth (a decode step reads the same bytes).
#include "runtime/bench.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>

#include "core/log.h"
#include "model/forward.h"
#include "runtime/scheduler.h"

namespace mx {
namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Result<double> measure_copy_gbps(Device device) {
  MX_ASSIGN(auto cx, ops::Context::create(device));
  const size_t bytes = device == Device::CPU ? (256u << 20) : (1u << 30);
  MX_ASSIGN(ops::Buffer a, ops::Buffer::allocate(device, bytes));
  MX_ASSIGN(ops::Buffer b, ops::Buffer::allocate(device, bytes));
  const Tensor ta = a.view(DType::U8, {int64_t(bytes)}), tb = b.view(DType::U8, {int64_t(bytes)});
  MX_TRY(ops::fill_random(*cx, {.out = ta, .seed = 1}));
  MX_TRY(ops::copy(tb, ta));  // warm-up
  MX_TRY(ops::synchronize(*cx));
  constexpr int kReps = 10;
  const auto t0 = Clock::now();
  for (int i = 0; i < kReps; ++i) MX_TRY(ops::copy(i % 2 ? ta : tb, i % 2 ? tb : ta));
  MX_TRY(ops::synchronize(*cx));
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

// Bytes per element of a dense weight: BF16, or MXFP4 with its scales (--mxfp4-layers).
double per_weight(bool mxfp4) { return mxfp4 ? kMxfp4BytesPerWeight : 2.0; }

WeightBytes weight_bytes(const ModelConfig& c, const Mxfp4Layers& m) {
  const double D = c.hidden_size, F = c.intermediate_size, E = c.num_local_experts, V = c.vocab_size;
  WeightBytes w;
  const double per_layer = per_weight(m.qkv) * double(c.qkv_width()) * D + per_weight(m.o) * D * c.q_width() +
                           per_weight(m.router) * E * D +
                           2 * (c.qkv_width() + D + c.num_attention_heads + 2 * D + E);  // biases, sinks, norms
  // + lm_head, final norm, one embedding row
  w.dense = c.num_hidden_layers * per_layer + per_weight(m.lm_head) * V * D + 2 * D + per_weight(m.embed) * D;
  // gate_up: 2F rows of D/32 blocks (16 bytes + 1 scale) + bias; down: D rows of F/32 blocks + bias.
  w.expert = 2 * F * (D / 32) * 17 + 2 * F * 2 + D * (F / 32) * 17 + D * 2;
  return w;
}

// KV reads of a decode step for one sequence at `depth` (keys 0..depth), all layers, at the CUDA
// cache's element size (bf16, or 1 byte with fp8).
double kv_step_bytes(const ModelConfig& c, int depth, KvCacheDtype kv) {
  double n = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const int w = c.window_of_layer(l);
    n += w ? std::min(w, depth + 1) : depth + 1;
  }
  return n * 2.0 * c.kv_width() * double(dtype_size(kv_element_dtype(kv, Device::CUDA)));  // K and V
}

class Runner {
 public:
  Runner(const Model& m, const BenchOptions& o) : m_(m), c_(m.config), o_(o), dev_(m.weights.device) {}

  // pp<P> @ d: one request of depth + P tokens whose first `depth` count as prefilled; the whole
  // prompt is one step (the token budget is P), timed from submission to its first token.
  Result<BenchRow> prefill(int P, int depth) {
    BenchRow row{.test = fmt::format("pp{}", P), .depth = depth, .batch = 1};
    MX_TRY(setup(1, depth + P + 1, std::max(P, 1), row));
    if (!row.skipped.empty()) return row;
    std::vector<double> tps;
    for (int r = 0; r < o_.reps + 1; ++r) {  // the first run warms up
      MX_ASSIGN(double s, run_requests(1, depth, P, 1));
      if (r > 0) tps.push_back(P / s);
    }
    row.mean = mean_of(tps);
    row.sd = sd_of(tps);
    return row;
  }

  // tg<N> @ d, batch B: B requests whose context of `depth` tokens counts as prefilled, each
  // generating N tokens (greedy, fed back, every step a decode step of B tokens).
  Result<BenchRow> decode(int N, int depth, int B, BenchReport* profile_into) {
    BenchRow row{.test = fmt::format("tg{}", N), .depth = depth, .batch = B};
    const int k = o_.speculative.enabled() ? o_.speculative.num_speculative_tokens : 0;
    MX_TRY(setup(B, depth + N + k + 1, B * (k + 1), row));
    if (!row.skipped.empty()) return row;
    std::vector<double> tps;
    SpecStats spec_before;
    for (int r = 0; r < o_.reps + 1; ++r) {
      if (r == 1) spec_before = engine_->stats().spec;
      MX_ASSIGN(double s, run_requests(B, depth, 1, N));
      if (r > 0) tps.push_back(double(B) * N / s);
    }
    row.mean = mean_of(tps);
    row.sd = sd_of(tps);
    if (k > 0) {  // tokens per round over the timed runs; the bytes of a round are not modelled
      const SpecStats spec = engine_->stats().spec;
      const double rounds = double(spec.drafts - spec_before.drafts);
      const double accepted = double(spec.accepted_tokens - spec_before.accepted_tokens);
      row.acceptance_length = rounds > 0 ? 1.0 + accepted / rounds : 1.0;
      row.draft_length = rounds > 0 ? double(spec.draft_tokens - spec_before.draft_tokens) / rounds : 0.0;
      // Decode steps = tokens - accepted drafts (the first token of each request comes from its prefill).
      const double steps = double(o_.reps) * B * (N - 1) - accepted;
      row.drafting_share = steps > 0 ? rounds / steps : 0.0;
      row.forced_acceptance = o_.spec_acceptance_rate >= 0;
    } else {
      const double step_s = double(B) / row.mean;
      row.gbps = decode_step_bytes(gpu_config(), B, depth + N / 2, m_.mxfp4_layers, o_.kv_cache_dtype) / step_s / 1e9;
    }
    if (profile_into) MX_TRY(profile(B, depth, *profile_into));
    return row;
  }

 private:
  // What one GPU reads: with tensor parallelism its heads, expert columns and vocabulary slice (the
  // largest rank's), so GB/s and "% of floor" are per GPU.
  ModelConfig gpu_config() const {
    if (m_.tp_size() <= 1) return c_;
    ModelConfig c = m_.tp.plan.rank_config(0);
    c.vocab_size = int(m_.tp.plan.vocab(0).size());
    return c;
  }

  EngineArgs engine_args(int B, int tokens, int budget, UseGraphs graphs) const {
    const int blocks_per_seq = (tokens + o_.kv_block_size - 1) / o_.kv_block_size;
    EngineArgs a{.max_num_seqs = B,
                 .max_num_batched_tokens = std::max(budget, B),
                 .max_model_len = tokens,
                 .kv_block_size = o_.kv_block_size,
                 .num_kv_blocks = B * blocks_per_seq + 1,
                 .stats_interval_seconds = 0,
                 .enforce_eager = graphs == UseGraphs::No,
                 .kv_cache_dtype = o_.kv_cache_dtype,
                 .speculative = o_.speculative,
                 .spec_acceptance_rate = o_.spec_acceptance_rate};
    a.moe_activation = o_.moe_activation;
    return a;
  }

  // An engine for B sequences of `tokens` positions each; the row is skipped when its KV cache and
  // activations would not fit in free device memory.
  Status setup(int B, int tokens, int budget, BenchRow& row) {
    engine_.reset();
    const EngineArgs a = engine_args(B, tokens, budget, o_.graphs);
    const KvLayout kv = kv_layout(m_.rank_config(), a, dev_);
    const double kv_bytes = double(kv.bytes_per_block) * a.num_kv_blocks + double(kv.window_pool_bytes);
    MX_ASSIGN(ops::MemoryInfo mem, ops::memory_info(dev_));
    const double act_bytes = double(a.max_num_batched_tokens) * (4.0 * c_.hidden_size + c_.qkv_width() + c_.q_width()) * 4 +
                             double(B) * c_.vocab_size * 4 + (1u << 30);  // + scratch headroom
    if (kv_bytes + act_bytes > double(mem.free_bytes)) {
      row.skipped = fmt::format("needs {:.1f} GB, {:.1f} GB free", (kv_bytes + act_bytes) / 1e9, mem.free_bytes / 1e9);
      return ok_status();
    }
    MX_ASSIGN(engine_, Engine::create(m_, a));
    return engine_->fill_cache_random(11);  // a context of random keys and values
  }

  // B requests of depth + fed tokens (the first `depth` prefilled), max_tokens each; the seconds
  // from their submission to the end of the last one.
  Result<double> run_requests(int B, int depth, int fed, int max_tokens) {
    std::vector<RequestParams> reqs;
    for (int b = 0; b < B; ++b) {
      RequestParams p{.max_tokens = max_tokens, .ignore_eos = IgnoreEos::Yes, .prefilled = depth};
      for (int t = 0; t < depth + fed; ++t) p.prompt.push_back(int32_t((1000 + 7919 * (b * (depth + fed) + t)) % c_.vocab_size));
      reqs.push_back(std::move(p));
    }
    const auto t0 = Clock::now();
    MX_ASSIGN(auto streams, engine_->submit_all(std::move(reqs)));
    for (auto& s : streams) {
      StreamUpdate u;
      while (!u.finished()) u = s->wait(std::chrono::milliseconds(1000));
      MX_CHECK(u.reason == FinishReason::Length, "bench request ended with '{}': {}", finish_reason_name(u.reason),
               u.error);
    }
    return seconds_since(t0);
  }

  // One decode step of B sequences timed op by op (an eager engine: graphs hide the ops).
  Status profile(int B, int depth, BenchReport& rep) {
    engine_.reset();
    MX_ASSIGN(engine_, Engine::create(m_, engine_args(B, depth + 2, B, UseGraphs::No)));
    MX_TRY(engine_->fill_cache_random(11));
    MX_TRY(run_requests(B, depth, 1, 1).status());  // warm-up
    engine_->context().set_profiling(true);
    auto s = run_requests(B, depth, 1, 1);
    engine_->context().set_profiling(false);
    MX_TRY(s.status());
    rep.profile_step_us = *s * 1e6;
    rep.profile = engine_->context().take_profile();
    for (auto& p : rep.profile)
      if (p.name.starts_with("attention")) p.bytes += kv_step_bytes(c_, depth, o_.kv_cache_dtype) * B;
    engine_.reset();
    return ok_status();
  }

  const Model& m_;
  const ModelConfig& c_;
  const BenchOptions& o_;
  Device dev_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace

double decode_step_bytes(const ModelConfig& c, int batch, int depth, const Mxfp4Layers& m, KvCacheDtype kv) {
  const WeightBytes w = weight_bytes(c, m);
  const double E = c.num_local_experts, K = c.num_experts_per_tok;
  const double experts_read = E * (1.0 - std::pow(1.0 - K / E, batch));  // expected distinct experts
  return w.dense + c.num_hidden_layers * experts_read * w.expert + batch * kv_step_bytes(c, depth, kv);
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
    std::string test = row.depth ? fmt::format("{} @ d{}", row.test, row.depth) : row.test;
    if (row.acceptance_length > 0)
      test += fmt::format(" (speculative: {:.2f} tokens per round of {:.2f} drafts, drafts in {:.0f}% of steps{})",
                          row.acceptance_length, row.draft_length, 100 * row.drafting_share,
                          row.forced_acceptance ? ", FORCED acceptance" : "");
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
