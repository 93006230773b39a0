// Server: the HTTP front (http_front.h), the route table with the API key and Content-Type checks
// and the loading gate, the access log, the draining stop, and the response helpers.
#include "server/server.h"

#include <random>

#include "core/log.h"
#include "server/cors.h"
#include "server/handlers.h"
#include "server/http_front.h"
#include "server/request_checks.h"

namespace mx::server {

void send_json(httplib::Response& res, int status, const nlohmann::ordered_json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
  send_json(res, e.status, e.body());
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string random_id(const std::string& prefix) {
  static constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
  return id;
}

Server::Server(ServerArgs args) {
  ctx_.args = std::move(args);
  ctx_.created = unix_now();
  ctx_.responses = std::make_unique<ResponseStore>(ctx_.args.responses_store);
  http_ = std::make_unique<HttpFront>(ctx_.args.http);
}

Server::~Server() { stop(); }

void Server::add_routes() {
  ServerContext& ctx = ctx_;
  // Routes that need the engine answer 503 until the model is loaded.
  auto gated = [&ctx](void (*h)(ServerContext&, const httplib::Request&, httplib::Response&)) {
    return [&ctx, h](const httplib::Request& req, httplib::Response& res) {
      if (!ctx.ready) return send_error(res, {.status = 503, .message = "The model is still loading.", .type = "service_unavailable"});
      if (ctx.draining) return send_error(res, {.status = 503, .message = "The server is shutting down.", .type = "service_unavailable"});
      h(ctx, req, res);
    };
  };
  http_->Get("/health", [&ctx](const httplib::Request& req, httplib::Response& res) { handle_health(ctx, req, res); });
  // The web pages and their files need no engine: they answer while the model loads.
  for (const char* path : {"/", "/dashboard", R"(/assets/[A-Za-z0-9._/-]+)"})
    http_->Get(path, [&ctx](const httplib::Request& req, httplib::Response& res) { handle_web_asset(ctx, req, res); });
  http_->Get("/v1/models", gated(handle_models));
  http_->Get(R"(/v1/models/(.+))", gated(handle_model));
  http_->Post("/v1/chat/completions", gated(handle_chat));
  http_->Post("/v1/completions", gated(handle_completions));
  http_->Post("/v1/responses", gated(handle_responses));
  http_->Get(R"(/v1/responses/([^/]+))", gated(handle_response_get));
  http_->Delete(R"(/v1/responses/([^/]+))", gated(handle_response_delete));
  http_->Post("/tokenize", gated(handle_tokenize));
  http_->Post("/detokenize", gated(handle_detokenize));
  http_->Get("/metrics", gated(handle_metrics));
  http_->Get("/metrics.json", gated(handle_metrics_json));
  http_->Get("/server_info", gated(handle_server_info));
  // OPTIONS that is not a CORS preflight (those are answered before routing).
  http_->Options(R"(/.*)", [](const httplib::Request&, httplib::Response& res) {
    res.status = 204;
    res.set_header("Allow", kServedMethods);
  });
  // Before the body is read: a refused request costs no parsing. Every response carries the
  // request id and, for an allowed origin, the CORS headers; a preflight needs no API key.
  http_->set_pre_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    res.set_header("X-Request-Id", request_id_for(req.get_header_value("X-Request-Id")));
    const std::string origin = req.get_header_value("Origin");
    if (req.method == "OPTIONS" && !origin.empty() && req.has_header("Access-Control-Request-Method")) {
      const Preflight p = answer_preflight(ctx.args.cors, origin, req.get_header_value("Access-Control-Request-Method"),
                                           req.get_header_value("Access-Control-Request-Headers"));
      for (const Header& h : p.headers) res.set_header(h.name, h.value);
      if (p.error) send_error(res, *p.error);
      res.status = p.status;
      return httplib::Server::HandlerResponse::Handled;
    }
    for (const Header& h : cors_headers(ctx.args.cors, origin)) res.set_header(h.name, h.value);
    auto e = check_api_key(req, ctx.args.api_key);
    if (!e) e = check_content_type(req);
    if (!e) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, *e);
    return httplib::Server::HandlerResponse::Handled;
  });
  http_->set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.content_provider_) return httplib::Server::HandlerResponse::Unhandled;
    const int status = res.status;
    send_error(res, {.status = status, .message = status == 404 ? "Not found: " + req.method + " " + req.path
                                                                : "HTTP error " + std::to_string(status)});
    return httplib::Server::HandlerResponse::Handled;
  }));
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    log_error("request failed: {}", what);
    send_error(res, server_error("internal error"));  // the detail is in the log, not for the client
  });
  http_->set_logger([](const httplib::Request& req, const httplib::Response& res) {
    log_info("{}:{} - \"{} {} {}\" {}", req.remote_addr, req.remote_port, req.method, req.path, req.version, res.status);
  });
}

Status Server::start() {
  add_routes();
  MX_ASSIGN(bound_port_, http_->bind(ctx_.args.host, ctx_.args.port));
  thread_ = std::thread([this] { http_->run(); });
  return ok_status();
}

void Server::set_ready(std::unique_ptr<Engine> engine, std::shared_ptr<const Tokenizer> tok,
                       const nlohmann::ordered_json& settings) {
  for (const auto& [k, v] : settings.items()) ctx_.args.settings[k] = v;
  ctx_.engine = std::move(engine);
  ctx_.tok = std::move(tok);
  ctx_.ready = true;
}

void Server::stop() {
  if (!http_) return;
  http_->stop_accepting();
  if (thread_.joinable()) thread_.join();
  ctx_.draining = true;
  if (!http_->drain(std::chrono::seconds(ctx_.args.shutdown_timeout_s))) {
    log_warn("{} connection(s) still open after {} s: cancelling their requests", http_->open_connections(),
             ctx_.args.shutdown_timeout_s);
    ctx_.inflight.cancel_all();
    http_->abort_connections();
  }
  http_->wait_connections();
  http_.reset();
  ctx_.ready = false;
  ctx_.engine.reset();
}

}  // namespace mx::server
