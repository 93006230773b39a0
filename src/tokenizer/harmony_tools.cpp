// Tool namespaces in harmony's TypeScript-like form: the "# Tools" section, JSON Schema to
// TypeScript types (key order kept), and the library's built-in browser and python namespaces.
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "tokenizer/harmony.h"

namespace mx::harmony {

namespace {

using ojson = nlohmann::ordered_json;

// Lines as Rust's str::lines(): split on '\n', drop a trailing '\r', no empty last line.
std::vector<std::string> lines_of(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    const size_t nl = s.find('\n');
    std::string_view line = s.substr(0, nl);
    if (line.ends_with('\r')) line.remove_suffix(1);
    out.emplace_back(line);
    if (nl == std::string_view::npos) break;
    s.remove_prefix(nl + 1);
  }
  return out;
}

const ojson* field(const ojson& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::optional<std::string> string_field(const ojson& j, const char* key) {
  const ojson* v = field(j, key);
  if (v && v->is_string()) return v->get<std::string>();
  return std::nullopt;
}

bool is_enum(const ojson& j) {
  const ojson* e = field(j, "enum");
  return e && e->is_array() && !e->empty();
}

bool is_nullable(const ojson& j) {
  const ojson* n = field(j, "nullable");
  return n && n->is_boolean() && n->get<bool>();
}

// "default: V": a string default is quoted unless the schema is an enum; others as JSON.
std::string default_text(const ojson& schema, const ojson& value) {
  if (value.is_string()) {
    const std::string s = value.get<std::string>();
    return is_enum(schema) ? fmt::format("default: {}", s) : fmt::format("default: \"{}\"", s);
  }
  return fmt::format("default: {}", value.dump());
}

std::string with_nullable(const ojson& schema, std::string type) {
  if (is_nullable(schema) && type.find("null") == std::string::npos) type += " | null";
  return type;
}

// " | type // description default: x" lines of a oneOf, each ending in '\n'.
std::string one_of_variants(const ojson& variants, const std::string& indent) {
  std::string out;
  for (const ojson& v : variants) {
    out += indent + " | " + with_nullable(v, schema_to_typescript(v, indent + "   "));
    std::vector<std::string> comments;
    if (auto d = string_field(v, "description")) comments.push_back(*d);
    if (const ojson* def = field(v, "default")) comments.push_back(default_text(v, *def));
    if (!comments.empty()) out += " // " + fmt::format("{}", fmt::join(comments, " "));
    out += "\n";
  }
  return out;
}

std::string object_type(const ojson& schema, const std::string& indent) {
  std::string out;
  if (auto d = string_field(schema, "description")) out += "// " + *d + "\n";
  out += "{\n";
  std::set<std::string> required;
  if (const ojson* r = field(schema, "required"); r && r->is_array())
    for (const ojson& k : *r)
      if (k.is_string()) required.insert(k.get<std::string>());
  const ojson* props = field(schema, "properties");
  if (props && props->is_object()) {
    for (auto it = props->begin(); it != props->end(); ++it) {
      const std::string& key = it.key();
      const ojson& prop = it.value();
      const std::string opt = required.contains(key) ? "" : "?";
      const ojson* one_of = field(prop, "oneOf");
      if (auto t = string_field(prop, "title")) out += indent + "// " + *t + "\n" + indent + "//\n";
      if (!one_of) {
        if (auto d = string_field(prop, "description")) out += indent + "// " + *d + "\n";
      }
      if (const ojson* ex = field(prop, "examples"); ex && ex->is_array() && !ex->empty()) {
        out += indent + "// Examples:\n";
        for (const ojson& e : *ex)
          out += indent + "// - " + (e.is_string() ? fmt::format("\"{}\"", e.get<std::string>()) : e.dump()) + "\n";
      }
      if (one_of && one_of->is_array()) {
        if (auto d = string_field(prop, "description")) out += indent + "// " + *d + "\n";
        if (const ojson* def = field(prop, "default")) out += indent + "// " + default_text(prop, *def) + "\n";
        out += indent + key + opt + ":\n";
        out += one_of_variants(*one_of, indent);
        out += indent + ",\n";
        continue;
      }
      out += indent + key + opt + ": " + with_nullable(prop, schema_to_typescript(prop, indent + "    ")) + ",";
      if (const ojson* def = field(prop, "default")) out += " // " + default_text(prop, *def);
      out += "\n";
    }
  }
  out += indent + "}";
  return out;
}

std::string scalar_type(const std::string& type, const ojson& schema, const std::string& indent) {
  if (type == "object") return object_type(schema, indent);
  if (type == "string") {
    std::vector<std::string> values;
    if (is_enum(schema))
      for (const ojson& v : schema["enum"])
        if (v.is_string()) values.push_back(fmt::format("\"{}\"", v.get<std::string>()));
    return values.empty() ? "string" : fmt::format("{}", fmt::join(values, " | "));
  }
  if (type == "number" || type == "integer") return "number";
  if (type == "boolean") return "boolean";
  if (type == "null") return "null";
  if (type == "array") {
    const ojson* items = field(schema, "items");
    return items ? schema_to_typescript(*items, indent) + "[]" : "Array<any>";
  }
  return "any";
}

std::string namespace_section(const ToolNamespace& ns) {
  std::vector<std::string> lines;
  lines.push_back("## " + ns.name + "\n");
  const bool has_tools = !ns.tools.empty();
  if (ns.description)
    for (const std::string& l : lines_of(*ns.description)) lines.push_back(has_tools ? "// " + l : l);
  if (has_tools) {
    lines.push_back("namespace " + ns.name + " {\n");
    for (const ToolDescription& t : ns.tools) {
      for (const std::string& l : lines_of(t.description)) lines.push_back("// " + l);
      if (t.parameters && !t.parameters->is_null()) {
        const std::string type =
            json_depth(*t.parameters) > kMaxSchemaDepth ? "any" : schema_to_typescript(*t.parameters, "");
        lines.push_back("type " + t.name + " = (_: " + type + ") => any;\n");
      } else {
        lines.push_back("type " + t.name + " = () => any;\n");
      }
    }
    lines.push_back("} // namespace " + ns.name);
  }
  return fmt::format("{}", fmt::join(lines, "\n"));
}

}  // namespace

int json_depth(const ojson& j) {
  int deepest = 0;
  std::vector<std::pair<const ojson*, int>> todo = {{&j, 0}};
  while (!todo.empty()) {
    const auto [v, depth] = todo.back();
    todo.pop_back();
    if (!v->is_structured()) continue;
    deepest = std::max(deepest, depth + 1);
    for (const ojson& child : *v) todo.emplace_back(&child, depth + 1);
  }
  return deepest;
}

std::string schema_to_typescript(const ojson& schema, const std::string& indent) {
  if (!schema.is_object()) return "any";
  if (const ojson* one_of = field(schema, "oneOf"); one_of && one_of->is_array()) {
    std::string variants = one_of_variants(*one_of, indent);
    if (!variants.empty()) variants.pop_back();  // no newline after the last variant
    return "\n" + variants;
  }
  const ojson* type = field(schema, "type");
  if (type && type->is_array()) {
    std::vector<std::string> types;
    for (const ojson& t : *type)
      if (t.is_string()) types.push_back(t.get<std::string>() == "integer" ? "number" : t.get<std::string>());
    if (!types.empty()) return fmt::format("{}", fmt::join(types, " | "));
  }
  if (type && type->is_string()) return scalar_type(type->get<std::string>(), schema, indent);
  return "any";
}

std::string tools_section(std::span<const ToolNamespace> namespaces) {
  std::vector<const ToolNamespace*> sorted;
  for (const ToolNamespace& ns : namespaces) sorted.push_back(&ns);
  std::stable_sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });
  std::vector<std::string> sections = {"# Tools"};
  for (const ToolNamespace* ns : sorted) sections.push_back(namespace_section(*ns));
  return fmt::format("{}", fmt::join(sections, "\n\n"));
}

}  // namespace mx::harmony
