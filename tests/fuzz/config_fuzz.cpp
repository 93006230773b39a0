// Fuzz target: config.json as the model loader reads it (ModelConfig::from_json); a config it
// accepts must also pass validate() and print its summary.
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  auto c = mx::ModelConfig::from_json(j);
  if (!c.ok()) return 0;
  FUZZ_CHECK(c->validate().ok());
  FUZZ_CHECK(!c->summary().empty());
  return 0;
}
