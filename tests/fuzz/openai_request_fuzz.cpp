// Fuzz target: an OpenAI request body -> sampling parameters and prompt token ids, as the server
// maps it before anything reaches the engine. The first byte picks the endpoint (chat,
// completions, responses; a responses body first goes through the stored state: a store holding
// one conversation, so previous_response_id, item_reference and encrypted_content are reached);
// the rest is the body text. Every request must end in ids or in a
// 4xx whose message carries no source location; nothing may throw.
#include "fuzz_util.h"
#include "server/chat_prompt.h"
#include "server/completion_prompt.h"
#include "server/response_store.h"
#include "server/responses_input.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace mx::server;

std::string_view g_body;  // the request text of the current input

// A 4xx whose message names no source location of ours ("(src/x.cpp:12)"), unless the client
// wrote that text itself (messages quote what was sent).
void check_error(const ApiError& e) {
  FUZZ_CHECK(e.status >= 400 && e.status < 500);
  FUZZ_CHECK(!e.message.empty());
  const std::string_view m = e.message;
  for (size_t at = m.find("(src/"); at != std::string_view::npos; at = m.find("(src/", at + 1)) {
    const size_t close = m.find(')', at), colon = m.rfind(':', close);
    if (close == std::string_view::npos || colon == std::string_view::npos || colon < at) continue;
    const std::string_view line = m.substr(colon + 1, close - colon - 1), location = m.substr(at, close + 1 - at);
    const bool looks_like_location = !line.empty() && line.find_first_not_of("0123456789") == std::string_view::npos &&
                                     location.find(' ') == std::string_view::npos;
    FUZZ_CHECK(!looks_like_location || g_body.find(location) != std::string_view::npos);
  }
}

// The prompt of a chat body (responses are mapped to one first).
void chat_prompt(const ServerContext& ctx, const Json& body) {
  auto ids = chat_prompt_ids(ctx, body);
  if (auto* e = std::get_if<ApiError>(&ids)) return check_error(*e);
  for (int32_t id : std::get<std::vector<int32_t>>(ids)) FUZZ_CHECK(id >= 0 && id < ctx.tok->vocab_size());
}

void completions(const ServerContext& ctx, const Json& body, const SamplingRequest& sr) {
  const auto echo = echo_of(body, sr);
  if (auto* e = std::get_if<ApiError>(&echo)) return check_error(*e);
  auto prompts = prompts_of(body, ctx.tok.get(), ctx.tok->vocab_size(), std::get<bool>(echo));
  if (auto* e = std::get_if<ApiError>(&prompts)) return check_error(*e);
  for (const Prompt& p : std::get<std::vector<Prompt>>(prompts))
    for (int32_t id : p.ids) FUZZ_CHECK(id >= 0 && id < ctx.tok->vocab_size());
}

}  // namespace

MX_FUZZ_LOAD_TOKENIZER_FIRST()

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ServerContext ctx;  // only tok and args are read by the mapping
  if (!ctx.tok) ctx.tok = mx::fuzz::gptoss_tokenizer();
  mx::fuzz::Input in(data, size);
  const Endpoint endpoint = std::array{Endpoint::Chat, Endpoint::Completions, Endpoint::Responses}[in.byte() % 3];
  g_body = in.rest();
  auto parsed = parse_body(std::string(in.rest()));
  if (auto* e = std::get_if<ApiError>(&parsed)) return check_error(*e), 0;
  const Json& body = std::get<Json>(parsed);
  SamplingRequest sr;
  if (auto e = parse_sampling(body, endpoint, sr)) return check_error(*e), 0;
  if (auto e = check_unsupported(body, endpoint)) return check_error(*e), 0;
  if (endpoint == Endpoint::Completions) {
    completions(ctx, body, sr);
  } else if (endpoint == Endpoint::Chat) {
    chat_prompt(ctx, body);
  } else {
    static ResponseStore store({});
    [[maybe_unused]] static const bool filled = [] {
      store.put("resp_1", {{"id", "resp_1"}},
                Json::array({{{"id", "msg_1"}, {"type", "message"}, {"role", "user"}, {"content", "hi"}},
                             {{"id", "rs_1"}, {"type", "reasoning"}, {"encrypted_content", store.sealer().seal("thought")}},
                             {{"id", "fc_1"}, {"type", "function_call"}, {"call_id", "c1"}, {"name", "f"}, {"arguments", "{}"}}}));
      return true;
    }();
    Json expanded = body;
    if (auto e = store.expand_input(expanded)) return check_error(*e), 0;
    auto chat = responses_to_chat_body(expanded);
    if (auto* e = std::get_if<ApiError>(&chat)) return check_error(*e), 0;
    chat_prompt(ctx, std::get<Json>(chat));
  }
  return 0;
}
