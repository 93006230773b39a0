// --backend resolution, --moe-activation and --mxfp4-layers.
#include "cli/backend.h"

#include "cli/commands.h"
#include "kernels/ops.h"

namespace mx::cli {

Device select_device(const std::string& backend) {
  if (backend == "cpu") return Device::CPU;
  if (backend == "cuda") {
    if (!ops::cuda_available())
      exit_on_error(Status::error("--backend cuda: no CUDA device is available (or mxserve was built without CUDA)"));
    return Device::CUDA;
  }
  return ops::cuda_available() ? Device::CUDA : Device::CPU;
}

void add_moe_activation_option(CLI::App* cmd, std::string* value) {
  cmd->add_option("--moe-activation", *value,
                  "Activations of the prefill MoE GEMMs on CUDA: bf16, or fp8 (E4M3 with per-32 E8M0 scales, "
                  "quantized in the expand; docs/PERFORMANCE.md states its accuracy and speed)")
      ->default_val("bf16")
      ->check(CLI::IsMember({"bf16", "fp8"}));
}

void apply_moe_activation(const std::string& value) {
  const auto a = ops::parse_moe_activation(value);
  if (!a) exit_on_error(Status::error(fmt::format("--moe-activation: '{}' is not bf16 or fp8", value)));
  ops::set_moe_activation(*a);
}

void add_mxfp4_layers_option(CLI::App* cmd, std::string* value) {
  cmd->add_option("--mxfp4-layers", *value,
                  "Dense weights to store in MXFP4 as well as the experts (quantized at load; fewer bytes per "
                  "decode step, some accuracy lost: docs/MXFP4_LAYERS.md): comma-separated moe, qkv, o, router, "
                  "lm_head, embed, or all")
      ->default_val("moe");
}

Mxfp4Layers mxfp4_layers_or_exit(const std::string& value) {
  auto m = parse_mxfp4_layers(value);
  if (!m.ok()) exit_on_error(m.status());
  return *m;
}

}  // namespace mx::cli
