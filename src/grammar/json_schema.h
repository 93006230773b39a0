// A JSON Schema compiled for guided decoding: a graph of nodes (object, array, string, number,
// literal sets, anyOf, free JSON) that json_matcher walks byte by byte, plus byte tries for
// property keys and enum/const literals. compile_schema refuses what it cannot enforce.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "grammar/regex.h"

namespace mx::grammar {

// A byte trie over a set of strings; node 0 is the root. `value` of a node is the index of the
// string that ends there (-1: none); `values` lists every string index at or below the node.
struct ByteTrie {
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> next;  // sorted by byte
    int32_t value = -1;
    std::vector<int32_t> values;  // sorted
  };
  std::vector<Node> nodes = {Node{}};
  void insert(std::string_view s, int32_t value);  // values in increasing order
  int32_t child(int32_t node, uint8_t byte) const;  // -1: none
  // Some string at or below `node` has an index in [lo, hi].
  bool has_value_in(int32_t node, int32_t lo, int32_t hi) const;
};

enum class NodeKind : uint8_t { Any, Object, Array, String, Number, Integer, Literals, AnyOf };

struct Property {
  std::string name;  // the key as written in JSON (escaped, without quotes)
  std::string raw;   // the key itself
  int32_t node = -1;
  bool required = false;
};

struct SchemaNode {
  NodeKind kind = NodeKind::Any;
  // Object: the declared properties, generated in this order (optional ones may be left out);
  // extra keys only when `additional` >= 0 (its value node) and after every required one.
  std::vector<Property> props;
  int32_t additional = -1;
  int32_t keys = -1;  // index into Schema::tries: the keys, each followed by its closing quote
  // Array
  int32_t items = -1;
  int32_t min_items = 0, max_items = -1;  // -1: unbounded
  // String: lengths in code points; regex >= 0: the content matches Schema::regexes[regex].
  int32_t min_length = 0, max_length = -1;
  int32_t regex = -1;
  // Number / Integer bounds (integers: inclusive, exclusive ones folded in).
  bool has_min = false, has_max = false, exclusive_min = false, exclusive_max = false;
  double minimum = 0, maximum = 0;
  // Literals: the JSON texts of enum / const / true / false / null, in Schema::tries[literals].
  int32_t literals = -1;
  // AnyOf / oneOf
  std::vector<int32_t> alternatives;
};

struct Schema {
  std::vector<SchemaNode> nodes;
  std::vector<ByteTrie> tries;
  std::vector<Regex> regexes;
  int32_t root = -1;
};

// The limits that bound a generation: whitespace between tokens, digits of numbers, nesting
// of free JSON (json_object mode and schemas without a type).
inline constexpr int kMaxWhitespace = 2;
inline constexpr int kMaxIntDigits = 15;
inline constexpr int kMaxFracDigits = 15;
inline constexpr int kMaxExpDigits = 2;
inline constexpr int kMaxAnyDepth = 12;
inline constexpr int kMaxSchemaNodes = 4096;

// A schema object (json_schema mode; an error names the unsupported keyword and its path).
// Properties are generated in the schema's own key order.
Result<Schema> compile_schema(const nlohmann::ordered_json& schema);
// Any JSON object (json_object mode).
Schema any_json_object();

}  // namespace mx::grammar
