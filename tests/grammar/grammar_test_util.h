// Shared by the grammar tests: JSON Schema validation through valijson (Debian's libvalijson-dev),
// an implementation no one here wrote.
#pragma once

#include <nlohmann/json.hpp>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

namespace mx::test {

inline bool validates(const nlohmann::json& schema, const nlohmann::json& doc) {
  valijson::Schema compiled;
  valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
  valijson::adapters::NlohmannJsonAdapter schema_adapter(schema);
  parser.populateSchema(schema_adapter, compiled);
  valijson::Validator validator;
  valijson::adapters::NlohmannJsonAdapter doc_adapter(doc);
  return validator.validate(compiled, doc_adapter, nullptr);
}

}  // namespace mx::test
