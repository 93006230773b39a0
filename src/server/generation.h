// Glue between an endpoint and the engine: the effective max_tokens (request or rest of the
// context) with the context-length check, the n choices of one request submitted to the engine,
// polling them for new tokens, and metrics when each ends.
#pragma once

#include <chrono>
#include <functional>
#include <span>
#include <variant>
#include <vector>

#include "server/request_params.h"
#include "server/server.h"

namespace mx::server {

struct Choice {
  std::shared_ptr<RequestStream> stream;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;  // parallel to tokens when requested
  FinishReason reason = FinishReason::None;
  std::string error;
  bool recorded = false;
};

// Sets sr.params.max_tokens; 400 context_length_exceeded when prompt + max_tokens does not fit.
std::optional<ApiError> resolve_max_tokens(const ServerContext& ctx, size_t prompt_len, SamplingRequest& sr);
// Submits sr.n requests (seeds seed, seed + 1, ...).
std::variant<std::vector<Choice>, ApiError> submit_choices(ServerContext& ctx, const SamplingRequest& sr,
                                                           const std::vector<int32_t>& prompt);

// Waits up to `timeout` for news on any unfinished choice; calls on_tokens(i, new ids) and
// on_end(i) (after its last tokens) for what arrived.
using OnTokens = std::function<void(size_t, std::span<const int32_t>)>;
using OnEnd = std::function<void(size_t)>;
void poll_choices(std::vector<Choice>& choices, std::chrono::milliseconds timeout, const OnTokens& on_tokens,
                  const OnEnd& on_end);
bool all_finished(const std::vector<Choice>& choices);
// poll_choices until every choice has ended. A non-streaming response writes nothing before the
// end, so this is where a client that closed its connection is noticed: the rest is cancelled.
void wait_for_choices(std::vector<Choice>& choices, const OnTokens& on_tokens, const OnEnd& on_end);
// Ends a choice early (stop string, client gone): cancels it in the engine and marks it.
void end_early(Choice& c, FinishReason reason);
// Records each finished choice once in the metrics.
void record_metrics(ServerContext& ctx, std::vector<Choice>& choices);
// The ids that end generation: the model's eos ids and harmony's <|return|> / <|call|>.
std::vector<int32_t> end_token_ids(const ServerContext& ctx);

}  // namespace mx::server
