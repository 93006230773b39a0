// Tensor parallelism (docs/TENSOR_PARALLEL.md): how gpt-oss is split over N ranks, and each
// rank's slice of every weight.
//   attention  by KV-head groups: rank r holds q heads [r·H/N, (r+1)·H/N) and the kv heads they
//              read, its rows of q/k/v (and their biases) and sinks, and the matching columns of
//              o_proj, whose partial sums an all-reduce adds (o's bias on rank 0 only);
//   experts    along the expert width F in whole MXFP4 blocks of 32: the G = F/32 blocks go
//              ⌈G/N⌉ to the first G mod N ranks and ⌊G/N⌋ to the rest (120b at N = 4: 23, 23, 22,
//              22 blocks); rank r holds those gate/up rows (interleaved pairs stay together), the
//              down blocks of those columns, and the down bias on rank 0 only;
//   lm_head    by vocabulary rows, split like the blocks; the logits are gathered on rank 0;
//   replicated embedding (one row per token is read: a split would buy nothing), norms, router.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/ops.h"
#include "model/config.h"

namespace mx {

struct TpRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

class TpPlan {
 public:
  // Checks that the model splits over `size` ranks (heads and kv heads divisible, at least one
  // expert block and one vocabulary row per rank).
  static Result<TpPlan> make(const ModelConfig& c, int size);
  TpPlan() = default;

  int size() const { return size_; }
  const ModelConfig& config() const { return c_; }  // the whole model's
  TpRange heads(int rank) const;     // q heads
  TpRange kv_heads(int rank) const;
  TpRange ff_blocks(int rank) const;  // blocks of 32 along F
  TpRange vocab(int rank) const;
  std::vector<int64_t> vocab_starts() const;  // (N + 1)
  // The dimensions rank r's forward runs with: H/N heads, Hkv/N kv heads, its F.
  ModelConfig rank_config(int rank) const;
  std::string describe() const;  // one line per rank for the start-up log

 private:
  static TpRange split(int64_t n, int size, int rank);
  ModelConfig c_;
  int size_ = 1;
};

// Which part of a weight a rank holds.
enum class TpWeight {
  Replicated,
  QkvRows,      // fused (H·Dh + 2·Hkv·Dh, ...) rows or bias: q, k, v rows of the rank's heads
  QRows,        // checkpoint q_proj weight or bias: rows of the rank's q heads
  KvRows,       // checkpoint k_proj / v_proj weight or bias
  OColumns,     // (D, H·Dh): columns of the rank's q heads
  Sinks,        // (H)
  GateUpRows,   // (E, 2F, ...): rows 2f .. of the rank's F range, per expert
  DownBlocks,   // (E, D, F/32, ...): the rank's blocks, per expert and row
  RankZeroOnly, // a bias added once: rank 0 keeps it, others hold zeros
  VocabRows,    // lm_head (V, D)
};

// Rank r's part of `full` (any device) as a new tensor on `device`, its buffer appended to
// `storage`. Replicated weights are copied too, so that `full` may be freed afterwards.
Result<Tensor> tp_slice(const Tensor& full, TpWeight kind, const TpPlan& plan, int rank, Device device,
                        std::vector<ops::Buffer>& storage);

}  // namespace mx
