// The route handlers of the server, one per endpoint, over the shared ServerContext.
#pragma once

#include <httplib.h>

#include "server/server.h"

namespace mx::server {

void handle_health(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_models(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_model(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);  // /v1/models/{id}
void handle_tokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_detokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_metrics(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_metrics_json(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_server_info(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_chat(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_responses(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_response_get(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);     // /v1/responses/{id}
void handle_response_delete(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);  // /v1/responses/{id}
// GET /, /dashboard, /assets/...: the embedded web pages and their files (web_assets.h).
void handle_web_asset(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace mx::server
