// Harmony chat format (gpt-oss, GPTOSS_SPEC §5.3): conversation types (messages, system and
// developer contents, tool namespaces) and the renderers to text-with-markers and to token ids.
// The streaming parser is in harmony_parser.h, the fixture/JSON form in harmony_json.h.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/status.h"

namespace mx {
class Tokenizer;
}

namespace mx::harmony {

// The harmony control tokens (o200k_harmony ids, GPTOSS_SPEC §5.2).
enum class Marker : uint8_t { Start, End, Message, Channel, Constrain, Return, Call };
std::string_view marker_text(Marker m);  // "<|start|>", ...
int32_t marker_id(Marker m);            // 200006, ...

enum class Role : uint8_t { System, Developer, User, Assistant, Tool };
std::string_view role_name(Role r);  // "system", ...
std::optional<Role> role_from_name(std::string_view name);

enum class ReasoningEffort : uint8_t { Low, Medium, High };
std::string_view effort_name(ReasoningEffort e);  // "low", "medium", "high"
std::optional<ReasoningEffort> effort_from_name(std::string_view name);

struct ToolDescription {
  std::string name;
  std::string description;
  std::optional<nlohmann::ordered_json> parameters;  // JSON Schema; nullopt: the tool takes no arguments
};

struct ToolNamespace {
  std::string name;  // "functions", "browser", "python"
  std::optional<std::string> description;
  std::vector<ToolDescription> tools;
};

// The library's built-in namespaces (their full default text).
ToolNamespace browser_namespace();
ToolNamespace python_namespace();

struct ChannelConfig {
  std::vector<std::string> valid_channels = {"analysis", "commentary", "final"};
  bool channel_required = true;
};

inline constexpr std::string_view kDefaultModelIdentity = "You are ChatGPT, a large language model trained by OpenAI.";
inline constexpr std::string_view kDefaultKnowledgeCutoff = "2024-06";

// Body of the system message; defaults are the library's.
struct SystemContent {
  std::optional<std::string> model_identity = std::string(kDefaultModelIdentity);
  std::optional<ReasoningEffort> reasoning_effort = ReasoningEffort::Medium;
  std::optional<std::string> knowledge_cutoff = std::string(kDefaultKnowledgeCutoff);
  std::optional<std::string> conversation_start_date;  // "YYYY-MM-DD"
  std::optional<ChannelConfig> channel_config = ChannelConfig{};
  std::vector<ToolNamespace> tools;  // built-in namespaces; rendered in name order
};

// Body of the developer message.
struct DeveloperContent {
  std::optional<std::string> instructions;
  std::vector<ToolNamespace> tools;  // normally one "functions" namespace
};

struct Author {
  Role role = Role::User;
  std::optional<std::string> name;  // tool messages: the tool name ("functions.get_weather")
};

struct Message {
  Author author;
  std::optional<std::string> recipient;     // "functions.get_weather", "assistant"
  std::optional<std::string> channel;       // "analysis" | "commentary" | "final"
  std::optional<std::string> content_type;  // "json", "code", "<|constrain|>json"
  std::variant<std::string, SystemContent, DeveloperContent> content;

  const std::string& text() const;  // "" unless the content is text
};

Message text_message(Role role, std::string text);
Message system_message(SystemContent content);
Message developer_message(DeveloperContent content);

// Rendered output: text pieces and marker tokens, in order. Adjacent text is merged so that
// tokens() encodes each run of text in one piece, as harmony does between markers.
class Rendered {
 public:
  void text(std::string_view s);
  void marker(Marker m);
  void append(const Rendered& other);
  bool ends_with(Marker m) const;
  void replace_last_marker(Marker m);  // no-op unless the last piece is a marker
  void pop_marker(Marker m);           // removes the last piece if it is marker m

  std::string str() const;  // markers written as "<|start|>" etc.
  size_t text_bytes() const;  // bytes of text, markers not counted
  // Markers become their ids; text is encoded with special tokens treated as text.
  Result<std::vector<int32_t>> tokens(const Tokenizer& tok) const;

 private:
  struct Piece {
    std::optional<Marker> marker;
    std::string text;
  };
  std::vector<Piece> pieces_;
};

enum class DropAnalysis { Keep, BeforeFirstFinal };  // library default: BeforeFirstFinal
enum class FunctionTools { Absent, Present };          // adds the "Calls to these tools..." line

struct ConversationOptions {
  // Drop analysis messages before the first `final` message when the last assistant message is
  // on `final` (harmony auto_drop_analysis).
  DropAnalysis drop_analysis = DropAnalysis::BeforeFirstFinal;
};

struct MessageOptions {
  FunctionTools function_tools = FunctionTools::Absent;
};

Result<Rendered> render_message(const Message& message, const MessageOptions& options = {});
Result<Rendered> render_conversation(std::span<const Message> messages, const ConversationOptions& options = {});
// The conversation followed by <|start|>{next_role}.
Result<Rendered> render_for_completion(std::span<const Message> messages, Role next_role,
                                       const ConversationOptions& options = {});
// The conversation; a last assistant message on `final` ends in <|return|> instead of <|end|>.
Result<Rendered> render_for_training(std::span<const Message> messages, const ConversationOptions& options = {});

// Whether any developer message has a non-empty "functions" namespace.
FunctionTools conversation_function_tools(std::span<const Message> messages);

// Body text of system / developer messages (exposed for tests).
std::string system_body(const SystemContent& content, FunctionTools function_tools);
std::string developer_body(const DeveloperContent& content);
// "# Tools\n\n## ns ..." for the namespaces, sorted by name.
std::string tools_section(std::span<const ToolNamespace> namespaces);
// Nesting depth of arrays/objects in a JSON value (a scalar is 0), without recursion.
int json_depth(const nlohmann::ordered_json& j);
// The TypeScript-like type of a JSON Schema ("{\nlocation: string,\n}", "number | string").
// The renderer recurses once per level: tools_section renders a schema nested deeper than
// kMaxSchemaDepth as `any` (callers taking schemas from clients refuse those first).
constexpr int kMaxSchemaDepth = 64;
std::string schema_to_typescript(const nlohmann::ordered_json& schema, const std::string& indent);

}  // namespace mx::harmony
