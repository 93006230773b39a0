// /v1/responses request -> chat-completions body: input items (message, reasoning, function_call,
// function_call_output) become messages (reasoning attaches to the next assistant turn), function
// tools, tool_choice, reasoning.effort and text.format become their chat forms.
#include "server/responses_input.h"

#include <algorithm>
#include <optional>
#include <set>

namespace mx::server {
namespace {

std::string text_of(const Json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (content.is_array())
    for (const Json& part : content)
      if (part.is_object() && part.contains("text") && part["text"].is_string()) out += part["text"].get<std::string>();
  return out;
}

// Content parts gpt-oss can read are text; an image, file or audio part is a clear 400, not dropped.
std::optional<ApiError> check_text_parts(const Json& content, const std::string& where) {
  if (!content.is_array()) return std::nullopt;
  for (size_t j = 0; j < content.size(); ++j) {
    const Json& part = content[j];
    const std::string at = where + "[" + std::to_string(j) + "]";
    if (!part.is_object()) return bad_request("'" + at + "' must be a content part object", "input");
    const auto type = part.find("type");
    const std::string t = type != part.end() && type->is_string() ? type->get<std::string>() : "";
    static constexpr std::string_view kText[] = {"input_text", "output_text", "text", "summary_text", "reasoning_text"};
    if (std::find(std::begin(kText), std::end(kText), t) == std::end(kText))
      return bad_request("'" + at + "' is a '" + t + "' part: gpt-oss reads text only (input_text, output_text)", "input");
    const auto text = part.find("text");
    if (text == part.end() || !text->is_string()) return bad_request("'" + at + "' has no string text", "input");
  }
  return std::nullopt;
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
      if (auto e = check_text_parts(content, where + ".content")) return *e;
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
      // A string, or (newer clients) a list of content parts: their text, concatenated.
      const Json out = item.value("output", Json(""));
      if (out.is_array())
        if (auto e = check_text_parts(out, where + ".output")) return *e;
      messages.push_back({{"role", "tool"}, {"tool_call_id", call_id},
                          {"content", out.is_string() || out.is_array() ? text_of(out) : out.dump()}});
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

}  // namespace

std::variant<Json, ApiError> responses_to_chat_body(const Json& body) {
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
  if (auto it = body.find("max_reasoning_tokens"); it != body.end()) chat["max_reasoning_tokens"] = *it;
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
        if (f.contains("strict")) chat["response_format"]["json_schema"]["strict"] = f["strict"];
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

}  // namespace mx::server
