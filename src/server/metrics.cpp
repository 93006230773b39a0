// Metrics: histogram bookkeeping and the Prometheus exposition text.
#include "server/metrics.h"

#include <fmt/format.h>

#include <chrono>

namespace mx::server {
namespace {

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

const std::vector<double> kLatencyBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                             0.75,  1.0,   2.5,  5.0,  7.5,  10,   20,   40,  80,   160};

void gauge(std::string& out, const char* name, const char* help, const std::string& labels, double v, const char* type = "gauge") {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}{{{}}} {}\n", name, help, name, type, name, labels, v);
}

}  // namespace

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  counts_[i]++;
  sum_ += v;
  count_++;
}

std::string Histogram::text(const std::string& name, const std::string& help, const std::string& labels) const {
  std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, bounds_[i], cum);
  }
  out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels, count_);
  out += fmt::format("{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name, labels, sum_, name, labels, count_);
  return out;
}

Metrics::Metrics() : ttft_(kLatencyBuckets), tpot_(kLatencyBuckets), e2e_(kLatencyBuckets), queue_(kLatencyBuckets) {}

void Metrics::record(const RequestTiming& t, FinishReason reason) {
  std::lock_guard lock(mu_);
  const char* name = reason == FinishReason::Cancelled || reason == FinishReason::Error ? "abort" : finish_reason_name(reason);
  success_[name]++;
  if (t.finished == Clock::time_point{} || t.arrival == Clock::time_point{}) return;
  e2e_.observe(seconds(t.arrival, t.finished));
  if (t.first_scheduled != Clock::time_point{}) queue_.observe(seconds(t.arrival, t.first_scheduled));
  if (t.first_token == Clock::time_point{}) return;
  ttft_.observe(seconds(t.arrival, t.first_token));
  if (t.generated_tokens > 1) tpot_.observe(seconds(t.first_token, t.finished) / (t.generated_tokens - 1));
}

namespace {

struct Series {
  const char* name;
  const char* help;
  const char* type;
  double value;
};

// The engine's gauges and counters, in the order of the exposition text.
std::vector<Series> engine_series(const EngineStats& s) {
  const double usage = s.kv_blocks_total ? double(s.kv_blocks_used) / s.kv_blocks_total : 0.0;
  std::vector<Series> v = {
      {"vllm:num_requests_running", "Number of requests in model execution batches.", "gauge", double(s.running)},
      {"vllm:num_requests_waiting", "Number of requests waiting to be processed.", "gauge", double(s.waiting)},
      {"vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "gauge", usage},
      {"vllm:gpu_cache_usage_perc", "KV-cache usage (older name). 1 means 100 percent usage.", "gauge", usage},
      {"vllm:prompt_tokens_total", "Number of prefill tokens processed.", "counter", double(s.prompt_tokens_total)},
      {"vllm:generation_tokens_total", "Number of generation tokens processed.", "counter", double(s.generation_tokens_total)},
      {"vllm:num_preemptions_total", "Cumulative number of preemptions from the engine.", "counter", double(s.preemptions_total)},
      {"vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.", "counter", double(s.prefix_cache_queries)},
      {"vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", "counter", double(s.prefix_cache_hits)},
  };
  if (s.spec_tokens > 0) {  // with --speculative-config only, as vLLM
    v.push_back({"vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", "counter", double(s.spec.drafts)});
    v.push_back({"vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", "counter",
                 double(s.spec.draft_tokens)});
    v.push_back({"vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", "counter",
                 double(s.spec.accepted_tokens)});
  }
  return v;
}

// Accepted draft tokens by position in the draft (0 = the first draft token), k positions.
constexpr const char* kSpecPerPos = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
uint64_t accepted_at(const EngineStats& s, int i) {
  return size_t(i) < s.spec.accepted_per_position.size() ? s.spec.accepted_per_position[size_t(i)] : 0;
}

constexpr const char* kFinishReasons[] = {"stop", "length", "abort"};

}  // namespace

nlohmann::ordered_json Histogram::json() const {
  nlohmann::ordered_json le = nlohmann::ordered_json::array(), buckets = nlohmann::ordered_json::array();
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    le.push_back(bounds_[i]);
    buckets.push_back(cum);
  }
  le.push_back("+Inf");
  buckets.push_back(count_);
  return {{"le", std::move(le)}, {"buckets", std::move(buckets)}, {"sum", sum_}, {"count", count_}};
}

std::string Metrics::render(const std::string& model_name, const EngineStats& s) const {
  const std::string labels = fmt::format("model_name=\"{}\"", model_name);
  std::string out;
  for (const Series& x : engine_series(s)) gauge(out, x.name, x.help, labels, x.value, x.type);
  if (s.spec_tokens > 0) {
    out += fmt::format("# HELP {} Accepted tokens per draft position.\n# TYPE {} counter\n", kSpecPerPos, kSpecPerPos);
    for (int i = 0; i < s.spec_tokens; ++i)
      out += fmt::format("{}{{{},position=\"{}\"}} {}\n", kSpecPerPos, labels, i, accepted_at(s, i));
  }
  std::lock_guard lock(mu_);
  out += "# HELP vllm:request_success_total Count of successfully processed requests.\n"
         "# TYPE vllm:request_success_total counter\n";
  for (const char* r : kFinishReasons) {
    auto it = success_.find(r);
    out += fmt::format("vllm:request_success_total{{{},finished_reason=\"{}\"}} {}\n", labels, r,
                       it == success_.end() ? 0 : it->second);
  }
  out += ttft_.text("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels);
  out += tpot_.text("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", labels);
  out += tpot_.text("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", labels);
  out += e2e_.text("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", labels);
  out += queue_.text("vllm:request_queue_time_seconds", "Histogram of time spent waiting in the queue.", labels);
  return out;
}

nlohmann::ordered_json Metrics::json(const std::string& model_name, const EngineStats& s) const {
  nlohmann::ordered_json m = nlohmann::ordered_json::object();
  for (const Series& x : engine_series(s)) m[x.name] = x.value;
  if (s.spec_tokens > 0) {
    nlohmann::ordered_json per_pos = nlohmann::ordered_json::array();
    for (int i = 0; i < s.spec_tokens; ++i) per_pos.push_back(accepted_at(s, i));
    m[kSpecPerPos] = std::move(per_pos);
  }
  std::lock_guard lock(mu_);
  nlohmann::ordered_json success = nlohmann::ordered_json::object();
  for (const char* r : kFinishReasons) {
    auto it = success_.find(r);
    success[r] = it == success_.end() ? 0 : it->second;
  }
  m["vllm:request_success_total"] = std::move(success);
  m["vllm:time_to_first_token_seconds"] = ttft_.json();
  m["vllm:time_per_output_token_seconds"] = tpot_.json();
  m["vllm:inter_token_latency_seconds"] = tpot_.json();
  m["vllm:e2e_request_latency_seconds"] = e2e_.json();
  m["vllm:request_queue_time_seconds"] = queue_.json();
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return {{"model_name", model_name}, {"time", now}, {"metrics", std::move(m)}};
}

}  // namespace mx::server
