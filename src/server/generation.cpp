// Submitting choices, polling their streams and recording their metrics.
#include "server/generation.h"

#include <algorithm>

#include "server/http_front.h"
#include "tokenizer/harmony.h"

namespace mx::server {

std::optional<ApiError> resolve_max_tokens(const ServerContext& ctx, size_t prompt_len, SamplingRequest& sr) {
  const int64_t max_len = ctx.engine->max_model_len();
  const int64_t P = int64_t(prompt_len);
  if (P == 0) return bad_request("The prompt is empty.");
  if (sr.max_tokens ? P + *sr.max_tokens > max_len : P >= max_len)
    return context_length_exceeded(int(max_len), P, sr.max_tokens.value_or(0));
  sr.params.max_tokens = int(sr.max_tokens.value_or(max_len - P));
  if (sr.params.min_tokens > sr.params.max_tokens) return bad_request("'min_tokens' must not exceed max_tokens", "min_tokens");
  return std::nullopt;
}

std::vector<int32_t> end_token_ids(const ServerContext& ctx) {
  std::vector<int32_t> ids = ctx.engine->model().config.eos_token_ids;
  for (auto m : {harmony::Marker::Return, harmony::Marker::Call}) {
    const int32_t id = harmony::marker_id(m);
    if (id < ctx.engine->model().config.vocab_size && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

std::variant<std::vector<Choice>, ApiError> submit_choices(ServerContext& ctx, const SamplingRequest& sr,
                                                           const std::vector<int32_t>& prompt) {
  std::vector<RequestParams> params;
  for (int i = 0; i < sr.n; ++i) {
    RequestParams p = sr.params;
    p.prompt = prompt;
    p.sampling.seed += uint64_t(i);
    if (i > 0 && p.constraint) p.constraint = p.constraint->fresh();  // each choice its own state
    params.push_back(std::move(p));
  }
  auto streams = ctx.engine->submit_all(std::move(params));  // the n choices queue together or not at all
  if (!streams.ok()) {
    const std::string m = streams.status().message();
    if (m.starts_with(kOverloaded)) return overloaded(without_locations(m) + "; retry later");
    return bad_request(streams.status(), "");
  }
  std::vector<Choice> choices;
  for (auto& s : *streams) {
    ctx.inflight.add(s);
    choices.push_back({.stream = s});
  }
  return choices;
}

void poll_choices(std::vector<Choice>& choices, std::chrono::milliseconds timeout, const OnTokens& on_tokens,
                  const OnEnd& on_end) {
  bool waited = false;
  for (size_t i = 0; i < choices.size(); ++i) {
    Choice& c = choices[i];
    if (c.reason != FinishReason::None) continue;
    StreamUpdate u = c.stream->wait(waited ? std::chrono::milliseconds(0) : timeout);
    waited = true;
    if (!u.tokens.empty()) {
      c.tokens.insert(c.tokens.end(), u.tokens.begin(), u.tokens.end());
      c.logprobs.insert(c.logprobs.end(), u.logprobs.begin(), u.logprobs.end());
      on_tokens(i, u.tokens);
    }
    if (u.finished() && c.reason == FinishReason::None) {  // a stop string may have ended it meanwhile
      c.reason = u.reason;
      c.error = u.error;
      on_end(i);
    }
  }
}

bool all_finished(const std::vector<Choice>& choices) {
  return std::all_of(choices.begin(), choices.end(), [](const Choice& c) { return c.reason != FinishReason::None; });
}

void wait_for_choices(std::vector<Choice>& choices, const OnTokens& on_tokens, const OnEnd& on_end) {
  while (!all_finished(choices)) {
    if (client_gone()) {
      for (Choice& c : choices)
        if (c.reason == FinishReason::None) end_early(c, FinishReason::Cancelled);
      return;
    }
    poll_choices(choices, std::chrono::milliseconds(200), on_tokens, on_end);
  }
}

void end_early(Choice& c, FinishReason reason) {
  c.stream->cancel();
  c.reason = reason;
}

void record_metrics(ServerContext& ctx, std::vector<Choice>& choices) {
  for (Choice& c : choices) {
    if (c.recorded || c.reason == FinishReason::None) continue;
    RequestTiming t = c.stream->timing();
    if (t.finished == Clock::time_point{}) {  // ended here (stop string, disconnect) before the engine saw it
      t.finished = Clock::now();
      t.generated_tokens = int(c.tokens.size());
    }
    ctx.metrics.record(t, c.reason);
    c.recorded = true;
  }
}

}  // namespace mx::server
