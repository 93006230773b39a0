// Fuzz target: the JSON Schema renderer (harmony's TypeScript-like tool signatures) on any JSON
// value within the schema depth limit the server enforces, as a function tool's parameters.
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "tokenizer/harmony.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto j = nlohmann::ordered_json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || mx::harmony::json_depth(j) > mx::harmony::kMaxSchemaDepth) return 0;
  (void)mx::harmony::schema_to_typescript(j, "");
  mx::harmony::ToolNamespace ns{.name = "functions", .description = std::nullopt,
                                .tools = {{.name = "f", .description = "d", .parameters = j}}};
  FUZZ_CHECK(!mx::harmony::tools_section(std::span(&ns, 1)).empty());
  return 0;
}
