// Shared CLI helpers: the --backend flag (auto|cpu|cuda) and the device it selects, and
// --moe-activation (bf16|fp8).
#pragma once

#include <string>

#include "core/tensor.h"

namespace CLI {
class App;
}

namespace mx::cli {

// "auto" picks CUDA when a device is present, else the CPU reference.
Device select_device(const std::string& backend);

// --moe-activation bf16|fp8: activations of the many-token (prefill) MoE GEMMs on CUDA; apply
// sets ops::set_moe_activation before the model runs.
void add_moe_activation_option(CLI::App* cmd, std::string* value);
void apply_moe_activation(const std::string& value);

}  // namespace mx::cli
