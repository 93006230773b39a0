// POST /v1/responses: input items (message, reasoning, function_call, function_call_output) become
// a chat body for the chat pipeline; the output deltas become output items (reasoning, message,
// function_call), returned whole or streamed as response.* events.
#include <set>

#include "server/chat_decoder.h"
#include "server/chat_prompt.h"
#include "server/generation.h"
#include "server/handlers.h"
#include "server/sse.h"
#include "server/stream_run.h"

namespace mx::server {
namespace {

using openai::DeltaKind;

std::string text_of(const Json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (content.is_array())
    for (const Json& part : content)
      if (part.is_object() && part.contains("text") && part["text"].is_string()) out += part["text"].get<std::string>();
  return out;
}

// item[key] as a string: `fallback` when absent or null, a 400 naming `where` for another type.
std::variant<std::string, ApiError> str_field(const Json& item, const char* key, const std::string& where,
                                              const std::string& fallback = "") {
  auto it = item.find(key);
  if (it == item.end() || it->is_null()) return fallback;
  if (!it->is_string()) return bad_request("'" + where + "." + key + "' must be a string", "input");
  return it->get<std::string>();
}

#define MX_STR_FIELD(var, ...)                                      \
  std::string var;                                                  \
  {                                                                 \
    auto r_ = str_field(__VA_ARGS__);                               \
    if (auto* e_ = std::get_if<ApiError>(&r_)) return *e_;          \
    var = std::move(std::get<std::string>(r_));                     \
  }

// Responses input -> chat messages. Reasoning items attach to the next assistant turn.
std::variant<Json, ApiError> input_to_messages(const Json& body) {
  Json messages = Json::array();
  if (auto it = body.find("instructions"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return bad_request("'instructions' must be a string", "instructions");
    messages.push_back({{"role", "system"}, {"content", *it}});
  }
  auto in = body.find("input");
  if (in == body.end() || in->is_null()) return bad_request("'input' is required", "input");
  if (in->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *in}});
    return messages;
  }
  if (!in->is_array()) return bad_request("'input' must be a string or a list of items", "input");
  std::optional<std::string> reasoning;
  std::set<std::string> call_ids;  // of the function_call items so far
  for (size_t i = 0; i < in->size(); ++i) {
    const Json& item = (*in)[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) return bad_request("each 'input' item must be an object", "input");
    MX_STR_FIELD(type, item, "type", where, item.contains("role") ? "message" : "");
    if (type == "message") {
      MX_STR_FIELD(role, item, "role", where, "user");
      if (role != "user" && role != "assistant" && role != "system" && role != "developer")
        return bad_request("'" + where + ".role' must be one of user, assistant, system, developer", "input");
      const Json content = item.value("content", Json(""));
      if (!content.is_string() && !content.is_array())
        return bad_request("'" + where + ".content' must be a string or a list of content parts", "input");
      Json m = {{"role", role}, {"content", text_of(content)}};
      if (role == "assistant" && reasoning) m["reasoning_content"] = *std::exchange(reasoning, std::nullopt);
      messages.push_back(std::move(m));
    } else if (type == "reasoning") {
      std::string text = text_of(item.value("content", Json::array()));
      if (text.empty()) text = text_of(item.value("summary", Json::array()));
      reasoning = text;
    } else if (type == "function_call") {
      MX_STR_FIELD(call_id, item, "call_id", where);
      MX_STR_FIELD(name, item, "name", where);
      call_ids.insert(call_id);
      if (name.empty()) return bad_request("'" + where + ".name' is required", "input");
      const Json args = item.value("arguments", Json("{}"));
      if (!args.is_string() && !args.is_object())
        return bad_request("'" + where + ".arguments' must be a JSON string or an object", "input");
      Json call = {{"id", call_id}, {"type", "function"},
                   {"function", {{"name", name}, {"arguments", args.is_string() ? args.get<std::string>() : args.dump()}}}};
      if (!messages.empty() && messages.back()["role"] == "assistant" && messages.back().contains("tool_calls")) {
        messages.back()["tool_calls"].push_back(std::move(call));
        continue;
      }
      Json m = {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", Json::array({std::move(call)})}};
      if (reasoning) m["reasoning_content"] = *std::exchange(reasoning, std::nullopt);
      messages.push_back(std::move(m));
    } else if (type == "function_call_output") {
      MX_STR_FIELD(call_id, item, "call_id", where);
      if (!call_ids.contains(call_id))
        return bad_request("'" + where + ".call_id' matches no earlier function_call item", "input");
      const Json out = item.value("output", Json(""));
      messages.push_back({{"role", "tool"}, {"tool_call_id", call_id},
                          {"content", out.is_string() ? out.get<std::string>() : out.dump()}});
    } else {
      return bad_request("unsupported input item type '" + type + "'", "input");
    }
  }
  return messages;
}

// reasoning: null or {"effort": string|null, "summary": ...}.
std::optional<ApiError> check_reasoning(const Json& body) {
  auto it = body.find("reasoning");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return bad_request("'reasoning' must be an object", "reasoning");
  if (auto e = it->find("effort"); e != it->end() && !e->is_null() && !e->is_string())
    return bad_request("'reasoning.effort' must be a string", "reasoning");
  return std::nullopt;
}

// The request as a chat-completions body (messages, tools, tool_choice, effort, format).
std::variant<Json, ApiError> to_chat_body(const Json& body) {
  if (body.contains("previous_response_id") && !body["previous_response_id"].is_null())
    return bad_request("'previous_response_id' is not supported: this server does not store responses; send the "
                       "whole conversation as input", "previous_response_id");
  if (auto e = check_reasoning(body)) return *e;
  auto messages = input_to_messages(body);
  if (auto* e = std::get_if<ApiError>(&messages)) return *e;
  Json chat = {{"messages", std::get<Json>(messages)}};
  if (auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return bad_request("'tools' must be a list", "tools");
    Json tools = Json::array();
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& t = (*it)[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) return bad_request("'" + where + "' must be an object", "tools");
      MX_STR_FIELD(type, t, "type", where, "function");
      if (type != "function")
        return bad_request("'" + where + ".type' '" + type + "' is not supported: only function tools are offered", "tools");
      MX_STR_FIELD(name, t, "name", where);
      if (name.empty()) return bad_request("'" + where + ".name' is required", "tools");
      Json fn = {{"name", name}};
      if (t.contains("description")) fn["description"] = t["description"];
      if (t.contains("parameters")) fn["parameters"] = t["parameters"];
      tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    if (!tools.empty()) chat["tools"] = std::move(tools);
  }
  if (auto it = body.find("tool_choice"); it != body.end() && !it->is_null()) {
    if (it->is_object() && it->contains("name")) chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*it)["name"]}}}};
    else chat["tool_choice"] = *it;
  }
  if (auto it = body.find("reasoning"); it != body.end() && it->is_object() && it->contains("effort") && (*it)["effort"].is_string())
    chat["reasoning_effort"] = (*it)["effort"];
  if (auto it = body.find("text"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return bad_request("'text' must be an object", "text");
    if (auto f_it = it->find("format"); f_it != it->end() && !f_it->is_null()) {
      const Json& f = *f_it;
      if (!f.is_object()) return bad_request("'text.format' must be an object", "text");
      MX_STR_FIELD(type, f, "type", "text.format", "text");
      if (type == "json_schema") {
        MX_STR_FIELD(name, f, "name", "text.format", "response");
        if (!f.contains("schema") || !f["schema"].is_object())
          return bad_request("'text.format.schema' must be a JSON Schema object", "text");
        chat["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", name}, {"schema", f["schema"]}}}};
      } else if (type == "json_object") {
        chat["response_format"] = {{"type", "json_object"}};
      } else if (type != "text") {
        return bad_request("'text.format.type' must be one of text, json_object, json_schema", "text");
      }
    }
  }
  return chat;
}

#undef MX_STR_FIELD

// Turns chat deltas into output items and (when streaming) response.* events.
class OutputBuilder {
 public:
  Json output = Json::array();
  int seq = 0;

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

  std::string close() {
    if (open_ == Kind::None) return "";
    std::string out;
    const size_t idx = output.size();
    const Json id = item_["id"];
    if (open_ == Kind::Reasoning) {
      Json part = {{"type", "reasoning_text"}, {"text", text_}};
      out += event("response.reasoning_text.done", {{"item_id", id}, {"output_index", idx}, {"content_index", 0}, {"text", text_}});
      out += event("response.content_part.done", {{"item_id", id}, {"output_index", idx}, {"content_index", 0}, {"part", part}});
      item_["content"] = Json::array({part});
    } else if (open_ == Kind::Message) {
      Json part = {{"type", "output_text"}, {"text", text_}, {"annotations", Json::array()}, {"logprobs", Json::array()}};
      out += event("response.output_text.done", {{"item_id", id}, {"output_index", idx}, {"content_index", 0}, {"text", text_}, {"logprobs", Json::array()}});
      out += event("response.content_part.done", {{"item_id", id}, {"output_index", idx}, {"content_index", 0}, {"part", part}});
      item_["content"] = Json::array({part});
      item_["status"] = "completed";
    } else {
      out += event("response.function_call_arguments.done", {{"item_id", id}, {"output_index", idx}, {"arguments", text_}});
      item_["arguments"] = text_;
      item_["status"] = "completed";
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
  Json request;  // the original body (echoed fields)
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
  r["previous_response_id"] = nullptr;
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
                  {"output_tokens", out}, {"output_tokens_details", {{"reasoning_tokens", 0}}},
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
  return out + run.builder.close();
}

std::string final_status(const ResponseRun& run) {
  return run.choices[0].reason == FinishReason::Length ? "incomplete" : "completed";
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
        out += run->builder.event(status == "completed" ? "response.completed" : "response.incomplete",
                                  {{"response", response_json(ctx, *run, status)}});
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
  auto chat = to_chat_body(body);
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
  send_json(res, 200, response_json(ctx, *run, final_status(*run)));
}

}  // namespace mx::server
