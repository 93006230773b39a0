// prepare_chat_prompt: chat_to_harmony, response_format, render, tokenize, length checks, guided decoding.
#include "server/chat_prompt.h"

#include <fmt/format.h>

#include <ctime>

#include "server/generation.h"
#include "server/guided.h"
#include "server/http_front.h"
#include "tokenizer/openai_chat.h"

namespace mx::server {
namespace {

std::string today() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

// response_format: validated; a JSON schema is added to the developer instructions (harmony's
// "# Response Formats" section).
std::optional<ApiError> apply_response_format(const Json& body, openai::ChatPrompt& prompt) {
  auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return std::nullopt;
  const Json& rf = *it;
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
    return bad_request("'response_format' must be an object with a string 'type'", "response_format");
  const std::string type = rf["type"];
  if (type == "text") return std::nullopt;
  std::string section;
  if (type == "json_object") {
    section = "# Response Formats\n\nRespond with a single JSON object.";
  } else if (type == "json_schema") {
    const Json* js = rf.contains("json_schema") ? &rf["json_schema"] : nullptr;
    if (!js || !js->is_object() || !js->contains("schema") || !(*js)["schema"].is_object())
      return bad_request("'response_format.json_schema.schema' must be an object", "response_format");
    if (harmony::json_depth((*js)["schema"]) > harmony::kMaxSchemaDepth)
      return bad_request(fmt::format("'response_format.json_schema.schema' nests deeper than {} levels",
                                     harmony::kMaxSchemaDepth), "response_format");
    const auto name_it = js->find("name");
    if (name_it != js->end() && !name_it->is_null() && !name_it->is_string())
      return bad_request("'response_format.json_schema.name' must be a string", "response_format");
    const std::string name = name_it != js->end() && name_it->is_string() ? name_it->get<std::string>() : "response";
    if (!openai::valid_function_name(name))
      return bad_request("'response_format.json_schema.name' must be 1 to 64 letters, digits, '_' or '-'", "response_format");
    section = "# Response Formats\n\n## " + name + "\n\n" + (*js)["schema"].dump();
  } else {
    return bad_request("'response_format.type' must be one of text, json_object, json_schema", "response_format");
  }
  for (harmony::Message& m : prompt.messages) {
    if (auto* dev = std::get_if<harmony::DeveloperContent>(&m.content)) {
      dev->instructions = dev->instructions ? *dev->instructions + "\n\n" + section : section;
      return std::nullopt;
    }
  }
  harmony::DeveloperContent dev;
  dev.instructions = section;
  prompt.messages.insert(prompt.messages.begin() + 1, harmony::developer_message(dev));
  return std::nullopt;
}

struct RenderedChat {
  std::vector<int32_t> ids;
  openai::ChatPrompt prompt;
};

std::variant<RenderedChat, ApiError> render_chat(const ServerContext& ctx, const Json& body) {
  if (auto it = body.find("tools"); it != body.end() && it->is_array() && it->size() > size_t(ctx.args.max_tools))
    return bad_request(fmt::format("'tools' lists {} functions; at most {} are accepted", it->size(), ctx.args.max_tools), "tools");
  auto prompt = openai::chat_to_harmony(body, {.conversation_start_date = today()});
  if (!prompt.ok()) return bad_request(prompt.status(), "messages");
  if (auto e = apply_response_format(body, *prompt)) return *e;
  auto rendered = harmony::render_for_completion(prompt->messages, harmony::Role::Assistant);
  if (!rendered.ok()) return bad_request(rendered.status(), "messages");
  // Schemas render larger than they were sent (indentation): bound the text before encoding it.
  if (rendered->text_bytes() > ctx.args.max_prompt_bytes)
    return bad_request(fmt::format("The rendered prompt has {} bytes; at most {} are accepted (--max-prompt-bytes).",
                                   rendered->text_bytes(), ctx.args.max_prompt_bytes), "messages");
  if (client_gone()) return client_closed();  // rendering took long enough for the client to leave
  auto ids = rendered->tokens(*ctx.tok);
  if (!ids.ok()) return bad_request(ids.status(), "messages");
  if (client_gone()) return client_closed();
  return RenderedChat{.ids = std::move(ids).value(), .prompt = std::move(prompt).value()};
}

}  // namespace

std::variant<std::vector<int32_t>, ApiError> chat_prompt_ids(const ServerContext& ctx, const Json& body) {
  auto r = render_chat(ctx, body);
  if (auto* e = std::get_if<ApiError>(&r)) return *e;
  return std::move(std::get<RenderedChat>(r).ids);
}

std::optional<ApiError> prepare_chat_prompt(const ServerContext& ctx, const Json& body, SamplingRequest& sr,
                                            std::vector<int32_t>& prompt_ids) {
  auto r = render_chat(ctx, body);
  if (auto* e = std::get_if<ApiError>(&r)) return *e;
  RenderedChat& chat = std::get<RenderedChat>(r);
  prompt_ids = std::move(chat.ids);
  if (auto e = resolve_max_tokens(ctx, prompt_ids.size(), sr)) return e;
  sr.params.eos_ids = end_token_ids(ctx);
  return attach_constraint(ctx, body, chat.prompt, sr.params);
}

}  // namespace mx::server
