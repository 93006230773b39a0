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
#include "server/sse.h"
#include "server/stream_run.h"

namespace mx::server {
namespace {

using openai::DeltaKind;


// Turns chat deltas into output items and (when streaming) response.* events.
class OutputBuilder {
 public:
  Json output = Json::array();
  int seq = 0;
  const Sealer* sealer = nullptr;  // set: reasoning items carry their text sealed (include: reasoning.encrypted_content)

  std::string event(const std::string& type, Json data) {
    Json e = {{"type", type}, {"sequence_number", seq++}};
    for (auto& [k, v] : data.items()) e[k] = v;
    return sse_event(type, e.dump());
  }

  std::string on_delta(const ChatDelta& d) {
    std::string out;
    const Kind want = d.kind == DeltaKind::Reasoning ? Kind::Reasoning : d.kind == DeltaKind::ToolArguments ? Kind::Call : Kind::Message;
    if (open_ != want || (want == Kind::Call && !d.tool_id.empty())) {
      out += close();  // in this order: the closing events come first
      out += open(want, d);
    }
    text_ += d.text;
    if (d.text.empty()) return out;
    const size_t idx = output.size();
    if (want == Kind::Reasoning)
      out += event("response.reasoning_text.delta", {{"item_id", item_["id"]}, {"output_index", idx}, {"content_index", 0}, {"delta", d.text}});
    else if (want == Kind::Message)
      out += event("response.output_text.delta", {{"item_id", item_["id"]}, {"output_index", idx}, {"content_index", 0}, {"delta", d.text}, {"logprobs", Json::array()}});
    else
      out += event("response.function_call_arguments.delta", {{"item_id", item_["id"]}, {"output_index", idx}, {"delta", d.text}});
    return out;
  }

  // Closes the open item; `truncated` (max_output_tokens reached) marks a message or call incomplete.
  std::string close(bool truncated = false) {
    if (open_ == Kind::None) return "";
    const char* status = truncated ? "incomplete" : "completed";
    std::string out;
    const size_t idx = output.size();
    const Json id = item_["id"];
    if (open_ == Kind::Reasoning) {
      Json part = {{"type", "reasoning_text"}, {"text", text_}};
      out += event("response.reasoning_text.done", {{"item_id", id}, {"output_index", idx}, {"content_index", 0}, {"text", text_}});
      out += event("response.content_part.done", {{"item_id", id}, {"output_index", idx}, {"content_index", 0}, {"part", part}});
      item_["content"] = Json::array({part});
      if (sealer) item_["encrypted_content"] = sealer->seal(text_);
    } else if (open_ == Kind::Message) {
      Json part = {{"type", "output_text"}, {"text", text_}, {"annotations", Json::array()}, {"logprobs", Json::array()}};
      out += event("response.output_text.done", {{"item_id", id}, {"output_index", idx}, {"content_index", 0}, {"text", text_}, {"logprobs", Json::array()}});
      out += event("response.content_part.done", {{"item_id", id}, {"output_index", idx}, {"content_index", 0}, {"part", part}});
      item_["content"] = Json::array({part});
      item_["status"] = status;
    } else {
      out += event("response.function_call_arguments.done", {{"item_id", id}, {"output_index", idx}, {"arguments", text_}});
      item_["arguments"] = text_;
      item_["status"] = status;
    }
    out += event("response.output_item.done", {{"output_index", idx}, {"item", item_}});
    output.push_back(std::move(item_));
    open_ = Kind::None;
    text_.clear();
    return out;
  }

  bool has_call() const {
    for (const Json& it : output) if (it["type"] == "function_call") return true;
    return false;
  }

 private:
  enum class Kind { None, Reasoning, Message, Call };

  std::string open(Kind k, const ChatDelta& d) {
    open_ = k;
    const size_t idx = output.size();
    if (k == Kind::Reasoning) item_ = {{"id", random_id("rs_")}, {"type", "reasoning"}, {"summary", Json::array()}, {"content", Json::array()}};
    else if (k == Kind::Message) item_ = {{"id", random_id("msg_")}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"}, {"content", Json::array()}};
    else item_ = {{"id", random_id("fc_")}, {"type", "function_call"}, {"status", "in_progress"}, {"call_id", d.tool_id.empty() ? random_id("call_") : d.tool_id}, {"name", d.tool_name}, {"arguments", ""}};
    std::string out = event("response.output_item.added", {{"output_index", idx}, {"item", item_}});
    if (k == Kind::Reasoning)
      out += event("response.content_part.added", {{"item_id", item_["id"]}, {"output_index", idx}, {"content_index", 0}, {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
    else if (k == Kind::Message)
      out += event("response.content_part.added", {{"item_id", item_["id"]}, {"output_index", idx}, {"content_index", 0}, {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}}}});
    return out;
  }

  Kind open_ = Kind::None;
  Json item_;
  std::string text_;
};

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
  OutputBuilder builder;
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
  r["reasoning"] = {{"effort", effort ? (*reasoning)["effort"] : Json("medium")}, {"summary", nullptr}};
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
