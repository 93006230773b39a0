// ModelWeights: every tensor of the checkpoint (GPTOSS_SPEC §2.1), checked by name, dtype and
// shape, placed on one device. On the CPU most tensors stay views into the mmapped files; q/k/v
// are fused into one matrix. MXFP4 expert blocks stay 4-bit everywhere.
#pragma once

#include <vector>

#include "kernels/ops.h"
#include "model/config.h"
#include "model/safetensors.h"

namespace mx {

struct LayerWeights {
  Tensor attn_norm;  // (D) bf16
  Tensor qkv_w;      // (H·Dh + 2·Hkv·Dh, D) bf16: q rows, then k rows, then v rows
  Tensor qkv_b;      // (H·Dh + 2·Hkv·Dh) bf16
  Tensor o_w;        // (D, H·Dh) bf16
  Tensor o_b;        // (D) bf16
  Tensor sinks;      // (H) bf16
  Tensor mlp_norm;   // (D) bf16
  Tensor router_w;   // (E, D) bf16
  Tensor router_b;   // (E) bf16
  ops::MoeWeights experts;  // MXFP4 blocks/scales u8, biases bf16
  // With --mxfp4-layers (model/mxfp4_layers.h) the named weight above holds MXFP4 blocks (N, K/2) u8
  // and its scales (N, K/32) u8 are here (kernels/ops.h, "dense weight"); else empty.
  Tensor qkv_w_scales, o_w_scales, router_w_scales;
};

struct ModelWeights {
  Device device = Device::CPU;
  Tensor embed;       // (V, D) bf16
  std::vector<LayerWeights> layers;
  Tensor final_norm;  // (D) bf16
  Tensor lm_head;     // (V, D) bf16
  Tensor embed_scales, lm_head_scales;  // --mxfp4-layers embed / lm_head (as LayerWeights), else empty
  Tensor inv_freq;    // (Dh/2) f32, YaRN
  float rope_concentration = 1.0f;
  std::vector<ops::Buffer> storage;  // owns whatever is not a view into the checkpoint
  uint64_t bytes = 0;                // total weight bytes on the device
};

// Every expected tensor name with its dtype and shape for a config (for checks and for writers).
struct ExpectedTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c);

enum class ShowProgress { No, Yes };
class TpPlan;
// Tensor parallelism: rank `rank` of `plan` loads only its part of each weight (model/tensor_parallel.h).
struct TpShard {
  const TpPlan* plan = nullptr;
  int rank = 0;
};
// Computes the YaRN table of the config and places it (and the concentration) into w.
Status place_rope_table(const ModelConfig& c, ModelWeights& w);
Result<ModelWeights> load_weights(const Checkpoint& ckpt, const ModelConfig& c, Device device,
                                  ShowProgress progress = ShowProgress::Yes, TpShard shard = {});

}  // namespace mx
