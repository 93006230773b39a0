// Shared CLI helpers: the --backend flag (auto|cpu|cuda) and the device it selects,
// --moe-activation (bf16|fp8), --mxfp4-layers, --kv-cache-dtype (auto|fp8) with --kv-scale, and
// --speculative-config.
#pragma once

#include <array>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "kernels/context.h"
#include "model/mxfp4_layers.h"
#include "runtime/kv_cache.h"
#include "runtime/speculative.h"

namespace CLI {
class App;
}

namespace mx::cli {

// "auto" picks CUDA when a device is present, else the CPU reference; "cuda" without one is an error.
Result<Device> select_device(const std::string& backend);

// --moe-activation bf16|fp8: activations of the many-token (prefill) MoE GEMMs on CUDA, for
// EngineArgs::moe_activation (the engine's ops::Context).
void add_moe_activation_option(CLI::App* cmd, std::string* value);
Result<ops::MoeActivation> moe_activation_setting(const std::string& value);

// --mxfp4-layers LIST (model/mxfp4_layers.h, parse_mxfp4_layers): which dense weights are
// quantized to MXFP4 at load.
void add_mxfp4_layers_option(CLI::App* cmd, std::string* value);

// --kv-cache-dtype auto|fp8 and, where the cache holds a real context (run, serve; not bench,
// whose cache is random bytes with scales 1), --kv-scale S or K,V (fp8 only).
enum class KvScaleOption { No, Yes };
struct KvCacheFlags {
  std::string dtype = "auto", scale;
};
void add_kv_cache_dtype_options(CLI::App* cmd, KvCacheFlags* flags, KvScaleOption scale);
struct KvCacheSettings {
  KvCacheDtype dtype = KvCacheDtype::Auto;
  std::optional<std::array<float, 2>> scales;  // (K, V) from --kv-scale
};
Result<KvCacheSettings> kv_cache_settings(const KvCacheFlags& flags);
// "bf16", "fp8 e4m3, scales calibrated from the first prefill", "fp8 e4m3, scales fixed at K 0.5, V 0.25"
std::string describe_kv_cache(const KvCacheSettings& kv, Device device);

// --tensor-parallel-size N (-tp N) on run, serve and bench: the model split over N GPUs (or N CPU
// threads with --backend cpu: the stand-in of docs/TENSOR_PARALLEL.md).
void add_tensor_parallel_option(CLI::App* cmd, int* value);

// --speculative-config JSON (runtime/speculative.h, parse_speculative_config) on run, serve and bench.
void add_speculative_option(CLI::App* cmd, std::string* value);

}  // namespace mx::cli
