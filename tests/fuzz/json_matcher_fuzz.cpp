// Fuzz target: guided decoding's JSON matcher. Input: a JSON Schema on the first line, then a
// document. A schema that compiles gives a matcher that never reaches a dead end (after every
// accepted byte some byte or the end is allowed); a document it accepts whole parses as JSON and,
// for schemas without pattern/format (whose regex dialects differ), validates with valijson; a
// wrap-up (closing mode) from any accepted prefix ends within closing_bytes() as valid JSON.
#include <nlohmann/json.hpp>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

#include "fuzz_util.h"
#include "grammar/json_matcher.h"

namespace {

using namespace mx::grammar;

bool validates(const nlohmann::json& schema, const nlohmann::json& doc) {
  valijson::Schema compiled;
  valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
  valijson::adapters::NlohmannJsonAdapter schema_adapter(schema);
  try {
    parser.populateSchema(schema_adapter, compiled);
  } catch (const std::exception&) {
    return true;  // a schema valijson cannot read (we compiled it): nothing to compare
  }
  valijson::Validator validator;
  valijson::adapters::NlohmannJsonAdapter doc_adapter(doc);
  return validator.validate(compiled, doc_adapter, nullptr);
}

// Nesting of [ and { in JSON text (strings skipped): the parser and the compiler recurse per level.
int text_depth(std::string_view t) {
  int depth = 0, most = 0;
  bool in_string = false;
  for (size_t i = 0; i < t.size(); ++i) {
    if (in_string) {
      if (t[i] == '\\') ++i;
      else if (t[i] == '"') in_string = false;
    } else if (t[i] == '"') {
      in_string = true;
    } else if (t[i] == '[' || t[i] == '{') {
      most = std::max(most, ++depth);
    } else if (t[i] == ']' || t[i] == '}') {
      --depth;
    }
  }
  return most;
}

bool any_byte(const JsonMatcher& m, const MatchState& s, Arena& arena, uint8_t* first = nullptr) {
  const size_t mark = arena.mark();
  for (int c = 0; c < 256; ++c) {
    MatchState next;
    const bool ok = m.advance(s, uint8_t(c), next, arena);
    arena.rewind(mark);
    if (ok) {
      if (first) *first = uint8_t(c);
      return true;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nl = in.find('\n');
  if (nl == std::string_view::npos || size > 4096) return 0;
  if (text_depth(in.substr(0, nl)) > 32) return 0;
  const auto schema = nlohmann::ordered_json::parse(in.substr(0, nl), nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  auto compiled = compile_schema(schema);
  if (!compiled.ok()) return 0;
  const JsonMatcher m(std::make_shared<Schema>(std::move(compiled.value())));
  const std::string_view doc = in.substr(nl + 1);
  Arena arena(1 << 18);
  MatchState s = m.start(arena);
  size_t taken = 0;
  for (; taken < doc.size(); ++taken) {
    MatchState next;
    if (!m.advance(s, uint8_t(doc[taken]), next, arena)) break;
    s = next;
    FUZZ_CHECK(m.can_end(s) || any_byte(m, s, arena));  // never a dead end
  }
  // Wrap up from the accepted prefix: the first allowed byte each time, within the estimate.
  MatchState w = s;
  w.closing = true;
  std::string wrapped(doc.substr(0, taken));
  const int limit = m.closing_bytes(w);
  for (int i = 0; !m.can_end(w); ++i) {
    uint8_t c = 0;
    FUZZ_CHECK(i < limit && any_byte(m, w, arena, &c));
    MatchState next;
    FUZZ_CHECK(m.advance(w, c, next, arena));
    w = next;
    wrapped.push_back(char(c));
  }
  const auto parsed = nlohmann::json::parse(wrapped, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(!parsed.is_discarded());
  const std::string text = schema.dump();
  const bool regexes = text.find("\"pattern\"") != std::string::npos || text.find("\"format\"") != std::string::npos;
  if (!regexes) FUZZ_CHECK(validates(nlohmann::json(schema), parsed));
  if (taken == doc.size() && m.can_end(s)) {
    const auto whole = nlohmann::json::parse(doc, nullptr, /*allow_exceptions=*/false);
    FUZZ_CHECK(!whole.is_discarded());
    if (!regexes) FUZZ_CHECK(validates(nlohmann::json(schema), whole));
  }
  return 0;
}
