// --mxfp4-layers: which of the dense (BF16) weights are quantized to MXFP4 at load — blocks of 32
// along the input dimension, one E8M0 scale each (core/dtype.h quantize_mxfp4_block, the OCP rule)
// — and kept 4-bit on the device for the MXFP4 GEMV/GEMM paths (kernels/ops.h "dense weight").
// The experts ("moe") are MXFP4 in the checkpoint already. Biases, norms and sinks stay as they are.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "model/config.h"
#include "model/weights.h"

namespace mx {

struct Mxfp4Layers {
  bool qkv = false, o = false, router = false, lm_head = false, embed = false;
  bool any() const { return qkv || o || router || lm_head || embed; }
  std::string describe() const;  // "moe" or "moe,qkv,o,..."
};

// A comma-separated list of moe, qkv, o, router, lm_head, embed, or "all"; "moe" alone (the
// default) changes nothing. An unknown name is an error that lists the accepted ones.
Result<Mxfp4Layers> parse_mxfp4_layers(std::string_view list);

// Bytes of one MXFP4-stored weight element (16-byte block + 1 scale byte per 32).
inline constexpr double kMxfp4BytesPerWeight = 17.0 / 32.0;

// Quantizes the chosen weights of w in place (on its device), frees their BF16 copies and logs what
// it did and the resulting weight bytes of a batch-1 decode step. lm_head is skipped, with a
// warning, when it shares its storage with the embedding (tied weights; embed then stays BF16 too,
// since quantizing it would change lm_head); a weight whose input
// features are not a multiple of 32 stays BF16, with a warning. Returns the set actually applied.
// NaN or Inf in a weight is an error naming the tensor and row.
Result<Mxfp4Layers> quantize_dense_layers(ModelWeights& w, const ModelConfig& c, const Mxfp4Layers& want,
                                          ShowProgress progress = ShowProgress::Yes);

}  // namespace mx
