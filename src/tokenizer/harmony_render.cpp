// Rendering of harmony messages and conversations: header (author, recipient, channel, content
// type), system/developer bodies, terminators, auto-drop of analysis, completion/training forms.
#include <fmt/format.h>

#include "tokenizer/harmony.h"

namespace mx::harmony {

namespace {

Status render_header(const Message& m, Rendered& out) {
  if (m.author.role == Role::Tool) {
    MX_CHECK(m.author.name.has_value() && !m.author.name->empty(), "a tool message needs an author name");
    out.text(*m.author.name);
  } else {
    out.text(role_name(m.author.role));
    if (m.author.name) out.text(":" + *m.author.name);
  }
  if (m.recipient && *m.recipient != "all") out.text(" to=" + *m.recipient);
  if (m.channel) {
    out.marker(Marker::Channel);
    out.text(*m.channel);
  }
  if (m.content_type) {
    const std::string_view ct = *m.content_type;
    const std::string_view constrain = marker_text(Marker::Constrain);
    out.text(" ");
    if (ct.starts_with(constrain)) {
      out.marker(Marker::Constrain);
      out.text(ct.substr(constrain.size()));
    } else {
      out.text(ct);
    }
  }
  return ok_status();
}

bool is_final(const Message& m) { return m.channel && *m.channel == "final"; }
bool is_analysis(const Message& m) { return m.channel && *m.channel == "analysis"; }

}  // namespace

FunctionTools conversation_function_tools(std::span<const Message> messages) {
  for (const Message& m : messages) {
    const auto* dev = std::get_if<DeveloperContent>(&m.content);
    if (!dev) continue;
    for (const ToolNamespace& ns : dev->tools)
      if (ns.name == "functions" && !ns.tools.empty()) return FunctionTools::Present;
  }
  return FunctionTools::Absent;
}

std::string system_body(const SystemContent& c, FunctionTools function_tools) {
  std::vector<std::string> sections;
  std::vector<std::string> intro;
  if (c.model_identity) intro.push_back(*c.model_identity);
  if (c.knowledge_cutoff) intro.push_back("Knowledge cutoff: " + *c.knowledge_cutoff);
  if (c.conversation_start_date) intro.push_back("Current date: " + *c.conversation_start_date);
  if (!intro.empty()) sections.push_back(fmt::format("{}", fmt::join(intro, "\n")));
  if (c.reasoning_effort) sections.push_back(fmt::format("Reasoning: {}", effort_name(*c.reasoning_effort)));
  if (!c.tools.empty()) sections.push_back(tools_section(c.tools));
  if (c.channel_config && !c.channel_config->valid_channels.empty()) {
    std::string s = "# Valid channels: " + fmt::format("{}", fmt::join(c.channel_config->valid_channels, ", ")) + ".";
    if (c.channel_config->channel_required) s += " Channel must be included for every message.";
    if (function_tools == FunctionTools::Present)
      s += "\nCalls to these tools must go to the commentary channel: 'functions'.";
    sections.push_back(std::move(s));
  }
  return fmt::format("{}", fmt::join(sections, "\n\n"));
}

std::string developer_body(const DeveloperContent& c) {
  std::vector<std::string> sections;
  if (c.instructions) {
    sections.push_back("# Instructions");
    sections.push_back(*c.instructions);
  }
  if (!c.tools.empty()) sections.push_back(tools_section(c.tools));
  return fmt::format("{}", fmt::join(sections, "\n\n"));
}

Result<Rendered> render_message(const Message& message, const MessageOptions& options) {
  Rendered out;
  out.marker(Marker::Start);
  MX_TRY(render_header(message, out));
  out.marker(Marker::Message);
  if (const auto* sys = std::get_if<SystemContent>(&message.content)) {
    out.text(system_body(*sys, options.function_tools));
  } else if (const auto* dev = std::get_if<DeveloperContent>(&message.content)) {
    out.text(developer_body(*dev));
  } else {
    out.text(message.text());
  }
  const bool tool_call = message.author.role == Role::Assistant && message.recipient && *message.recipient != "all";
  out.marker(tool_call ? Marker::Call : Marker::End);
  return out;
}

Result<Rendered> render_conversation(std::span<const Message> messages, const ConversationOptions& options) {
  const MessageOptions message_options{.function_tools = conversation_function_tools(messages)};

  // Harmony auto_drop_analysis: only when the last assistant message is on `final`, and only
  // the analysis messages before the first `final` message.
  bool last_assistant_final = false;
  for (auto it = messages.rbegin(); it != messages.rend(); ++it) {
    if (it->author.role == Role::Assistant) {
      last_assistant_final = is_final(*it);
      break;
    }
  }
  size_t first_final = messages.size();
  for (size_t i = 0; i < messages.size(); ++i) {
    if (is_final(messages[i])) {
      first_final = i;
      break;
    }
  }
  const bool drop = options.drop_analysis == DropAnalysis::BeforeFirstFinal && last_assistant_final;

  Rendered out;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (drop && i < first_final && is_analysis(messages[i])) continue;
    MX_ASSIGN(Rendered one, render_message(messages[i], message_options));
    out.append(one);
  }
  return out;
}

Result<Rendered> render_for_completion(std::span<const Message> messages, Role next_role,
                                       const ConversationOptions& options) {
  MX_ASSIGN(Rendered out, render_conversation(messages, options));
  out.marker(Marker::Start);
  out.text(role_name(next_role));
  return out;
}

Result<Rendered> render_for_training(std::span<const Message> messages, const ConversationOptions& options) {
  MX_ASSIGN(Rendered out, render_conversation(messages, options));
  if (!messages.empty()) {
    const Message& last = messages.back();
    if (last.author.role == Role::Assistant && is_final(last) && out.ends_with(Marker::End))
      out.replace_last_marker(Marker::Return);
  }
  return out;
}

}  // namespace mx::harmony
