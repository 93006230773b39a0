// JsonMatcher against a JSON parser and a JSON Schema validator (valijson): random walks through
// the automaton always end in documents that parse and validate, never in a dead end; known good
// documents are accepted whole and known bad ones refused at some byte.
#include "grammar/json_matcher.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar_test_util.h"

namespace mx::grammar {
namespace {

using Json = nlohmann::ordered_json;

struct Walker {
  const JsonMatcher& m;
  Arena arena{1 << 20};

  std::vector<uint8_t> allowed(const MatchState& s) {
    std::vector<uint8_t> out;
    const size_t mark = arena.mark();
    for (int c = 0; c < 256; ++c) {
      MatchState next;
      if (m.advance(s, uint8_t(c), next, arena)) out.push_back(uint8_t(c));
      arena.rewind(mark);
    }
    return out;
  }

  // A random document: each byte drawn among the allowed ones, half the time from the ones that
  // close things (quotes, brackets, digits, literal starts) so that walks end.
  // closing_after: bytes after which the state wraps up (closing mode); the walk then must end
  // within closing_bytes() of that point.
  std::optional<std::string> walk(std::mt19937& rng, size_t max_bytes, size_t closing_after = SIZE_MAX) {
    arena.rewind(0);
    MatchState s = m.start(arena);
    std::string text;
    size_t limit = max_bytes;
    for (;;) {
      if (text.size() == closing_after && !s.closing) {
        s.closing = true;
        limit = text.size() + size_t(m.closing_bytes(s));
      }
      auto bytes = allowed(s);
      const bool end = m.can_end(s);
      EXPECT_TRUE(end || !bytes.empty()) << "dead end after: " << text;
      if (bytes.empty() || (end && (s.closing || rng() % 4 == 0))) return end ? std::optional(text) : std::nullopt;
      if (text.size() >= limit) break;
      std::vector<uint8_t> closing;
      for (uint8_t c : bytes)
        if (std::string_view("\"}]0123456789tfn,:").find(char(c)) != std::string_view::npos) closing.push_back(c);
      const auto& pool = !closing.empty() && rng() % 2 == 0 ? closing : bytes;
      const uint8_t c = pool[rng() % pool.size()];
      MatchState next;
      EXPECT_TRUE(m.advance(s, c, next, arena));
      s = next;
      text.push_back(char(c));
    }
    EXPECT_FALSE(s.closing) << "the wrap-up did not end within its estimate (" << limit << " bytes): " << nlohmann::json(text).dump();
    return std::nullopt;
  }

  bool accepts(std::string_view text) {
    arena.rewind(0);
    MatchState s = m.start(arena), next;
    return m.advance(s, text, next, arena) && m.can_end(next);
  }
};

JsonMatcher matcher_for(const Json& schema) {
  auto compiled = compile_schema(schema);
  EXPECT_TRUE(compiled.ok()) << compiled.status().message();
  return JsonMatcher(std::make_shared<Schema>(std::move(compiled.value())));
}

void expect_walks_valid(const Json& schema, int walks, uint64_t seed) {
  JsonMatcher m = matcher_for(schema);
  Walker w{m};
  std::mt19937 rng{uint32_t(seed)};
  int ended = 0;
  for (int i = 0; i < walks; ++i) {
    auto text = w.walk(rng, 4000);
    if (!text) continue;
    ended++;
    Json doc;
    ASSERT_NO_THROW(doc = Json::parse(*text)) << *text;
    EXPECT_TRUE(test::validates(nlohmann::json(schema), nlohmann::json(doc))) << schema.dump() << "\n" << *text;
  }
  EXPECT_GE(ended, walks * 3 / 4) << "most walks should end";
}

const char* kPerson = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "age": {"type": "integer", "minimum": 18, "maximum": 130},
    "score": {"type": "number", "exclusiveMinimum": -1.5, "maximum": 2.25},
    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b\"q", "ünï"]}, "minItems": 1, "maxItems": 3},
    "kind": {"enum": ["x", 1, 12, null, true]},
    "nick": {"type": ["string", "null"], "maxLength": 3},
    "ok": {"type": "boolean"}
  },
  "required": ["name", "age", "tags", "ok"],
  "additionalProperties": false
})";

TEST(JsonMatcher, RandomWalksParseAndValidate) {
  expect_walks_valid(Json::parse(kPerson), 300, 1);
  expect_walks_valid(Json::parse(R"({"type": "object"})"), 200, 2);  // free JSON object
  expect_walks_valid(Json::parse(R"({"type": "array", "items": {"type": "integer", "minimum": -7, "maximum": 1234}})"),
                     200, 3);
  expect_walks_valid(Json::parse(R"({"type": "number", "minimum": 0.5, "exclusiveMaximum": 3})"), 200, 4);
  expect_walks_valid(Json::parse(R"({"anyOf": [{"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"],
    "additionalProperties": false}, {"type": "object", "properties": {"a": {"const": 2}, "b": {"type": "string"}},
    "required": ["a", "b"], "additionalProperties": false}]})"), 200, 5);
}

// Wrapping up from any point of a random walk ends the document within closing_bytes(), valid.
TEST(JsonMatcher, ClosingModeEndsWithinItsEstimate) {
  for (const char* schema : {kPerson, R"({"type": "object"})", R"({"type": "array", "items": {"type": "object",
      "properties": {"a": {"type": "string", "minLength": 3}, "b": {"type": "array", "minItems": 2, "items":
      {"type": "number"}}}, "required": ["a", "b"]}})"}) {
    const Json parsed = Json::parse(schema);
    JsonMatcher m = matcher_for(parsed);
    Walker w{m};
    std::mt19937 rng{42};
    for (int i = 0; i < 200; ++i) {
      auto text = w.walk(rng, 4000, size_t(rng() % 60));
      if (!text) continue;  // ended before the wrap-up point, or a dead end (reported by walk)
      Json doc;
      ASSERT_NO_THROW(doc = Json::parse(*text)) << *text;
      EXPECT_TRUE(test::validates(nlohmann::json(parsed), nlohmann::json(doc))) << *text;
    }
  }
}

TEST(JsonMatcher, RecursiveRefsAndPatterns) {
  const Json tree = Json::parse(R"({
    "$defs": {"node": {"type": "object", "properties": {
      "id": {"type": "string", "pattern": "^[A-Z]{2}-\\d{2,3}$"},
      "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
      "required": ["id"], "additionalProperties": false}},
    "$ref": "#/$defs/node"})");
  expect_walks_valid(tree, 200, 6);
}

TEST(JsonMatcher, AcceptsGoodDocuments) {
  JsonMatcher m = matcher_for(Json::parse(kPerson));
  Walker w{m};
  EXPECT_TRUE(w.accepts(R"({"name":"Al","age":30,"tags":["a"],"ok":true})"));
  EXPECT_TRUE(w.accepts(R"({ "name": "Zoë", "age": 130, "score": -1.25, "tags": ["b\"q", "ünï"], "kind": 12, "nick": null, "ok": false})"));
  EXPECT_TRUE(w.accepts(R"({"name":"\u00e9\n","age":18,"tags":["a","a","a"],"kind":"x","ok":true})"));
}

TEST(JsonMatcher, RefusesBadDocuments) {
  JsonMatcher m = matcher_for(Json::parse(kPerson));
  Walker w{m};
  for (const char* bad : {
           R"({"age":30,"name":"Al","tags":["a"],"ok":true})",           // out of the declared order
           R"({"name":"Al","tags":["a"],"ok":true})",                    // missing required age
           R"({"name":"Al","age":17,"tags":["a"],"ok":true})",           // below minimum
           R"({"name":"Al","age":131,"tags":["a"],"ok":true})",          // above maximum
           R"({"name":"Al","age":30.5,"tags":["a"],"ok":true})",         // not an integer
           R"({"name":"","age":30,"tags":["a"],"ok":true})",             // minLength
           R"({"name":"abcdefghijklm","age":30,"tags":["a"],"ok":true})",  // maxLength
           R"({"name":"Al","age":30,"tags":[],"ok":true})",              // minItems
           R"({"name":"Al","age":30,"tags":["a","a","a","a"],"ok":true})",  // maxItems
           R"({"name":"Al","age":30,"tags":["c"],"ok":true})",           // enum
           R"({"name":"Al","age":30,"score":-1.5,"tags":["a"],"ok":true})",  // exclusiveMinimum
           R"({"name":"Al","age":30,"tags":["a"],"ok":true,"x":1})",     // additionalProperties false
           R"({"name":"Al","age":30,"tags":["a"],"ok":1})",              // boolean
           R"({"name":"A)" "\x01" R"(","age":30,"tags":["a"],"ok":true})",  // control character
           R"({"name":"A)" "\xC3\x28" R"(","age":30,"tags":["a"],"ok":true})",  // invalid UTF-8
           R"({"name":"Al","age":030,"tags":["a"],"ok":true})",          // leading zero
           R"({"name":"Al",   "age":30,"tags":["a"],"ok":true})",        // 3 spaces: whitespace is bounded
           R"({"name":"Al","age":30,"tags":["a"],"ok":true} )",          // nothing after the document
       })
    EXPECT_FALSE(w.accepts(bad)) << bad;
}

TEST(JsonMatcher, RefusesWhatItCannotEnforce) {
  for (const char* s : {R"({"not": {"type": "string"}})", R"({"type": "string", "pattern": "(a)\\1"})",
                        R"({"type": "object", "patternProperties": {"^a": {}}})", R"({"$ref": "#/$defs/missing"})",
                        R"({"type": "integer", "minimum": 5, "maximum": 4})", R"({"type": "wat"})", R"(false)",
                        R"({"type": "object", "required": ["a"], "properties": {}})"}) {
    auto r = compile_schema(Json::parse(s));
    EXPECT_FALSE(r.ok()) << s;
  }
}

}  // namespace
}  // namespace mx::grammar
