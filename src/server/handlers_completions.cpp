// POST /v1/completions: string or token-id prompts (one or a list), plain text out (special
// tokens skipped), stop strings, whole or streamed as text_completion SSE events.
#include "server/completion_prompt.h"
#include "server/generation.h"
#include "server/handlers.h"
#include "server/logprobs_json.h"
#include "server/sse.h"
#include "server/stream_run.h"

namespace mx::server {
namespace {

// Text of one choice: streamed UTF-8 without special tokens, cut at the first stop string.
struct TextState {
  std::unique_ptr<StreamDecoder> decoder;
  std::string echo;  // the prompt's text with "echo": true, sent before the generated text
  std::string text;  // generated text only (stop strings are searched here)
  bool stopped = false;
};

struct CompletionRun {
  std::string id = random_id("cmpl-");
  int64_t created = unix_now();
  std::string model;
  SamplingRequest sr;
  size_t prompt_tokens = 0;
  std::vector<Choice> choices;
  std::vector<TextState> texts;
  bool echo_sent = false;
  bool done = false;
  Clock::time_point last_write = Clock::now();
};

// Appends the visible text of new ids; returns the new text (stops at a stop string).
std::string feed(ServerContext& ctx, CompletionRun& run, size_t i, std::span<const int32_t> ids) {
  TextState& t = run.texts[i];
  if (t.stopped) return "";
  const size_t before = t.text.size();
  for (int32_t id : ids) {
    if (!ctx.tok) t.text += " " + std::to_string(id);
    else if (!ctx.tok->is_special(id)) t.text += t.decoder->push(id);
  }
  for (const std::string& s : run.sr.stop) {
    const size_t from = before >= s.size() ? before - s.size() + 1 : 0;
    const size_t at = t.text.find(s, from);
    if (at == std::string::npos) continue;
    t.text.resize(at);
    t.stopped = true;
    end_early(run.choices[i], FinishReason::Stop);
    return at > before ? t.text.substr(before) : "";
  }
  return t.text.substr(before);
}

Json usage_json(const CompletionRun& run) {
  size_t completion = 0;
  for (const Choice& c : run.choices) completion += c.tokens.size();
  return {{"prompt_tokens", run.prompt_tokens}, {"total_tokens", run.prompt_tokens + completion},
          {"completion_tokens", completion}};
}

Json chunk(const CompletionRun& run, size_t i, const std::string& text, const char* finish) {
  Json choice = {{"index", i}, {"text", text}, {"logprobs", nullptr}};
  choice["finish_reason"] = finish ? Json(finish) : Json(nullptr);
  return {{"id", run.id}, {"object", "text_completion"}, {"created", run.created}, {"model", run.model},
          {"choices", Json::array({std::move(choice)})}};
}

const char* finish_name(const Choice& c) { return c.reason == FinishReason::Length ? "length" : "stop"; }

void stream_response(ServerContext& ctx, std::shared_ptr<CompletionRun> run, httplib::Response& res) {
  serve_stream(ctx, res, run, [&ctx, run](std::string& out) {
    if (!run->echo_sent) {
      for (size_t i = 0; i < run->texts.size(); ++i)
        if (!run->texts[i].echo.empty()) out += sse_data(chunk(*run, i, run->texts[i].echo, nullptr).dump());
      run->echo_sent = true;
    }
    poll_choices(
        run->choices, std::chrono::milliseconds(100),
        [&](size_t i, std::span<const int32_t> ids) {
          const size_t offset = run->texts[i].text.size();
          const std::string text = feed(ctx, *run, i, ids);
          const bool stopped = run->texts[i].stopped;
          const bool lp = run->sr.params.logprobs >= 0;
          if (text.empty() && !stopped && !lp) return;
          Json c = chunk(*run, i, text, stopped ? "stop" : nullptr);
          if (lp) {
            const std::vector<TokenLogprob>& all = run->choices[i].logprobs;
            const size_t n = std::min(ids.size(), all.size());
            c["choices"][0]["logprobs"] = completion_logprobs(ctx.tok.get(), ids.subspan(ids.size() - n),
                                                              std::span(all).subspan(all.size() - n), offset);
          }
          out += sse_data(c.dump());
        },
        [&](size_t i) {
          const Choice& c = run->choices[i];
          if (c.reason == FinishReason::Error || c.reason == FinishReason::Cancelled)
            out += sse_data(server_error(c.error.empty() ? "the request was cancelled" : c.error).body().dump());
          else
            out += sse_data(chunk(*run, i, "", finish_name(c)).dump());
        });
    record_metrics(ctx, run->choices);
    if (all_finished(run->choices)) {
      if (run->sr.include_usage) {
        Json u = {{"id", run->id}, {"object", "text_completion"}, {"created", run->created}, {"model", run->model},
                  {"choices", Json::array()}, {"usage", usage_json(*run)}};
        out += sse_data(u.dump());
      }
      out += "data: [DONE]\n\n";
      run->done = true;
    }
  });
}

}  // namespace

void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto parsed = parse_body(req.body, ctx.args.max_json_depth);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
  const Json& body = std::get<Json>(parsed);
  if (auto e = check_model(body, ctx.args.served_model_name)) return send_error(res, *e);
  auto run = std::make_shared<CompletionRun>();
  run->model = ctx.args.served_model_name;
  if (auto e = parse_sampling(body, Endpoint::Completions, run->sr)) return send_error(res, *e);
  if (auto e = check_unsupported(body, Endpoint::Completions)) return send_error(res, *e);
  const auto echo = echo_of(body, run->sr);
  if (auto* e = std::get_if<ApiError>(&echo)) return send_error(res, *e);
  auto prompts = prompts_of(body, ctx.tok.get(), ctx.engine->model().config.vocab_size, std::get<bool>(echo));
  if (auto* e = std::get_if<ApiError>(&prompts)) return send_error(res, *e);
  run->sr.params.eos_ids = end_token_ids(ctx);
  const SamplingRequest base = run->sr;
  for (const Prompt& prompt : std::get<0>(prompts)) {
    const std::vector<int32_t>& ids = prompt.ids;
    SamplingRequest sr = base;
    if (auto e = resolve_max_tokens(ctx, ids.size(), sr)) {
      for (Choice& c : run->choices) c.stream->cancel();
      return send_error(res, *e);
    }
    auto submitted = submit_choices(ctx, sr, ids);
    if (auto* e = std::get_if<ApiError>(&submitted)) {
      for (Choice& c : run->choices) c.stream->cancel();
      return send_error(res, *e);
    }
    for (Choice& c : std::get<std::vector<Choice>>(submitted)) {
      run->choices.push_back(std::move(c));
      run->texts.push_back({.decoder = ctx.tok ? std::make_unique<StreamDecoder>(ctx.tok) : nullptr, .echo = prompt.text});
    }
    run->prompt_tokens += ids.size();
  }
  if (run->sr.stream) return stream_response(ctx, run, res);
  wait_for_choices(run->choices, [&](size_t i, std::span<const int32_t> ids) { feed(ctx, *run, i, ids); }, [](size_t) {});
  record_metrics(ctx, run->choices);
  Json choices = Json::array();
  for (size_t i = 0; i < run->choices.size(); ++i) {
    const Choice& c = run->choices[i];
    if (c.reason == FinishReason::Error || c.reason == FinishReason::Cancelled)
      return send_error(res, server_error(c.error.empty() ? "the request was cancelled" : c.error));
    TextState& t = run->texts[i];
    if (t.decoder && !t.stopped) t.text += t.decoder->flush();
    Json choice = {{"index", i}, {"text", t.echo + t.text}, {"logprobs", nullptr}, {"finish_reason", finish_name(c)}};
    if (run->sr.return_token_ids) choice["token_ids"] = c.tokens;
    if (run->sr.params.logprobs >= 0) choice["logprobs"] = completion_logprobs(ctx.tok.get(), c.tokens, c.logprobs, 0);
    choices.push_back(std::move(choice));
  }
  send_json(res, 200,
            {{"id", run->id}, {"object", "text_completion"}, {"created", run->created}, {"model", run->model},
             {"choices", std::move(choices)}, {"usage", usage_json(*run)}});
}

}  // namespace mx::server
