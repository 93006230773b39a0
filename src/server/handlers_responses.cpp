// POST /v1/responses: input items (message, reasoning, function_call, function_call_output; after
// the stored state is applied: response_store.h) become a chat body for the chat pipeline; the
// output deltas become output items (reasoning, message, function_call), returned whole or
// streamed as response.* events, and the finished response is stored unless `store` is false.
// GET and DELETE /v1/responses/{id} read and forget stored responses.
#include "server/chat_decoder.h"
#include "server/chat_prompt.h"
#include "server/generation.h"
#include "server/handlers.h"
#include "server/responses_input.h"
#include "server/responses_output.h"
#include "server/sse.h"
#include "server/stream_run.h"

namespace mx::server {
namespace {

struct ResponseRun {
  std::string id = random_id("resp_");
  int64_t created = unix_now();
  Json request;  // the body (echoed fields), its input expanded by the stored state
  Json items;    // the conversation's input items, stored with the output
  bool store = true;
  SamplingRequest sr;
  std::vector<int32_t> prompt_ids;
  std::vector<Choice> choices;  // one
  std::unique_ptr<ChatDecoder> decoder;
  ResponseOutput builder;
  bool started = false, done = false;
  Clock::time_point last_write = Clock::now();
};

Json response_json(const ServerContext& ctx, const ResponseRun& run, const std::string& status) {
  Json r = {{"id", run.id}, {"object", "response"}, {"created_at", run.created}, {"status", status}, {"error", nullptr}};
  r["incomplete_details"] = status == "incomplete" ? Json{{"reason", "max_output_tokens"}} : Json(nullptr);
  r["instructions"] = run.request.value("instructions", Json(nullptr));
  r["max_output_tokens"] = run.sr.params.max_tokens;
  r["model"] = ctx.args.served_model_name;
  r["output"] = status == "in_progress" ? Json::array() : run.builder.output;
  r["parallel_tool_calls"] = false;
  r["previous_response_id"] = run.request.value("previous_response_id", Json(nullptr));
  r["store"] = run.store;
  const Json* reasoning = run.request.contains("reasoning") ? &run.request["reasoning"] : nullptr;
  const bool effort = reasoning && reasoning->is_object() && reasoning->contains("effort") && (*reasoning)["effort"].is_string();
  const bool summary = reasoning && reasoning->is_object() && reasoning->contains("summary") && (*reasoning)["summary"].is_string();
  r["reasoning"] = {{"effort", effort ? (*reasoning)["effort"] : Json("medium")}, {"summary", summary ? (*reasoning)["summary"] : Json(nullptr)}};
  r["temperature"] = run.sr.params.sampling.temperature;
  r["top_p"] = run.sr.params.sampling.top_p;
  r["tool_choice"] = run.request.value("tool_choice", Json("auto"));
  r["tools"] = run.request.value("tools", Json::array());
  r["text"] = run.request.value("text", Json{{"format", {{"type", "text"}}}});
  if (status != "in_progress") {
    const size_t out = run.choices.empty() ? 0 : run.choices[0].tokens.size();
    r["usage"] = {{"input_tokens", run.prompt_ids.size()}, {"input_tokens_details", {{"cached_tokens", 0}}},
                  {"output_tokens", out}, {"output_tokens_details", {{"reasoning_tokens", run.decoder ? run.decoder->reasoning_tokens() : 0}}},
                  {"total_tokens", run.prompt_ids.size() + out}};
  } else {
    r["usage"] = nullptr;
  }
  return r;
}

std::string feed(ResponseRun& run, std::span<const int32_t> ids) {
  std::vector<ChatDelta> deltas;
  for (int32_t id : ids)
    if (run.decoder->push(id, deltas) == StopHit::Yes) {
      end_early(run.choices[0], FinishReason::Stop);
      break;
    }
  std::string out;
  for (const ChatDelta& d : deltas) out += run.builder.on_delta(d);
  return out;
}

// After the last tokens: flush the decoder, close the open item.
std::string finish(ResponseRun& run) {
  std::vector<ChatDelta> deltas;
  run.decoder->finish(deltas);
  std::string out;
  for (const ChatDelta& d : deltas) out += run.builder.on_delta(d);
  return out + run.builder.close(run.choices[0].reason == FinishReason::Length);
}

std::string final_status(const ResponseRun& run) {
  return run.choices[0].reason == FinishReason::Length ? "incomplete" : "completed";
}

// A finished response and its conversation (input items, then the output items), unless store: false.
void store_response(ServerContext& ctx, const ResponseRun& run, const Json& response) {
  if (!run.store) return;
  Json items = run.items;
  for (const Json& it : run.builder.output) items.push_back(it);
  ctx.responses->put(run.id, response, std::move(items));
}

// store (boolean, default true) and include (a list; "reasoning.encrypted_content" is the one
// value this server produces: others are refused, not ignored).
std::optional<ApiError> read_state_fields(ServerContext& ctx, ResponseRun& run) {
  const Json& body = run.request;
  if (auto it = body.find("store"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad_request("'store' must be a boolean", "store");
    run.store = it->get<bool>();
  }
  if (auto it = body.find("include"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return bad_request("'include' must be a list of strings", "include");
    for (const Json& v : *it) {
      if (!v.is_string()) return bad_request("'include' must be a list of strings", "include");
      if (v != "reasoning.encrypted_content")
        return bad_request("'include' value '" + v.get<std::string>() +
                               "' is not supported; this server supports 'reasoning.encrypted_content'", "include");
      run.builder.sealer = &ctx.responses->sealer();
    }
  }
  if (auto it = body.find("reasoning"); it != body.end() && it->is_object())
    if (auto s = it->find("summary"); s != it->end() && !s->is_null()) {
      if (!s->is_string() || (*s != "auto" && *s != "concise" && *s != "detailed"))
        return bad_request("'reasoning.summary' must be one of auto, concise, detailed", "reasoning");
      run.builder.summarize = true;
    }
  if (auto e = ctx.responses->expand_input(run.request)) return e;
  if (auto in = run.request.find("input"); in != run.request.end() && in->is_array()) run.items = *in;
  return std::nullopt;
}

void stream_response(ServerContext& ctx, std::shared_ptr<ResponseRun> run, httplib::Response& res) {
  serve_stream(ctx, res, run, [&ctx, run](std::string& out) {
    if (!run->started) {
      out += run->builder.event("response.created", {{"response", response_json(ctx, *run, "in_progress")}});
      out += run->builder.event("response.in_progress", {{"response", response_json(ctx, *run, "in_progress")}});
      run->started = true;
    }
    poll_choices(run->choices, std::chrono::milliseconds(100),
                 [&](size_t, std::span<const int32_t> ids) { out += feed(*run, ids); }, [](size_t) {});
    if (all_finished(run->choices)) {
      const Choice& c = run->choices[0];
      out += finish(*run);
      if (c.reason == FinishReason::Error || c.reason == FinishReason::Cancelled) {
        Json r = response_json(ctx, *run, "failed");
        r["error"] = {{"code", "server_error"}, {"message", c.error.empty() ? "the request was cancelled" : c.error}};
        out += run->builder.event("response.failed", {{"response", r}});
      } else {
        const std::string status = final_status(*run);
        Json r = response_json(ctx, *run, status);
        store_response(ctx, *run, r);
        out += run->builder.event(status == "completed" ? "response.completed" : "response.incomplete", {{"response", r}});
      }
      record_metrics(ctx, run->choices);
      run->done = true;
    }
  });
}

}  // namespace

void handle_responses(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto parsed = parse_body(req.body, ctx.args.max_json_depth);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
  auto run = std::make_shared<ResponseRun>();
  run->request = std::move(std::get<Json>(parsed));
  const Json& body = run->request;
  if (auto e = check_model(body, ctx.args.served_model_name)) return send_error(res, *e);
  if (!ctx.tok) return send_error(res, bad_request("this model has no tokenizer.json"));
  if (auto e = parse_sampling(body, Endpoint::Responses, run->sr)) return send_error(res, *e);
  run->sr.n = 1;
  if (auto e = read_state_fields(ctx, *run)) return send_error(res, *e);
  auto chat = responses_to_chat_body(body);
  if (auto* e = std::get_if<ApiError>(&chat)) return send_error(res, *e);
  if (auto e = prepare_chat_prompt(ctx, std::get<Json>(chat), run->sr, run->prompt_ids)) {
    // Name the fields this client sent: input and text, not the chat fields they became.
    if (e->param == "messages") e->param = "input";
    if (e->param == "response_format") e->param = "text";
    return send_error(res, *e);
  }
  auto decoder = ChatDecoder::create(ctx.tok, {});
  if (!decoder.ok()) return send_error(res, server_error(decoder.status().message()));
  run->decoder = std::make_unique<ChatDecoder>(std::move(decoder).value());
  auto submitted = submit_choices(ctx, run->sr, run->prompt_ids);
  if (auto* e = std::get_if<ApiError>(&submitted)) return send_error(res, *e);
  run->choices = std::move(std::get<std::vector<Choice>>(submitted));
  if (run->sr.stream) return stream_response(ctx, run, res);
  wait_for_choices(run->choices, [&](size_t, std::span<const int32_t> ids) { feed(*run, ids); }, [](size_t) {});
  finish(*run);
  record_metrics(ctx, run->choices);
  const Choice& c = run->choices[0];
  if (c.reason == FinishReason::Error || c.reason == FinishReason::Cancelled)
    return send_error(res, server_error(c.error.empty() ? "the request was cancelled" : c.error));
  const Json r = response_json(ctx, *run, final_status(*run));
  store_response(ctx, *run, r);
  send_json(res, 200, r);
}

void handle_response_get(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  auto r = ctx.responses->response(id);
  if (!r) return send_error(res, {.status = 404, .message = "Response with id '" + id + "' not found.", .code = "not_found"});
  send_json(res, 200, *r);
}

void handle_response_delete(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  if (!ctx.responses->erase(id))
    return send_error(res, {.status = 404, .message = "Response with id '" + id + "' not found.", .code = "not_found"});
  send_json(res, 200, {{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
}

}  // namespace mx::server
