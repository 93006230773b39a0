// Shared CLI helpers: the --backend flag (auto|cpu|cuda) and the device it selects,
// --moe-activation (bf16|fp8) and --mxfp4-layers.
#pragma once

#include <string>

#include "core/tensor.h"
#include "model/mxfp4_layers.h"

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

// --mxfp4-layers LIST (model/mxfp4_layers.h): which dense weights are quantized to MXFP4 at load.
void add_mxfp4_layers_option(CLI::App* cmd, std::string* value);
Mxfp4Layers mxfp4_layers_or_exit(const std::string& value);

}  // namespace mx::cli
