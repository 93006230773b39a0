// Synthetic models: the real gpt-oss-20b / gpt-oss-120b shapes (GPTOSS_SPEC §1) with seeded
// random weights made directly on the target device — the same bytes a decode step reads as the
// real checkpoints, for benchmarks. "synthetic:tiny" is a small one for tests.
#pragma once

#include <memory>
#include <string>

#include "model/model.h"

namespace mx {

bool is_synthetic_name(const std::string& arg);  // "synthetic:20b", "synthetic:120b", "synthetic:tiny"
Result<ModelConfig> synthetic_config(const std::string& arg);
// With `shard`, only that rank's part of each weight is kept (model/tensor_parallel.h).
Result<std::unique_ptr<Model>> make_synthetic_model(const std::string& arg, Device device, uint64_t seed = 1,
                                                    TpShard shard = {});

}  // namespace mx
