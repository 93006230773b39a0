// Launchers of the engine step's sampling-stage logits ops (f32_logprobs.cu, f32_logits_process.cu):
// dispatch has checked the shapes; the row contents (rows_k, offsets, entries, ids) are device data
// and are bounded by the kernels themselves. Nothing here allocates or synchronises (graph-safe).
#include <climits>
#include <cstddef>
#include <string>

#include "kernels/cuda/launch_util.h"
#include "kernels/cuda/util_kernels.h"

namespace mx::cuda {

static_assert(kern::kTopLogprobs == ops::kMaxTopLogprobs);
static_assert(kern::kEntryPenalty == int32_t(ops::LogitsEntryKind::Penalty) &&
              kern::kEntryBias == int32_t(ops::LogitsEntryKind::Bias) &&
              kern::kEntryBan == int32_t(ops::LogitsEntryKind::Ban) &&
              kern::kEntryMask == int32_t(ops::LogitsEntryKind::Mask));
static_assert(offsetof(ops::LogitsEntry, token) == 0 && offsetof(ops::LogitsEntry, kind) == 4 &&
              offsetof(ops::LogitsEntry, count) == 8 && offsetof(ops::LogitsEntry, aux) == 12);

namespace {
// The contract of the kernels with one block per row (f32_logprobs_topk, f32_logits_process), with
// the reason it fails (empty when the kernel can run).
std::string block_per_row_contract_violation(int64_t R) {
  if (R > INT_MAX) return fmt::format("{} rows exceed the grid (one block each, at most {})", R, INT_MAX);
  return {};
}
}  // namespace

Status logprobs_topk(Backend& b, const ops::LogprobsTopkArgs& a) {
  const std::string bad = block_per_row_contract_violation(a.logits.dim(0));
  MX_CHECK(bad.empty(), "f32_logprobs_topk: {}", bad);
  const kern::LogprobsTopkParams p{.logits = a.logits.ptr<const float>(),
                                   .rows_k = a.rows_k.ptr<const int32_t>(),
                                   .R = a.logits.dim(0),
                                   .V = a.logits.dim(1),
                                   .lse = a.lse.ptr<float>(),
                                   .top_ids = a.top_ids.ptr<int32_t>(),
                                   .top_logprobs = a.top_logprobs.ptr<float>()};
  return kernel_status("f32_logprobs_topk", kern::run_f32_logprobs_topk(p, b.stream()));
}

Status logits_process(Backend& b, const ops::LogitsProcessArgs& a) {
  const std::string bad = block_per_row_contract_violation(a.logits.dim(0));
  MX_CHECK(bad.empty(), "f32_logits_process: {}", bad);
  const kern::LogitsProcessParams p{.logits = a.logits.ptr<float>(),
                                    .R = a.logits.dim(0),
                                    .V = a.logits.dim(1),
                                    .penalties = a.penalties.ptr<const float>(),
                                    .offsets = a.offsets.ptr<const int32_t>(),
                                    .entries = a.entries.ptr<const int32_t>(),
                                    .N = a.entries.dim(0),
                                    .saved = a.saved.ptr<float>()};
  return kernel_status("f32_logits_process", kern::run_f32_logits_process(p, b.stream()));
}

Status logprobs_chosen(Backend& b, const ops::LogprobsChosenArgs& a) {
  const kern::LogprobsChosenParams p{.logits = a.logits.ptr<const float>(),
                                     .R = a.logits.dim(0),
                                     .V = a.logits.dim(1),
                                     .offsets = a.offsets.ptr<const int32_t>(),
                                     .entries = a.entries.ptr<const int32_t>(),
                                     .N = a.entries.dim(0),
                                     .saved = a.saved.ptr<const float>(),
                                     .ids = a.ids.ptr<const int32_t>(),
                                     .rows_k = a.rows_k.ptr<const int32_t>(),
                                     .lse = a.lse.ptr<const float>(),
                                     .logprobs = a.logprobs.ptr<float>()};
  return kernel_status("f32_logprobs_chosen", kern::run_f32_logprobs_chosen(p, b.stream()));
}

}  // namespace mx::cuda
