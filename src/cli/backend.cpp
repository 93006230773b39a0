// --backend resolution, --moe-activation, --mxfp4-layers, --kv-cache-dtype / --kv-scale and
// --speculative-config.
#include "cli/backend.h"

#include <CLI/CLI.hpp>

#include "kernels/ops.h"

namespace mx::cli {

Result<Device> select_device(const std::string& backend) {
  if (backend == "cpu") return Device::CPU;
  if (backend == "cuda") {
    if (!ops::cuda_available())
      return Status::error("--backend cuda: no CUDA device is available (or mxserve was built without CUDA)");
    return Device::CUDA;
  }
  return ops::cuda_available() ? Device::CUDA : Device::CPU;
}

void add_moe_activation_option(CLI::App* cmd, std::string* value) {
  cmd->add_option("--moe-activation", *value,
                  "Activations of the prefill MoE GEMMs on CUDA: bf16, or fp8 (E4M3 with per-32 E8M0 scales, "
                  "quantized in the expand; a seam for GPUs with FP8xFP4 MMA: on Hopper half the speed of bf16 "
                  "and less accurate, docs/KERNELS.md)")
      ->default_val("bf16")
      ->check(CLI::IsMember({"bf16", "fp8"}));
}

Result<ops::MoeActivation> moe_activation_setting(const std::string& value) {
  const auto a = ops::parse_moe_activation(value);
  if (!a) return Status::error(fmt::format("--moe-activation: '{}' is not bf16 or fp8", value));
  return *a;
}

void add_mxfp4_layers_option(CLI::App* cmd, std::string* value) {
  cmd->add_option("--mxfp4-layers", *value,
                  "Dense weights to store in MXFP4 as well as the experts (quantized at load; fewer bytes per "
                  "decode step, some accuracy lost: docs/MXFP4_LAYERS.md): comma-separated moe, qkv, o, router, "
                  "lm_head, embed, or all")
      ->default_val("moe");
}

void add_tensor_parallel_option(CLI::App* cmd, int* value) {
  cmd->add_option("--tensor-parallel-size", *value,
                  "Split the model over this many GPUs (0..N-1; CUDA_VISIBLE_DEVICES picks them) with tensor "
                  "parallelism: 1, 2, 4 or 8 (-tp N; docs/TENSOR_PARALLEL.md)")
      ->default_val(1)
      ->check(CLI::IsMember({1, 2, 4, 8}));
}

void add_kv_cache_dtype_options(CLI::App* cmd, KvCacheFlags* flags, KvScaleOption scale) {
  cmd->add_option("--kv-cache-dtype", flags->dtype,
                  "KV cache element type: auto (the activations': bf16 on CUDA, f32 on the CPU) or fp8 (E4M3 with a "
                  "K and a V scale per layer: half the bytes of bf16, twice the tokens; docs/KV_CACHE.md)")
      ->default_val("auto");
  if (scale == KvScaleOption::No) return;
  cmd->add_option("--kv-scale", flags->scale,
                  "With --kv-cache-dtype fp8: fixed scales, S for K and V or K,V (element = value / scale); default: "
                  "calibrated from the first prefill")
      ->default_val("");
}

Result<KvCacheSettings> kv_cache_settings(const KvCacheFlags& flags) {
  KvCacheSettings kv;
  MX_ASSIGN(kv.dtype, parse_kv_cache_dtype(flags.dtype));
  if (flags.scale.empty()) return kv;
  if (kv.dtype != KvCacheDtype::Fp8)
    return Status::error("--kv-scale is only valid with --kv-cache-dtype fp8 (an auto cache stores unscaled values)");
  MX_ASSIGN(kv.scales, parse_kv_scales(flags.scale));
  return kv;
}

void add_speculative_option(CLI::App* cmd, std::string* value) {
  cmd->add_option("--speculative-config", *value,
                  "Speculative decoding, vLLM's JSON: {\"method\": \"ngram\", \"num_speculative_tokens\": 3, "
                  "\"prompt_lookup_min\": 2, \"prompt_lookup_max\": 5} (optional \"disable_by_batch_size\", default 32); "
                  "lossless (docs/SPECULATIVE.md); default: off")
      ->default_val("");
}

std::string describe_kv_cache(const KvCacheSettings& kv, Device device) {
  const std::string_view name = kv_element_name(kv.dtype, device);
  if (kv.dtype != KvCacheDtype::Fp8) return std::string(name);
  if (!kv.scales) return fmt::format("{}, scales calibrated from the first prefill", name);
  return fmt::format("{}, scales fixed at K {}, V {}", name, (*kv.scales)[0], (*kv.scales)[1]);
}

}  // namespace mx::cli
