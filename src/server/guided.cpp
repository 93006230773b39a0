// attach_constraint: the answer targets (final message with or without a schema, tool calls with
// their parameter schemas) and the reasoning budget of a chat request -> HarmonyConstraint.
#include "server/guided.h"

#include <fmt/format.h>

#include "core/log.h"
#include "grammar/harmony_constraint.h"

namespace mx::server {
namespace {

using grammar::Schema;

Result<std::shared_ptr<const grammar::VocabTrie>> vocab_of(const ServerContext& ctx) {
  std::call_once(ctx.vocab_once, [&] {
    auto v = grammar::VocabTrie::build(*ctx.tok, int32_t(ctx.engine->model().config.vocab_size));
    if (v.ok()) ctx.vocab = v.value();
    else ctx.vocab_status = v.status();
  });
  if (!ctx.vocab) return ctx.vocab_status;
  return ctx.vocab;
}

std::shared_ptr<const Schema> any_object() {
  static const auto s = std::make_shared<const Schema>(grammar::any_json_object());
  return s;
}

// The final message's schema: null when response_format asks for none (text); an error when a
// strict schema cannot be enforced (a non-strict one falls back to the prompt alone).
struct FinalFormat {
  bool json = false;
  std::shared_ptr<const Schema> schema;
};
std::variant<FinalFormat, ApiError> final_format(const Json& body) {
  auto it = body.find("response_format");
  if (it == body.end() || !it->is_object() || !it->contains("type")) return FinalFormat{};
  const std::string type = (*it)["type"].is_string() ? (*it)["type"].get<std::string>() : "";
  if (type == "json_object") return FinalFormat{.json = true, .schema = any_object()};
  if (type != "json_schema") return FinalFormat{};
  const Json& js = (*it)["json_schema"];
  const bool strict = js.contains("strict") && js["strict"].is_boolean() && js["strict"].get<bool>();
  auto compiled = grammar::compile_schema(js["schema"]);
  if (compiled.ok()) return FinalFormat{.json = true, .schema = std::make_shared<const Schema>(std::move(compiled.value()))};
  if (strict)
    return bad_request(fmt::format("'response_format.json_schema.schema' cannot be enforced: {}", compiled.status().message()),
                       "response_format");
  log_warn("response_format schema not enforced (not strict): {}", compiled.status().message());
  return FinalFormat{};
}

// A tool's parameter schema (any object when it has none, or when a non-strict one cannot be enforced).
std::variant<std::shared_ptr<const Schema>, ApiError> tool_schema(const Json& body, const std::string& name) {
  const Json* fn = nullptr;
  if (auto tools = body.find("tools"); tools != body.end() && tools->is_array())
    for (const Json& t : *tools)
      if (t.is_object() && t.contains("function") && t["function"].is_object() && t["function"].value("name", "") == name)
        fn = &t["function"];
  if (!fn || !fn->contains("parameters") || !(*fn)["parameters"].is_object()) return any_object();
  auto compiled = grammar::compile_schema((*fn)["parameters"]);
  if (compiled.ok()) return std::make_shared<const Schema>(std::move(compiled.value()));
  if (fn->contains("strict") && (*fn)["strict"].is_boolean() && (*fn)["strict"].get<bool>())
    return bad_request(fmt::format("the parameters of tool '{}' cannot be enforced: {}", name, compiled.status().message()),
                       "tools");
  log_warn("tool '{}' parameters not enforced (not strict): {}", name, compiled.status().message());
  return any_object();
}

std::variant<int, ApiError> reasoning_budget(const ServerContext& ctx, const Json& body) {
  auto it = body.find("max_reasoning_tokens");
  if (it == body.end() || it->is_null()) return ctx.args.max_reasoning_tokens;
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > (int64_t(1) << 30))
    return bad_request("'max_reasoning_tokens' must be an integer in [0, 2^30]", "max_reasoning_tokens");
  return int(it->get<int64_t>());
}

}  // namespace

std::optional<ApiError> attach_constraint(const ServerContext& ctx, const Json& body, const openai::ChatPrompt& prompt,
                                          RequestParams& params) {
  auto format = final_format(body);
  if (auto* e = std::get_if<ApiError>(&format)) return *e;
  auto budget = reasoning_budget(ctx, body);
  if (auto* e = std::get_if<ApiError>(&budget)) return *e;
  const FinalFormat& f = std::get<FinalFormat>(format);
  const bool forced = prompt.tool_choice == openai::ToolChoice::Required || prompt.tool_choice == openai::ToolChoice::Named;
  grammar::HarmonyRule rule{.max_reasoning_tokens = std::get<int>(budget), .max_tokens = params.max_tokens};
  if (!f.json && !forced && rule.max_reasoning_tokens < 0) return std::nullopt;  // nothing to enforce
  if (!forced) rule.targets.push_back({.header = "final", .schema = f.schema});
  std::vector<std::string> tools;
  if (prompt.tool_choice == openai::ToolChoice::Named && prompt.forced_tool) tools = {*prompt.forced_tool};
  else if (prompt.tool_choice != openai::ToolChoice::None) tools = prompt.tool_names;
  for (const std::string& name : tools) {
    auto schema = tool_schema(body, name);
    if (auto* e = std::get_if<ApiError>(&schema)) return *e;
    rule.targets.push_back({.header = "commentary to=functions." + name, .tool = true,
                            .schema = std::get<std::shared_ptr<const Schema>>(schema)});
  }
  if (rule.targets.empty()) return bad_request("'tool_choice' requires a tool, and 'tools' offers none", "tool_choice");
  auto vocab = vocab_of(ctx);
  if (!vocab.ok()) return bad_request(vocab.status(), "response_format");
  auto c = grammar::HarmonyConstraint::create(vocab.value(), std::move(rule));
  if (!c.ok()) return bad_request(c.status(), "response_format");
  params.constraint = std::move(c.value());
  return std::nullopt;
}

}  // namespace mx::server
