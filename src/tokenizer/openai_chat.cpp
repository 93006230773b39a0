// OpenAI chat request -> harmony conversation: system message (effort, date), developer message
// (system/developer instructions + function tools), turns with reasoning, tool calls and results.
#include "tokenizer/openai_chat.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

namespace mx::openai {

namespace {

using harmony::Message;
using harmony::Role;
using ojson = nlohmann::ordered_json;

// Text of a content field: a string, null, or a list of text parts ({"type": "text", "text": ...}).
Result<std::string> content_text(const ojson& msg, const std::string& where) {
  auto it = msg.find("content");
  if (it == msg.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  MX_CHECK(it->is_array(), "{}.content must be a string or a list of text parts", where);
  std::string out;
  for (size_t i = 0; i < it->size(); ++i) {
    const ojson& part = (*it)[i];
    if (part.is_string()) {
      out += part.get<std::string>();
      continue;
    }
    MX_CHECK(part.is_object(), "{}.content[{}] must be an object", where, i);
    const std::string type = part.contains("type") && part["type"].is_string() ? part["type"].get<std::string>() : "";
    MX_CHECK(type == "text" || type == "input_text" || type == "output_text",
             "{}.content[{}]: content part type '{}' is not supported (text only)", where, i, type);
    MX_CHECK(part.contains("text") && part["text"].is_string(), "{}.content[{}].text must be a string", where, i);
    out += part["text"].get<std::string>();
  }
  return out;
}

Result<std::optional<std::string>> opt_string(const ojson& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  MX_CHECK(it->is_string(), "{}.{} must be a string", where, key);
  return std::optional<std::string>(it->get<std::string>());
}

Result<harmony::ToolDescription> function_tool(const ojson& tool, size_t i) {
  const std::string where = fmt::format("tools[{}]", i);
  MX_CHECK(tool.is_object(), "{} must be an object", where);
  MX_ASSIGN(auto type, opt_string(tool, "type", where));
  MX_CHECK(type.value_or("function") == "function", "{}: tool type '{}' is not supported", where, *type);
  MX_CHECK(tool.contains("function") && tool["function"].is_object(), "{}.function must be an object", where);
  const ojson& fn = tool["function"];
  MX_ASSIGN(auto name, opt_string(fn, "name", where + ".function"));
  MX_CHECK(name && !name->empty(), "{}.function.name is required", where);
  MX_CHECK(valid_function_name(*name), "{}.function.name must be 1 to 64 letters, digits, '_' or '-'", where);
  MX_ASSIGN(auto description, opt_string(fn, "description", where + ".function"));
  harmony::ToolDescription out{.name = *name, .description = description.value_or(""), .parameters = std::nullopt};
  if (auto p = fn.find("parameters"); p != fn.end() && !p->is_null()) {
    MX_CHECK(p->is_object(), "{}.function.parameters must be a JSON Schema object", where);
    MX_CHECK(harmony::json_depth(*p) <= harmony::kMaxSchemaDepth,
             "{}.function.parameters nests deeper than {} levels", where, harmony::kMaxSchemaDepth);
    // An object schema without properties takes no arguments: render "() => any".
    const bool empty = p->contains("properties") && (*p)["properties"].is_object() && (*p)["properties"].empty();
    if (!empty) out.parameters = *p;
  }
  return out;
}

// tools + tool_choice -> the functions to offer and the choice.
Status read_tools(const ojson& body, ChatPrompt& prompt, std::vector<harmony::ToolDescription>& tools) {
  if (auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    MX_CHECK(it->is_array(), "tools must be a list");
    for (size_t i = 0; i < it->size(); ++i) {
      MX_ASSIGN(harmony::ToolDescription t, function_tool((*it)[i], i));
      tools.push_back(std::move(t));
    }
  }
  auto choice = body.find("tool_choice");
  if (choice != body.end() && !choice->is_null()) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      static const std::map<std::string, ToolChoice> kChoices = {
          {"auto", ToolChoice::Auto}, {"none", ToolChoice::None}, {"required", ToolChoice::Required}};
      auto found = kChoices.find(c);
      MX_CHECK(found != kChoices.end(), "tool_choice '{}' is not one of auto, none, required", c);
      prompt.tool_choice = found->second;
    } else {
      MX_CHECK(choice->is_object() && choice->contains("function") && (*choice)["function"].is_object(),
               "tool_choice must be a string or {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}");
      MX_ASSIGN(auto name, opt_string((*choice)["function"], "name", "tool_choice.function"));
      MX_CHECK(name.has_value(), "tool_choice.function.name is required");
      MX_CHECK(valid_function_name(*name), "tool_choice.function.name must be 1 to 64 letters, digits, '_' or '-'");
      const bool known = std::any_of(tools.begin(), tools.end(), [&](const auto& t) { return t.name == *name; });
      MX_CHECK(known, "tool_choice names function '{}' that is not in tools", *name);
      prompt.tool_choice = ToolChoice::Named;
      prompt.forced_tool = *name;
    }
  }
  MX_CHECK(prompt.tool_choice != ToolChoice::Required || !tools.empty(), "tool_choice 'required' needs tools");
  if (prompt.tool_choice == ToolChoice::None) tools.clear();
  if (prompt.tool_choice == ToolChoice::Named)
    std::erase_if(tools, [&](const auto& t) { return t.name != *prompt.forced_tool; });
  for (const auto& t : tools) prompt.tool_names.push_back(t.name);
  return ok_status();
}

Message make(Role role, std::optional<std::string> channel, std::string text) {
  Message m = harmony::text_message(role, std::move(text));
  m.channel = std::move(channel);
  return m;
}

struct TurnState {
  std::map<std::string, std::string> call_names;  // tool_call_id -> function name
  size_t last_user = 0;                           // index of the last user message
};

Status add_assistant(const ojson& msg, size_t index, const std::string& where, TurnState& state,
                     std::vector<Message>& out) {
  MX_ASSIGN(std::string content, content_text(msg, where));
  MX_ASSIGN(auto reasoning, opt_string(msg, "reasoning_content", where));
  if (!reasoning) {
    MX_ASSIGN(reasoning, opt_string(msg, "reasoning", where));
  }
  const ojson calls = msg.contains("tool_calls") && !msg["tool_calls"].is_null() ? msg["tool_calls"] : ojson::array();
  MX_CHECK(calls.is_array(), "{}.tool_calls must be a list", where);
  if (calls.empty()) {  // a finished answer: its reasoning is dropped (harmony CoT rule)
    if (!content.empty()) out.push_back(make(Role::Assistant, "final", std::move(content)));
    return ok_status();
  }
  // Reasoning that led to tool calls in the current turn stays, so the model can continue it.
  if (reasoning && !reasoning->empty() && index > state.last_user)
    out.push_back(make(Role::Assistant, "analysis", *reasoning));
  if (!content.empty()) out.push_back(make(Role::Assistant, "commentary", std::move(content)));
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string cw = fmt::format("{}.tool_calls[{}]", where, i);
    const ojson& call = calls[i];
    MX_CHECK(call.is_object() && call.contains("function") && call["function"].is_object(),
             "{} must have a function object", cw);
    MX_ASSIGN(auto name, opt_string(call["function"], "name", cw + ".function"));
    MX_CHECK(name && valid_function_name(*name), "{}.function.name must be 1 to 64 letters, digits, '_' or '-'", cw);
    std::string args = "{}";
    if (auto a = call["function"].find("arguments"); a != call["function"].end() && !a->is_null())
      args = a->is_string() ? a->get<std::string>() : a->dump();
    MX_ASSIGN(auto id, opt_string(call, "id", cw));
    if (id) state.call_names[*id] = *name;
    Message m = make(Role::Assistant, "commentary", std::move(args));
    m.recipient = "functions." + *name;
    m.content_type = "<|constrain|>json";
    out.push_back(std::move(m));
  }
  return ok_status();
}

Status add_tool_result(const ojson& msg, const std::string& where, const TurnState& state, std::vector<Message>& out) {
  MX_ASSIGN(std::string content, content_text(msg, where));
  MX_ASSIGN(auto id, opt_string(msg, "tool_call_id", where));
  MX_ASSIGN(auto name, opt_string(msg, "name", where));
  if (id) {
    auto it = state.call_names.find(*id);
    if (it != state.call_names.end()) name = it->second;
  }
  MX_CHECK(name.has_value(), "{}: tool_call_id '{}' matches no earlier assistant tool call", where, id.value_or(""));
  MX_CHECK(valid_function_name(*name), "{}.name must be 1 to 64 letters, digits, '_' or '-'", where);
  Message m = make(Role::Tool, "commentary", std::move(content));
  m.author.name = "functions." + *name;
  m.recipient = "assistant";
  out.push_back(std::move(m));
  return ok_status();
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

harmony::ReasoningEffort effort_of(const ojson& body) {
  if (auto it = body.find("reasoning_effort"); it != body.end() && it->is_string())
    return map_reasoning_effort(it->get<std::string>());
  if (auto it = body.find("reasoning"); it != body.end() && it->is_object() && it->contains("effort") &&
                                         (*it)["effort"].is_string())
    return map_reasoning_effort((*it)["effort"].get<std::string>());
  return harmony::ReasoningEffort::Medium;
}

Result<ChatPrompt> convert(const ojson& body, const ChatOptions& options) {
  MX_CHECK(body.is_object(), "the request body must be a JSON object");
  MX_CHECK(body.contains("messages") && body["messages"].is_array() && !body["messages"].empty(),
           "messages must be a non-empty list");
  const ojson& msgs = body["messages"];
  ChatPrompt prompt;
  prompt.effort = effort_of(body);
  std::vector<harmony::ToolDescription> tools;
  MX_TRY(read_tools(body, prompt, tools));

  TurnState state;
  for (size_t i = 0; i < msgs.size(); ++i)
    if (msgs[i].is_object() && msgs[i].value("role", ojson()) == "user") state.last_user = i;

  std::vector<std::string> instructions;  // leading system/developer messages
  std::vector<Message> turns;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const std::string where = fmt::format("messages[{}]", i);
    const ojson& msg = msgs[i];
    MX_CHECK(msg.is_object(), "{} must be an object", where);
    MX_ASSIGN(auto role, opt_string(msg, "role", where));
    MX_CHECK(role.has_value(), "{}.role is required", where);
    if (*role == "system" || *role == "developer") {
      MX_ASSIGN(std::string text, content_text(msg, where));
      if (turns.empty()) {
        instructions.push_back(std::move(text));
      } else {
        turns.push_back(harmony::developer_message({.instructions = std::move(text), .tools = {}}));
      }
    } else if (*role == "user") {
      MX_ASSIGN(std::string text, content_text(msg, where));
      turns.push_back(harmony::text_message(Role::User, std::move(text)));
    } else if (*role == "assistant") {
      MX_TRY(add_assistant(msg, i, where, state, turns));
    } else if (*role == "tool") {
      MX_TRY(add_tool_result(msg, where, state, turns));
    } else {
      return MX_ERROR("{}.role '{}' is not one of system, developer, user, assistant, tool", where, *role);
    }
  }

  harmony::SystemContent system{.model_identity = options.model_identity,
                                .reasoning_effort = prompt.effort,
                                .knowledge_cutoff = options.knowledge_cutoff,
                                .conversation_start_date = options.conversation_start_date,
                                .channel_config = harmony::ChannelConfig{},
                                .tools = {}};
  prompt.messages.push_back(harmony::system_message(std::move(system)));
  harmony::DeveloperContent dev;
  if (!instructions.empty()) {
    std::string joined;
    for (const std::string& s : instructions) joined += (joined.empty() ? "" : "\n\n") + s;
    dev.instructions = std::move(joined);
  }
  if (!tools.empty()) dev.tools.push_back({.name = "functions", .description = std::nullopt, .tools = std::move(tools)});
  if (dev.instructions || !dev.tools.empty()) prompt.messages.push_back(harmony::developer_message(std::move(dev)));
  for (Message& m : turns) prompt.messages.push_back(std::move(m));
  return prompt;
}

}  // namespace

bool valid_function_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

harmony::ReasoningEffort map_reasoning_effort(std::string_view value) {
  const std::string v = lower(std::string(value));
  if (v == "low" || v == "minimal" || v == "none") return harmony::ReasoningEffort::Low;
  if (v == "high" || v == "xhigh" || v == "max") return harmony::ReasoningEffort::High;
  return harmony::ReasoningEffort::Medium;
}

Result<ChatPrompt> chat_to_harmony(const nlohmann::ordered_json& body, const ChatOptions& options) {
  try {
    return convert(body, options);
  } catch (const std::exception&) {  // nlohmann type errors the checks above did not foresee
    return MX_ERROR("messages, tools or tool_choice hold a value of the wrong type");
  }
}

Result<ChatPrompt> chat_to_harmony(const nlohmann::json& body, const ChatOptions& options) {
  // Note: nlohmann::json sorts object keys, so schema properties arrive in name order here.
  return chat_to_harmony(nlohmann::ordered_json::parse(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)),
                         options);
}

}  // namespace mx::openai
