// A generation request as the scheduler sees it (prompt ids, sampling, limits, stop ids) and
// RequestStream: the thread-safe channel through which the engine hands a request's tokens to
// its client (wait for updates, cancel), plus the per-request timing the server reports.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/constraint.h"
#include "runtime/sampler.h"

namespace mx {

enum class IgnoreEos { No, Yes };  // Yes: eos_ids do not end generation (benchmarks)

struct RequestParams {
  std::vector<int32_t> prompt;     // token ids, not empty
  int max_tokens = 16;             // generated tokens at most
  int min_tokens = 0;              // stop and eos ids are masked before this many tokens
  SamplingParams sampling;
  std::vector<int32_t> eos_ids;    // end generation unless ignore_eos (the model's end tokens)
  std::vector<int32_t> stop_ids;   // always end generation (the request's stop_token_ids)
  IgnoreEos ignore_eos = IgnoreEos::No;
  int logprobs = -1;               // -1: off; else each token's logprob and this many top ones (<= 20)
  int prefilled = 0;               // bench: the first `prefilled` prompt positions count as computed
                                   // (their KV is whatever the cache holds), as after a prefill
  bool keep_logits = false;        // the stream also gets the (V) logits each token was drawn from
  // Guided decoding: the tokens each draw may take (null: any). Its masks are built on the
  // engine thread; a sequence whose next mask depends on a token not read yet waits for it.
  std::shared_ptr<TokenConstraint> constraint;
};

// Log-probabilities of one generated token under the model's distribution (raw logits).
struct TokenLogprob {
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // most likely ids first
};

enum class FinishReason { None, Stop, Length, Cancelled, Error };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "error"

using Clock = std::chrono::steady_clock;

// What a client learns from one wait(): tokens produced since the last wait, and whether the
// request has ended (then `reason`, and `error` for FinishReason::Error).
struct StreamUpdate {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;  // one per token when the request asked for logprobs
  std::vector<float> logits;           // (tokens, V) when the request kept logits
  FinishReason reason = FinishReason::None;
  std::string error;
  bool finished() const { return reason != FinishReason::None; }
};

struct RequestTiming {
  Clock::time_point arrival, first_scheduled, first_token, finished;
  int prompt_tokens = 0, generated_tokens = 0, preemptions = 0, cached_prompt_tokens = 0;
};

class RequestStream {
 public:
  explicit RequestStream(uint64_t id) : id_(id) {}
  uint64_t id() const { return id_; }

  // Client side. Blocks until there is news or `timeout` passes (then an empty update).
  StreamUpdate wait(std::chrono::milliseconds timeout);
  void cancel();  // the engine frees the request's blocks at its next step
  bool cancelled() const;
  RequestTiming timing() const;

  // Engine side.
  void push(int32_t token, std::optional<TokenLogprob> logprob = std::nullopt, std::span<const float> logits = {});
  void finish(FinishReason reason, std::string error = {});
  void set_timing(const RequestTiming& t);

 private:
  const uint64_t id_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int32_t> pending_;
  std::vector<TokenLogprob> pending_logprobs_;
  std::vector<float> pending_logits_;
  FinishReason reason_ = FinishReason::None;
  bool delivered_end_ = false;
  std::string error_;
  bool cancelled_ = false;
  RequestTiming timing_;
};

}  // namespace mx
