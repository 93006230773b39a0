// The HTTP server of `mxserve serve`: binds first (GET /health answers 503 while the model
// loads), then serves the OpenAI-compatible routes over one Engine. Handlers live in
// handlers_*.cpp and share a ServerContext.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/status.h"
#include "grammar/vocab_trie.h"
#include "runtime/scheduler.h"
#include "server/api_error.h"
#include "server/cors.h"
#include "server/http_limits.h"
#include "server/inflight.h"
#include "server/metrics.h"
#include "server/request_params.h"
#include "server/response_store.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace mx::server {

class HttpFront;

struct ServerArgs {
  std::string host = "0.0.0.0";
  int port = 8000;
  std::string api_key;            // empty: no auth
  std::string served_model_name;  // the name clients send as "model"
  int max_json_depth = kDefaultMaxJsonDepth;  // nesting of a request body (--max-json-depth)
  int max_tools = 128;                        // functions offered in one request (--max-tools), as OpenAI
  size_t max_prompt_bytes = 32u << 20;        // rendered chat prompt text, before encoding (--max-prompt-bytes)
  HttpLimits http;             // connections, header and body sizes, deadlines (http_limits.h)
  CorsPolicy cors;             // browser origins allowed to call the API (cors.h)
  ResponseStoreLimits responses_store;  // the Responses API's stored responses (response_store.h)
  int shutdown_timeout_s = 20;  // on stop, in-flight requests get this long before they are cancelled
  int max_reasoning_tokens = -1;  // analysis tokens per answer at most (-1: no limit; a request may set its own)
  nlohmann::ordered_json settings = nlohmann::ordered_json::object();  // start-up settings shown by GET /server_info
};

struct ServerContext {
  ServerArgs args;
  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};  // stopping: new requests get 503
  std::unique_ptr<Engine> engine;
  std::shared_ptr<const Tokenizer> tok;
  Metrics metrics;
  InflightRequests inflight;
  std::unique_ptr<ResponseStore> responses;
  int64_t created = 0;  // unix seconds at start
  // Guided decoding's view of the vocabulary, built on first use (guided.cpp).
  mutable std::once_flag vocab_once;
  mutable std::shared_ptr<const grammar::VocabTrie> vocab;
  mutable Status vocab_status;
};

// Response helpers shared by the handlers.
void send_json(httplib::Response& res, int status, const nlohmann::ordered_json& body);
void send_error(httplib::Response& res, const ApiError& e);
int64_t unix_now();
std::string random_id(const std::string& prefix);  // prefix + 24 random alphanumerics

class Server {
 public:
  explicit Server(ServerArgs args);
  ~Server();
  // Binds host:port and starts answering on a background thread.
  Status start();
  // The model is loaded: routes start serving (tok may be null: token-id prompts only).
  // `settings`: the start-up settings known only once the model is loaded (KV blocks, ...),
  // added to ServerArgs::settings for GET /server_info.
  void set_ready(std::unique_ptr<Engine> engine, std::shared_ptr<const Tokenizer> tok,
                 const nlohmann::ordered_json& settings = nlohmann::ordered_json::object());
  // Stops accepting, lets in-flight requests finish for up to shutdown_timeout_s, cancels the
  // rest, and stops the engine.
  void stop();
  int port() const { return bound_port_; }

 private:
  void add_routes();

  std::unique_ptr<HttpFront> http_;
  ServerContext ctx_;
  std::thread thread_;
  int bound_port_ = 0;
};

}  // namespace mx::server
