// compile_schema: JSON Schema (the subset structured outputs use) -> Schema nodes, with $ref to
// $defs / definitions (recursion allowed), type lists and enum/const as literal tries.
#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace mx::grammar {

void ByteTrie::insert(std::string_view s, int32_t value) {
  int32_t at = 0;
  nodes[0].values.push_back(value);
  for (unsigned char c : s) {
    int32_t next = child(at, c);
    if (next < 0) {
      next = int32_t(nodes.size());
      auto& edges = nodes[size_t(at)].next;
      edges.insert(std::lower_bound(edges.begin(), edges.end(), std::pair<uint8_t, int32_t>(c, -1)), {c, next});
      nodes.emplace_back();
    }
    at = next;
    nodes[size_t(at)].values.push_back(value);
  }
  if (nodes[size_t(at)].value < 0) nodes[size_t(at)].value = value;
}

int32_t ByteTrie::child(int32_t node, uint8_t byte) const {
  const auto& edges = nodes[size_t(node)].next;
  auto it = std::lower_bound(edges.begin(), edges.end(), std::pair<uint8_t, int32_t>(byte, -1));
  return it != edges.end() && it->first == byte ? it->second : -1;
}

bool ByteTrie::has_value_in(int32_t node, int32_t lo, int32_t hi) const {
  const auto& v = nodes[size_t(node)].values;
  auto it = std::lower_bound(v.begin(), v.end(), lo);
  return it != v.end() && *it <= hi;
}

namespace {

using Json = nlohmann::ordered_json;

// Keywords that only annotate (ignored) and those that constrain but are not enforced (refused).
const char* const kRefused[] = {"not", "if", "then", "else", "patternProperties", "prefixItems", "contains",
                                "multipleOf", "propertyNames", "dependentSchemas", "dependentRequired",
                                "unevaluatedProperties", "unevaluatedItems", "minProperties", "maxProperties",
                                "minContains", "maxContains"};

// The keywords that imply a type when "type" is absent.
const std::pair<const char*, std::vector<const char*>> kKeywordKinds[] = {
    {"object", {"properties", "required", "additionalProperties"}},
    {"array", {"items", "minItems", "maxItems"}},
    {"string", {"minLength", "maxLength", "pattern", "format"}},
    {"number", {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}}};

class Compiler {
 public:
  explicit Compiler(const Json& root) : root_(root) {}

  Result<int32_t> node(const Json& s, const std::string& path, int depth) {
    MX_CHECK(depth <= 64, "the schema nests deeper than 64 levels at {}", path);
    MX_CHECK(int(out_.nodes.size()) < kMaxSchemaNodes, "the schema has more than {} nodes", kMaxSchemaNodes);
    if (s.is_boolean()) {
      MX_CHECK(s.get<bool>(), "the schema 'false' at {} accepts nothing", path);
      return add(SchemaNode{.kind = NodeKind::Any});
    }
    MX_CHECK(s.is_object(), "the schema at {} must be an object or a boolean", path);
    for (const char* k : kRefused) MX_CHECK(!s.contains(k), "the keyword '{}' at {} is not supported", k, path);
    if (auto it = s.find("$ref"); it != s.end()) return ref(*it, path, depth);
    if (auto it = s.find("allOf"); it != s.end()) {
      MX_CHECK(it->is_array() && it->size() == 1, "'allOf' at {} is supported with one schema only", path);
      return node((*it)[0], path + "/allOf/0", depth + 1);
    }
    if (s.contains("const")) return literals(Json::array({s["const"]}), path);
    if (auto it = s.find("enum"); it != s.end()) {
      MX_CHECK(it->is_array() && !it->empty(), "'enum' at {} must be a non-empty array", path);
      return literals(*it, path);
    }
    for (const char* key : {"anyOf", "oneOf"})
      if (auto it = s.find(key); it != s.end()) return any_of(*it, path + "/" + key, depth);
    auto type = s.find("type");
    if (type != s.end() && type->is_array()) {
      MX_CHECK(!type->empty(), "'type' at {} is an empty list", path);
      std::vector<int32_t> alts;
      for (const auto& t : *type) {
        MX_CHECK(t.is_string(), "'type' at {} must list strings", path);
        MX_ASSIGN(int32_t a, typed(s, t.get<std::string>(), path, depth));
        alts.push_back(a);
      }
      return alts.size() == 1 ? alts[0] : add(SchemaNode{.kind = NodeKind::AnyOf, .alternatives = alts});
    }
    MX_CHECK(type == s.end() || type->is_string(), "'type' at {} must be a string or a list", path);
    if (type != s.end()) return typed(s, type->get<std::string>(), path, depth);
    // No type: the kinds its keywords constrain (generating only those keeps every keyword true).
    std::vector<int32_t> alts;
    for (const auto& [kind, keys] : kKeywordKinds) {
      if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return s.contains(k); })) continue;
      MX_ASSIGN(int32_t a, typed(s, kind, path, depth));
      alts.push_back(a);
    }
    if (alts.empty()) return add(SchemaNode{.kind = NodeKind::Any});
    return alts.size() == 1 ? alts[0] : add(SchemaNode{.kind = NodeKind::AnyOf, .alternatives = alts});
  }

  Result<Schema> run() {
    MX_ASSIGN(out_.root, node(root_, "#", 0));
    return std::move(out_);
  }

 private:
  int32_t add(SchemaNode n) {
    out_.nodes.push_back(std::move(n));
    return int32_t(out_.nodes.size() - 1);
  }

  Result<int32_t> ref(const Json& r, const std::string& path, int depth) {
    MX_CHECK(r.is_string(), "'$ref' at {} must be a string", path);
    const std::string target = r.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    MX_CHECK(target == "#" || target.starts_with("#/"), "'$ref' {} at {}: only local references (#/...) are supported",
             target, path);
    const Json* at = &root_;
    if (target != "#") {
      try {
        at = &root_.at(Json::json_pointer(target.substr(1)));
      } catch (const std::exception&) {
        return Status::error(fmt::format("'$ref' {} at {} names nothing in the schema", target, path));
      }
    }
    // A placeholder first, so that a recursive reference finds it; filled in below.
    const int32_t slot = add(SchemaNode{.kind = NodeKind::AnyOf});
    refs_[target] = slot;
    MX_ASSIGN(int32_t n, node(*at, target, depth + 1));
    out_.nodes[size_t(slot)].alternatives = {n};
    return slot;
  }

  Result<int32_t> literals(const Json& values, const std::string& path) {
    ByteTrie trie;
    for (size_t i = 0; i < values.size(); ++i) trie.insert(values[i].dump(), int32_t(i));
    MX_CHECK(trie.nodes.size() < 100000, "'enum' at {} is too large", path);
    out_.tries.push_back(std::move(trie));
    return add(SchemaNode{.kind = NodeKind::Literals, .literals = int32_t(out_.tries.size() - 1)});
  }

  Result<int32_t> any_of(const Json& list, const std::string& path, int depth) {
    MX_CHECK(list.is_array() && !list.empty(), "{} must be a non-empty array", path);
    std::vector<int32_t> alts;
    for (size_t i = 0; i < list.size(); ++i) {
      MX_ASSIGN(int32_t a, node(list[i], path + "/" + std::to_string(i), depth + 1));
      alts.push_back(a);
    }
    return alts.size() == 1 ? alts[0] : add(SchemaNode{.kind = NodeKind::AnyOf, .alternatives = alts});
  }

  static Result<int32_t> count(const Json& s, const char* key, const std::string& path, int32_t fallback) {
    auto it = s.find(key);
    if (it == s.end()) return fallback;
    MX_CHECK(it->is_number_integer() && it->get<int64_t>() >= 0 && it->get<int64_t>() <= 1'000'000,
             "'{}' at {} must be an integer in [0, 1000000]", key, path);
    return int32_t(it->get<int64_t>());
  }

  Result<int32_t> typed(const Json& s, const std::string& t, const std::string& path, int depth) {
    if (t == "object") return object(s, path, depth);
    if (t == "array") {
      SchemaNode n{.kind = NodeKind::Array};
      MX_ASSIGN(n.min_items, count(s, "minItems", path, 0));
      MX_ASSIGN(n.max_items, count(s, "maxItems", path, -1));
      MX_CHECK(n.max_items < 0 || n.max_items >= n.min_items, "'maxItems' < 'minItems' at {}", path);
      if (auto it = s.find("items"); it != s.end()) {
        MX_ASSIGN(n.items, node(*it, path + "/items", depth + 1));
      } else {
        n.items = add(SchemaNode{.kind = NodeKind::Any});
      }
      return add(std::move(n));
    }
    if (t == "string") return string(s, path);
    if (t == "number" || t == "integer") return number(s, t == "integer", path);
    if (t == "boolean") return literals(Json::array({true, false}), path);
    if (t == "null") return literals(Json::array({nullptr}), path);
    return Status::error(fmt::format("'type' '{}' at {} is not a JSON Schema type", t, path));
  }

  Result<int32_t> object(const Json& s, const std::string& path, int depth) {
    SchemaNode n{.kind = NodeKind::Object};
    std::vector<std::string> required;
    if (auto it = s.find("required"); it != s.end()) {
      MX_CHECK(it->is_array(), "'required' at {} must be an array of names", path);
      for (const auto& r : *it) {
        MX_CHECK(r.is_string(), "'required' at {} must be an array of names", path);
        required.push_back(r.get<std::string>());
      }
    }
    ByteTrie keys;
    if (auto it = s.find("properties"); it != s.end()) {
      MX_CHECK(it->is_object(), "'properties' at {} must be an object", path);
      for (const auto& [name, sub] : it->items()) {
        MX_ASSIGN(int32_t child, node(sub, path + "/properties/" + name, depth + 1));
        const std::string quoted = Json(name).dump();
        const bool req = std::find(required.begin(), required.end(), name) != required.end();
        n.props.push_back({.name = quoted.substr(1, quoted.size() - 2), .raw = name, .node = child, .required = req});
        keys.insert(quoted.substr(1), int32_t(n.props.size() - 1));
      }
    }
    for (const auto& r : required)
      MX_CHECK(std::any_of(n.props.begin(), n.props.end(), [&](const Property& p) { return p.raw == r; }),
               "'required' at {} names '{}', which is not among its properties", path, r);
    out_.tries.push_back(std::move(keys));
    n.keys = int32_t(out_.tries.size() - 1);
    auto extra = s.find("additionalProperties");
    if (extra == s.end() || (extra->is_boolean() && extra->get<bool>())) {
      n.additional = n.props.empty() ? add(SchemaNode{.kind = NodeKind::Any}) : -1;
      // Declared properties without additionalProperties: false keep to the declared ones too
      // (the model has no use for extra keys; strict schemas always say false).
    } else if (extra->is_object()) {
      MX_ASSIGN(n.additional, node(*extra, path + "/additionalProperties", depth + 1));
    } else {
      MX_CHECK(extra->is_boolean(), "'additionalProperties' at {} must be a boolean or a schema", path);
    }
    return add(std::move(n));
  }

  Result<int32_t> string(const Json& s, const std::string& path) {
    SchemaNode n{.kind = NodeKind::String};
    MX_ASSIGN(n.min_length, count(s, "minLength", path, 0));
    MX_ASSIGN(n.max_length, count(s, "maxLength", path, -1));
    MX_CHECK(n.max_length < 0 || n.max_length >= n.min_length, "'maxLength' < 'minLength' at {}", path);
    auto pattern = s.find("pattern");
    auto format = s.find("format");
    if (pattern != s.end()) {
      MX_CHECK(pattern->is_string(), "'pattern' at {} must be a string", path);
      auto re = Regex::compile(pattern->get<std::string>(), Regex::Alphabet::kJsonUnescaped);
      if (!re.ok()) return re.status().with_context(fmt::format("'pattern' at {}", path));
      out_.regexes.push_back(std::move(re.value()));
      n.regex = int32_t(out_.regexes.size() - 1);
    } else if (format != s.end() && format->is_string()) {
      auto re = Regex::for_format(format->get<std::string>(), Regex::Alphabet::kJsonUnescaped);
      if (re.ok()) {  // unknown formats are annotations (JSON Schema's default)
        out_.regexes.push_back(std::move(re.value()));
        n.regex = int32_t(out_.regexes.size() - 1);
      }
    }
    return add(std::move(n));
  }

  static Result<bool> bound(const Json& s, const char* key, const char* exclusive_key, const std::string& path,
                            double& value, bool& exclusive) {
    auto it = s.find(key);
    auto ex = s.find(exclusive_key);
    bool has = false;
    if (it != s.end()) {
      MX_CHECK(it->is_number() && std::isfinite(it->get<double>()), "'{}' at {} must be a number", key, path);
      value = it->get<double>();
      has = true;
    }
    if (ex != s.end() && ex->is_boolean()) {  // draft 4: a flag on minimum / maximum
      exclusive = has && ex->get<bool>();
    } else if (ex != s.end()) {
      MX_CHECK(ex->is_number() && std::isfinite(ex->get<double>()), "'{}' at {} must be a number", exclusive_key, path);
      const double v = ex->get<double>();
      const bool tighter = !has || (key[1] == 'i' ? v >= value : v <= value);  // "minimum" vs "maximum"
      if (tighter) value = v, exclusive = true;
      has = true;
    }
    return has;
  }

  Result<int32_t> number(const Json& s, bool integer, const std::string& path) {
    SchemaNode n{.kind = integer ? NodeKind::Integer : NodeKind::Number};
    MX_ASSIGN(n.has_min, bound(s, "minimum", "exclusiveMinimum", path, n.minimum, n.exclusive_min));
    MX_ASSIGN(n.has_max, bound(s, "maximum", "exclusiveMaximum", path, n.maximum, n.exclusive_max));
    const double limit = 1e15;  // numbers have at most kMaxIntDigits integer digits
    if (integer) {  // fold exclusive bounds and fractions into inclusive integer bounds
      if (n.has_min) n.minimum = n.exclusive_min ? std::floor(n.minimum) + 1 : std::ceil(n.minimum);
      if (n.has_max) n.maximum = n.exclusive_max ? std::ceil(n.maximum) - 1 : std::floor(n.maximum);
      n.exclusive_min = n.exclusive_max = false;
    }
    if (n.has_min) n.minimum = std::max(n.minimum, -limit);
    if (n.has_max) n.maximum = std::min(n.maximum, limit);
    const bool empty = n.has_min && n.has_max &&
                       (n.minimum > n.maximum || (n.minimum == n.maximum && (n.exclusive_min || n.exclusive_max)));
    MX_CHECK(!empty, "the bounds at {} admit no number", path);
    return add(std::move(n));
  }

  const Json& root_;
  Schema out_;
  std::map<std::string, int32_t> refs_;
};

}  // namespace

Result<Schema> compile_schema(const nlohmann::ordered_json& schema) {
  try {
    return Compiler(schema).run();
  } catch (const std::exception& e) {  // nlohmann type errors on malformed keywords
    return Status::error(fmt::format("the schema could not be compiled: {}", e.what()));
  }
}

Schema any_json_object() {
  Schema s;
  const int32_t any = 0;
  s.nodes.push_back(SchemaNode{.kind = NodeKind::Any});
  s.tries.emplace_back();
  s.nodes.push_back(SchemaNode{.kind = NodeKind::Object, .additional = any, .keys = 0});
  s.root = 1;
  return s;
}

}  // namespace mx::grammar
