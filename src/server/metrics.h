// Prometheus text for GET /metrics with vLLM's metric names: request latency histograms (time to
// first token, time per output token, end to end), finished-request counters, and the engine's
// gauges and token counters; the same numbers under the same names as JSON for GET /metrics.json
// (the dashboard's source).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/request.h"
#include "runtime/scheduler.h"

namespace mx::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  // "# TYPE name histogram" and the _bucket/_sum/_count lines.
  std::string text(const std::string& name, const std::string& help, const std::string& labels) const;
  // {"le": [bounds..., "+Inf"], "buckets": [cumulative counts, as the _bucket lines], "sum", "count"}.
  nlohmann::ordered_json json() const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  // Called once per finished request (each choice of an n > 1 request counts).
  void record(const RequestTiming& t, FinishReason reason);
  std::string render(const std::string& model_name, const EngineStats& s) const;
  // {"model_name", "time" (unix seconds), "metrics": {"vllm:...": value or histogram json,
  //  "vllm:request_success_total": {"stop": n, "length": n, "abort": n}}}: every series of render().
  nlohmann::ordered_json json(const std::string& model_name, const EngineStats& s) const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_, tpot_, e2e_, queue_;
  std::map<std::string, uint64_t> success_;  // finished_reason -> count
};

}  // namespace mx::server
