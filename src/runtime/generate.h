// Single-sequence generation, the reference loop of the model tests (the commands run the Engine):
// chunked prefill over the paged KV cache, then one eager decode step per token with every logits
// row on the host, sampled by the engine's rule (runtime/sampler.h) on the CPU.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "model/model.h"
#include "runtime/sampler.h"

namespace mx {

enum class PromptLogits { LastOnly, All };  // All: also return the logits of every prompt position

struct GenerateOptions {
  int max_tokens = 32;
  SamplingParams sampling;
  std::vector<int32_t> stop_ids;  // generation ends after emitting one of these
  int prefill_chunk = 256;        // tokens per prefill forward call
  int kv_block_size = 16;
  bool keep_logits = false;       // keep the (steps, V) logits each token was chosen from
  PromptLogits prompt_logits = PromptLogits::LastOnly;
  ops::MoeActivation moe_activation = ops::MoeActivation::BF16;  // the prefill MoE GEMMs' on CUDA
};

struct GenerateResult {
  std::vector<int32_t> tokens;          // generated ids (stop id included)
  std::vector<float> logits;            // (steps, V) when keep_logits
  std::vector<float> all_prompt_logits; // (P, V) when prompt_logits == All
  double prefill_seconds = 0, decode_seconds = 0;
  bool stopped = false;                 // ended on a stop id (else: max_tokens)
};

Result<GenerateResult> generate(const Model& model, std::span<const int32_t> prompt, const GenerateOptions& opt,
                                const std::function<void(int32_t)>& on_token = {});

}  // namespace mx
