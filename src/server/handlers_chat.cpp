// POST /v1/chat/completions: request -> harmony prompt -> n engine requests; the output parsed
// by ChatDecoder and returned whole or streamed as chat.completion.chunk SSE events.
#include <chrono>

#include "server/chat_decoder.h"
#include "server/chat_prompt.h"
#include "server/generation.h"
#include "server/handlers.h"
#include "server/logprobs_json.h"
#include "server/sse.h"
#include "server/stream_run.h"

namespace mx::server {
namespace {

using openai::DeltaKind;

Json usage_json(size_t prompt_tokens, const std::vector<Choice>& choices, const std::vector<ChatDecoder>& decoders) {
  size_t completion = 0;
  int64_t reasoning = 0;
  for (const Choice& c : choices) completion += c.tokens.size();
  for (const ChatDecoder& d : decoders) reasoning += d.reasoning_tokens();
  return {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens + completion},
          {"completion_tokens", completion}, {"completion_tokens_details", {{"reasoning_tokens", reasoning}}}};
}

const char* finish_name(const Choice& c, const ChatDecoder& d) {
  if (c.reason == FinishReason::Length) return "length";
  return d.tool_calls() > 0 ? "tool_calls" : "stop";
}

Json delta_json(const ChatDelta& d) {
  switch (d.kind) {
    case DeltaKind::Reasoning: return {{"reasoning", d.text}, {"reasoning_content", d.text}};
    case DeltaKind::ToolArguments: {
      Json call = {{"index", d.tool_index}};
      if (!d.tool_id.empty()) {
        call["id"] = d.tool_id;
        call["type"] = "function";
        call["function"] = {{"name", d.tool_name}, {"arguments", d.text}};
      } else {
        call["function"] = {{"arguments", d.text}};
      }
      return {{"tool_calls", Json::array({call})}};
    }
    default: return {{"content", d.text}};
  }
}

struct ChatRun {
  std::string id = random_id("chatcmpl-");
  int64_t created = unix_now();
  std::string model;
  size_t prompt_tokens = 0;
  std::vector<int32_t> prompt_ids;
  SamplingRequest sr;
  std::vector<Choice> choices;
  std::vector<ChatDecoder> decoders;
  const Tokenizer* tok = nullptr;
  bool role_sent = false, done = false;
  Clock::time_point last_write = Clock::now();
};

Json chunk(const ChatRun& run, size_t index, Json delta, const char* finish) {
  Json choice = {{"index", index}, {"delta", std::move(delta)}, {"logprobs", nullptr}};
  choice["finish_reason"] = finish ? Json(finish) : Json(nullptr);
  return {{"id", run.id}, {"object", "chat.completion.chunk"}, {"created", run.created}, {"model", run.model},
          {"choices", Json::array({std::move(choice)})}};
}

// Feeds new tokens of choice i through its decoder; returns the SSE events to send.
std::string on_tokens(ChatRun& run, size_t i, std::span<const int32_t> ids) {
  std::vector<ChatDelta> deltas;
  bool stopped = false;
  for (int32_t id : ids) {
    if (run.decoders[i].push(id, deltas) == StopHit::Yes) {
      end_early(run.choices[i], FinishReason::Stop);  // a stop string: no on_end for this choice
      stopped = true;
      break;
    }
  }
  // Logprobs of this batch of tokens ride on its first chunk.
  Json lp;
  if (run.sr.params.logprobs >= 0) {
    const std::vector<TokenLogprob>& all = run.choices[i].logprobs;
    const size_t n = std::min(ids.size(), all.size());
    lp = {{"content", chat_logprob_entries(run.tok, ids.subspan(ids.size() - n),
                                           std::span(all).subspan(all.size() - n))}};
    if (deltas.empty()) deltas.push_back({.kind = DeltaKind::Content});
  }
  std::string out;
  for (const ChatDelta& d : deltas) {
    Json c = chunk(run, i, d.text.empty() && d.tool_id.empty() ? Json::object() : delta_json(d), nullptr);
    if (!lp.is_null()) c["choices"][0]["logprobs"] = std::exchange(lp, Json());
    out += sse_data(c.dump());
  }
  if (run.sr.return_token_ids) {
    Json c = chunk(run, i, Json::object(), nullptr);
    c["choices"][0]["token_ids"] = std::vector<int32_t>(ids.begin(), ids.end());
    out += sse_data(c.dump());
  }
  if (stopped) out += sse_data(chunk(run, i, Json::object(), "stop").dump());
  return out;
}

std::string on_end(ChatRun& run, size_t i) {
  const Choice& c = run.choices[i];
  std::vector<ChatDelta> deltas;
  run.decoders[i].finish(deltas);
  std::string out;
  for (const ChatDelta& d : deltas) out += sse_data(chunk(run, i, delta_json(d), nullptr).dump());
  if (c.reason == FinishReason::Error || c.reason == FinishReason::Cancelled)
    return out + sse_data(server_error(c.error.empty() ? "the request was cancelled" : c.error).body().dump());
  return out + sse_data(chunk(run, i, Json::object(), finish_name(c, run.decoders[i])).dump());
}

void stream_response(ServerContext& ctx, std::shared_ptr<ChatRun> run, httplib::Response& res) {
  serve_stream(ctx, res, run, [&ctx, run](std::string& out) {
    if (!run->role_sent) {
      for (size_t i = 0; i < run->choices.size(); ++i)
        out += sse_data(chunk(*run, i, {{"role", "assistant"}, {"content", ""}}, nullptr).dump());
      run->role_sent = true;
    }
    poll_choices(
        run->choices, std::chrono::milliseconds(100),
        [&](size_t i, std::span<const int32_t> ids) { out += on_tokens(*run, i, ids); },
        [&](size_t i) { out += on_end(*run, i); });
    record_metrics(ctx, run->choices);
    if (all_finished(run->choices)) {
      if (run->sr.include_usage) {
        Json u = {{"id", run->id}, {"object", "chat.completion.chunk"}, {"created", run->created},
                  {"model", run->model}, {"choices", Json::array()}, {"usage", usage_json(run->prompt_tokens, run->choices, run->decoders)}};
        out += sse_data(u.dump());
      }
      out += "data: [DONE]\n\n";
      run->done = true;
    }
  });
}

void whole_response(ServerContext& ctx, ChatRun& run, httplib::Response& res) {
  wait_for_choices(
      run.choices,
      [&](size_t i, std::span<const int32_t> ids) {
        std::vector<ChatDelta> ignored;
        for (int32_t id : ids)
          if (run.decoders[i].push(id, ignored) == StopHit::Yes) {
            end_early(run.choices[i], FinishReason::Stop);
            break;
          }
      },
      [&](size_t i) {
        std::vector<ChatDelta> ignored;
        run.decoders[i].finish(ignored);
      });
  record_metrics(ctx, run.choices);
  Json choices = Json::array();
  for (size_t i = 0; i < run.choices.size(); ++i) {
    const Choice& c = run.choices[i];
    if (c.reason == FinishReason::Error || c.reason == FinishReason::Cancelled)
      return send_error(res, server_error(c.error.empty() ? "the request was cancelled" : c.error));
    const openai::StopReason why = c.reason == FinishReason::Length ? openai::StopReason::Length : openai::StopReason::Stop;
    const openai::ChatOutput o = run.decoders[i].output(why);
    const nlohmann::json m = o.to_message_json();
    Json msg = {{"role", "assistant"}, {"content", m["content"]}};
    if (!o.reasoning.empty()) {
      msg["reasoning_content"] = o.reasoning;
      msg["reasoning"] = o.reasoning;
    }
    if (m.contains("tool_calls")) msg["tool_calls"] = m["tool_calls"];
    Json choice = {{"index", i}, {"message", msg}, {"logprobs", nullptr}, {"finish_reason", o.finish_reason}};
    if (run.sr.params.logprobs >= 0) choice["logprobs"] = {{"content", chat_logprob_entries(run.tok, c.tokens, c.logprobs)}};
    if (run.sr.return_token_ids) choice["token_ids"] = c.tokens;
    choices.push_back(std::move(choice));
  }
  Json body = {{"id", run.id}, {"object", "chat.completion"}, {"created", run.created}, {"model", run.model},
               {"choices", std::move(choices)}, {"usage", usage_json(run.prompt_tokens, run.choices, run.decoders)}};
  if (run.sr.return_token_ids) body["prompt_token_ids"] = run.prompt_ids;
  send_json(res, 200, body);
}

}  // namespace

void handle_chat(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto parsed = parse_body(req.body, ctx.args.max_json_depth);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
  const Json& body = std::get<Json>(parsed);
  if (auto e = check_model(body, ctx.args.served_model_name)) return send_error(res, *e);
  if (!ctx.tok) return send_error(res, bad_request("this model has no tokenizer.json; use /v1/completions with token ids"));
  auto run = std::make_shared<ChatRun>();
  run->model = ctx.args.served_model_name;
  run->tok = ctx.tok.get();
  if (auto e = parse_sampling(body, Endpoint::Chat, run->sr)) return send_error(res, *e);
  if (auto e = check_unsupported(body, Endpoint::Chat)) return send_error(res, *e);
  if (auto e = prepare_chat_prompt(ctx, body, run->sr, run->prompt_ids)) return send_error(res, *e);
  run->prompt_tokens = run->prompt_ids.size();
  for (int i = 0; i < run->sr.n; ++i) {
    auto d = ChatDecoder::create(ctx.tok, run->sr.stop);
    if (!d.ok()) return send_error(res, server_error(d.status().message()));
    run->decoders.push_back(std::move(d).value());
  }
  auto submitted = submit_choices(ctx, run->sr, run->prompt_ids);
  if (auto* e = std::get_if<ApiError>(&submitted)) return send_error(res, *e);
  run->choices = std::move(std::get<std::vector<Choice>>(submitted));
  if (run->sr.stream) return stream_response(ctx, run, res);
  whole_response(ctx, *run, res);
}

}  // namespace mx::server
