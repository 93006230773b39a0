// Conversion between harmony messages and the fixture JSON form, and the fixture-case drivers
// (render by kind, parse input) shared by `mxserve harmony` and the tests.
#include "tokenizer/harmony_json.h"

#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer.h"

namespace mx::harmony {

namespace {

// Optional string field: absent or null -> nullopt; another type is an error.
Result<std::optional<std::string>> opt_string(const ojson& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  MX_CHECK(it->is_string(), "field '{}' must be a string or null", key);
  return std::optional<std::string>(it->get<std::string>());
}

Result<bool> opt_bool(const ojson& j, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  MX_CHECK(it->is_boolean(), "field '{}' must be a boolean", key);
  return it->get<bool>();
}

Result<ToolDescription> tool_from_json(const ojson& j) {
  MX_CHECK(j.is_object(), "a tool must be an object");
  ToolDescription t;
  MX_ASSIGN(auto name, opt_string(j, "name"));
  MX_CHECK(name.has_value(), "a tool needs a name");
  t.name = *name;
  MX_ASSIGN(auto description, opt_string(j, "description"));
  t.description = description.value_or("");
  if (auto it = j.find("parameters"); it != j.end() && !it->is_null()) {
    MX_CHECK(it->is_object(), "parameters of tool '{}' must be a JSON Schema object", t.name);
    t.parameters = *it;
  }
  return t;
}

template <typename T>
Status set_opt_string(const ojson& j, const char* key, T& field) {
  if (!j.contains(key)) return ok_status();  // keep the default
  MX_ASSIGN(field, opt_string(j, key));
  return ok_status();
}

Result<std::vector<ToolNamespace>> namespaces_from_json(const ojson& j) {
  std::vector<ToolNamespace> out;
  if (j.is_null()) return out;
  MX_CHECK(j.is_array(), "tools must be a list of namespaces");
  for (const ojson& ns : j) {
    MX_ASSIGN(ToolNamespace one, namespace_from_json(ns));
    out.push_back(std::move(one));
  }
  return out;
}

Result<SystemContent> system_from_json(const ojson& j) {
  MX_CHECK(j.is_object(), "system_content must be an object");
  SystemContent c;
  MX_TRY(set_opt_string(j, "model_identity", c.model_identity));
  MX_TRY(set_opt_string(j, "knowledge_cutoff", c.knowledge_cutoff));
  MX_TRY(set_opt_string(j, "conversation_start_date", c.conversation_start_date));
  if (j.contains("reasoning_effort")) {
    MX_ASSIGN(auto effort, opt_string(j, "reasoning_effort"));
    c.reasoning_effort.reset();
    if (effort) {
      c.reasoning_effort = effort_from_name(*effort);
      MX_CHECK(c.reasoning_effort.has_value(), "unknown reasoning_effort '{}'", *effort);
    }
  }
  if (auto it = j.find("channel_config"); it != j.end()) {
    c.channel_config.reset();
    if (!it->is_null()) {
      MX_CHECK(it->is_object(), "channel_config must be an object");
      ChannelConfig cc;
      if (auto v = it->find("valid_channels"); v != it->end()) {
        MX_CHECK(v->is_array(), "valid_channels must be a list");
        cc.valid_channels.clear();
        for (const ojson& ch : *v) {
          MX_CHECK(ch.is_string(), "valid_channels must hold strings");
          cc.valid_channels.push_back(ch.get<std::string>());
        }
      }
      if (auto v = it->find("channel_required"); v != it->end()) {
        MX_CHECK(v->is_boolean(), "channel_required must be a boolean");
        cc.channel_required = v->get<bool>();
      }
      c.channel_config = std::move(cc);
    }
  }
  if (auto it = j.find("tools"); it != j.end()) {
    MX_ASSIGN(c.tools, namespaces_from_json(*it));
  }
  return c;
}

Result<DeveloperContent> developer_from_json(const ojson& j) {
  MX_CHECK(j.is_object(), "developer_content must be an object");
  DeveloperContent c;
  MX_ASSIGN(c.instructions, opt_string(j, "instructions"));
  if (auto it = j.find("tools"); it != j.end()) {
    MX_ASSIGN(c.tools, namespaces_from_json(*it));
  }
  return c;
}

ojson opt_json(const std::optional<std::string>& s) { return s ? ojson(*s) : ojson(nullptr); }

}  // namespace

Result<ojson> read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  MX_CHECK(in.good(), "cannot open {}", path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  ojson j = ojson::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  MX_CHECK(!j.is_discarded(), "{} is not valid JSON", path.string());
  return j;
}

Result<ToolNamespace> namespace_from_json(const ojson& j) {
  MX_CHECK(j.is_object(), "a tool namespace must be an object");
  MX_ASSIGN(auto name, opt_string(j, "name"));
  MX_CHECK(name.has_value(), "a tool namespace needs a name");
  MX_ASSIGN(auto builtin, opt_string(j, "builtin"));
  const bool has_tools = j.contains("tools") && !j["tools"].is_null();
  if (builtin && !has_tools) {  // {"builtin": "browser"} alone: the library's namespace
    if (*builtin == "browser") return browser_namespace();
    if (*builtin == "python") return python_namespace();
    return MX_ERROR("unknown builtin namespace '{}'", *builtin);
  }
  ToolNamespace ns{.name = *name, .description = std::nullopt, .tools = {}};
  MX_ASSIGN(ns.description, opt_string(j, "description"));
  if (has_tools) {
    MX_CHECK(j["tools"].is_array(), "tools of namespace '{}' must be a list", ns.name);
    for (const ojson& t : j["tools"]) {
      MX_ASSIGN(ToolDescription tool, tool_from_json(t));
      ns.tools.push_back(std::move(tool));
    }
  }
  return ns;
}

Result<Message> message_from_json(const ojson& j) {
  MX_CHECK(j.is_object(), "a message must be an object");
  MX_ASSIGN(auto role_name_str, opt_string(j, "role"));
  MX_CHECK(role_name_str.has_value(), "a message needs a role");
  const auto role = role_from_name(*role_name_str);
  MX_CHECK(role.has_value(), "unknown role '{}'", *role_name_str);
  Message m;
  m.author.role = *role;
  MX_ASSIGN(m.author.name, opt_string(j, "name"));
  MX_ASSIGN(m.recipient, opt_string(j, "recipient"));
  MX_ASSIGN(m.channel, opt_string(j, "channel"));
  MX_ASSIGN(m.content_type, opt_string(j, "content_type"));
  if (auto it = j.find("system_content"); it != j.end() && !it->is_null()) {
    MX_ASSIGN(SystemContent c, system_from_json(*it));
    m.content = std::move(c);
  } else if (auto dt = j.find("developer_content"); dt != j.end() && !dt->is_null()) {
    MX_ASSIGN(DeveloperContent c, developer_from_json(*dt));
    m.content = std::move(c);
  } else {
    MX_ASSIGN(auto text, opt_string(j, "content"));
    m.content = text.value_or("");
  }
  return m;
}

Result<std::vector<Message>> messages_from_json(const ojson& j) {
  MX_CHECK(j.is_array(), "messages must be a list");
  std::vector<Message> out;
  for (size_t i = 0; i < j.size(); ++i) {
    auto m = message_from_json(j[i]);
    if (!m.ok()) return m.status().with_context("message " + std::to_string(i));
    out.push_back(std::move(m).value());
  }
  return out;
}

ojson message_to_json(const Message& m) {
  ojson j = ojson::object();
  j["role"] = std::string(role_name(m.author.role));
  j["name"] = opt_json(m.author.name);
  j["channel"] = opt_json(m.channel);
  j["recipient"] = opt_json(m.recipient);
  j["content_type"] = opt_json(m.content_type);
  j["content"] = m.text();
  return j;
}

ojson messages_to_json(std::span<const Message> messages) {
  ojson out = ojson::array();
  for (const Message& m : messages) out.push_back(message_to_json(m));
  return out;
}

Result<Rendered> render_case(const ojson& c) {
  MX_CHECK(c.is_object() && c.contains("kind") && c["kind"].is_string(), "a case needs a string 'kind'");
  const std::string kind = c["kind"].get<std::string>();
  MX_ASSIGN(std::vector<Message> messages, messages_from_json(c.contains("messages") ? c["messages"] : ojson::array()));
  const ojson options = c.contains("options") ? c["options"] : ojson::object();
  MX_CHECK(options.is_object(), "case options must be an object");
  ConversationOptions conv;
  MX_ASSIGN(const bool drop_analysis, opt_bool(options, "auto_drop_analysis", true));
  conv.drop_analysis = drop_analysis ? DropAnalysis::BeforeFirstFinal : DropAnalysis::Keep;
  if (kind == "render_for_completion") {
    MX_ASSIGN(auto next, opt_string(options, "next_turn_role"));
    const auto role = role_from_name(next.value_or("assistant"));
    MX_CHECK(role.has_value(), "unknown next_turn_role '{}'", next.value_or(""));
    return render_for_completion(messages, *role, conv);
  }
  if (kind == "render_conversation") return render_conversation(messages, conv);
  if (kind == "render_for_training") return render_for_training(messages, conv);
  if (kind == "render_message") {
    MX_CHECK(messages.size() == 1, "render_message needs exactly one message, got {}", messages.size());
    MX_ASSIGN(const bool has_functions, opt_bool(options, "conversation_has_function_tools", false));
    MX_ASSIGN(const bool drop_end, opt_bool(options, "drop_trailing_end_token", false));
    const MessageOptions mo{.function_tools = has_functions ? FunctionTools::Present : FunctionTools::Absent};
    MX_ASSIGN(Rendered out, render_message(messages[0], mo));
    if (drop_end) out.pop_marker(Marker::End);
    return out;
  }
  return MX_ERROR("'{}' is not a render kind", kind);
}

Result<ParseCase> parse_case_input(const ojson& input, const ojson& options, const Tokenizer* tok) {
  MX_CHECK(input.is_object(), "a parse case needs an 'input' object");
  ParseCase pc;
  if (auto it = input.find("token_ids"); it != input.end() && it->is_array()) {
    for (const ojson& id : *it) {
      MX_CHECK(id.is_number_integer(), "token_ids must be integers");
      pc.ids.push_back(id.get<int32_t>());
    }
  } else {
    MX_ASSIGN(auto text, opt_string(input, "text"));
    MX_CHECK(text.has_value(), "input needs token_ids or text");
    MX_CHECK(tok != nullptr, "encoding the input text needs a tokenizer");
    MX_ASSIGN(pc.ids, tok->encode(*text, SpecialTokens::Allow));
  }
  MX_CHECK(options.is_object(), "parse options must be an object");
  MX_ASSIGN(auto role, opt_string(options, "role"));
  if (role) {
    pc.options.role = role_from_name(*role);
    MX_CHECK(pc.options.role.has_value(), "unknown role '{}'", *role);
  }
  MX_ASSIGN(const bool strict, opt_bool(options, "strict", true));
  MX_ASSIGN(const bool process_eos, opt_bool(options, "process_eos", false));
  pc.options.mode = strict ? ParseMode::Strict : ParseMode::Lenient;
  pc.eos = process_eos ? EndOfStream::Reached : EndOfStream::Pending;
  return pc;
}

}  // namespace mx::harmony
