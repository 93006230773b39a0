// The small routes: GET /health, GET /v1/models, POST /tokenize, POST /detokenize, GET /metrics,
// GET /metrics.json and GET /server_info (the model, its dispatch paths, the start-up settings).
#include "kernels/ops.h"
#include "server/chat_prompt.h"
#include "server/handlers.h"
#include "server/request_params.h"
#include "tokenizer/harmony_parser.h"

namespace mx::server {

void handle_health(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  if (!ctx.ready) return send_json(res, 503, {{"status", "loading"}});
  res.status = 200;
}

namespace {
Json model_object(const ServerContext& ctx) {
  return {{"id", ctx.args.served_model_name}, {"object", "model"}, {"created", ctx.created},
          {"owned_by", "mxserve"}, {"root", ctx.engine->model().path.string()}, {"parent", nullptr},
          {"max_model_len", ctx.engine->max_model_len()}};
}
}  // namespace

void handle_models(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  send_json(res, 200, {{"object", "list"}, {"data", Json::array({model_object(ctx)})}});
}

void handle_model(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  if (id != ctx.args.served_model_name) {
    ApiError e{.status = 404, .message = "The model '" + id + "' does not exist; this server serves '" +
                                         ctx.args.served_model_name + "'.",
               .param = "model", .code = "model_not_found"};
    return send_error(res, e);
  }
  send_json(res, 200, model_object(ctx));
}

void handle_tokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto parsed = parse_body(req.body, ctx.args.max_json_depth);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
  const Json& body = std::get<Json>(parsed);
  if (auto e = check_model(body, ctx.args.served_model_name)) return send_error(res, *e);
  if (!ctx.tok) return send_error(res, bad_request("this model has no tokenizer.json"));
  bool strs = false;
  if (auto it = body.find("return_token_strs"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return send_error(res, bad_request("'return_token_strs' must be a boolean", "return_token_strs"));
    strs = it->get<bool>();
  }
  std::vector<int32_t> ids;
  if (body.contains("messages")) {
    auto r = chat_prompt_ids(ctx, body);
    if (auto* e = std::get_if<ApiError>(&r)) return send_error(res, *e);
    ids = std::move(std::get<std::vector<int32_t>>(r));
  } else {
    auto it = body.find("prompt");
    if (it == body.end() || !it->is_string()) return send_error(res, bad_request("'prompt' must be a string", "prompt"));
    auto r = ctx.tok->encode(it->get<std::string>());
    if (!r.ok()) return send_error(res, bad_request(r.status(), "prompt", {}));
    ids = *r;
  }
  Json out = {{"count", ids.size()}, {"max_model_len", ctx.engine->max_model_len()}, {"tokens", ids}};
  if (strs) {
    Json strs = Json::array();
    for (int32_t id : ids) strs.push_back(sanitize_utf8(ctx.tok->token_bytes(id)));
    out["token_strs"] = strs;
  }
  send_json(res, 200, out);
}

void handle_detokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto parsed = parse_body(req.body, ctx.args.max_json_depth);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
  const Json& body = std::get<Json>(parsed);
  if (auto e = check_model(body, ctx.args.served_model_name)) return send_error(res, *e);
  if (!ctx.tok) return send_error(res, bad_request("this model has no tokenizer.json"));
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array()) return send_error(res, bad_request("'tokens' must be a list of token ids", "tokens"));
  std::vector<int32_t> ids;
  for (const Json& x : *it) {
    const auto id = token_id(x, ctx.tok->vocab_size());
    if (!id) return send_error(res, bad_request("'tokens' must be a list of token ids in the vocabulary", "tokens"));
    ids.push_back(*id);
  }
  send_json(res, 200, {{"prompt", sanitize_utf8(ctx.tok->decode(ids))}});
}

void handle_metrics(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  res.set_content(ctx.metrics.render(ctx.args.served_model_name, ctx.engine->stats()), "text/plain; version=0.0.4");
}

void handle_metrics_json(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  send_json(res, 200, ctx.metrics.json(ctx.args.served_model_name, ctx.engine->stats()));
}

void handle_server_info(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  const Model& m = ctx.engine->model();
  const ModelConfig& c = m.config;
  int sliding = 0;
  for (auto t : c.layer_types) sliding += t == AttentionType::Sliding;
  const Json config = {{"num_hidden_layers", c.num_hidden_layers}, {"sliding_layers", sliding},
                       {"sliding_window", c.sliding_window}, {"hidden_size", c.hidden_size},
                       {"num_local_experts", c.num_local_experts}, {"num_experts_per_tok", c.num_experts_per_tok},
                       {"intermediate_size", c.intermediate_size}, {"num_attention_heads", c.num_attention_heads},
                       {"num_key_value_heads", c.num_key_value_heads}, {"head_dim", c.head_dim},
                       {"vocab_size", c.vocab_size}, {"max_position_embeddings", c.max_position_embeddings},
                       {"experts_dtype", c.mxfp4_experts ? "mxfp4" : "bf16"}};
  send_json(res, 200,
            {{"model", ctx.args.served_model_name}, {"root", m.path.string()},
             {"backend", m.weights.device == Device::CUDA ? "cuda" : "cpu"}, {"weight_bytes", m.weights.bytes},
             {"max_model_len", ctx.engine->max_model_len()}, {"created", ctx.created}, {"config", config},
             {"dispatch", ops::dispatch_summary(ctx.engine->context())}, {"kv_layout", ctx.engine->kv_summary()},
             {"settings", ctx.args.settings}});
}

}  // namespace mx::server
