// Raw launchers of the utility kernels (util_kernels.cu): seeded random fill, i32 add,
// (f32_sample.cu) token sampling and the sampling stage's logits ops (f32_logprobs.cu,
// f32_logits_process.cu). Called by launch_util_ops.cpp and launch_sampling.cpp, which check the contracts.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mx::cuda::kern {

enum class FillKind { F32, BF16, U8 };
cudaError_t run_fill_random(void* out, FillKind kind, int64_t n, uint64_t seed, float scale, float offset, int lo,
                            int hi, cudaStream_t s);
// f32_sample.cu (ops::sample): `parts` blocks per row (1..kSampleMaxParts) first find each row's
// max, min and first argmax, into `stats` (R * parts * kSampleStatBytes of scratch).
inline constexpr int kSampleMaxParts = 64;
inline constexpr size_t kSampleStatBytes = 16;
cudaError_t run_f32_sample(const float* logits, const float* params, const int32_t* seeds, const int32_t* positions,
                           int32_t* ids, int64_t R, int64_t V, int parts, void* stats, cudaStream_t s);
// The sampling stage (ops.h, "the engine step's sampling stage"): graph-safe, no scratch; rows
// that want nothing exit at once. Entries are ops::LogitsEntry records, (N, 4) i32.
inline constexpr int kTopLogprobs = 20;  // ops::kMaxTopLogprobs
enum EntryKind : int32_t { kEntryPenalty = 0, kEntryBias = 1, kEntryBan = 2, kEntryMask = 3, kEntryMaskOthers = 4 };  // ops::LogitsEntryKind
struct LogprobsTopkParams {
  const float* logits;  // (R, V)
  const int32_t* rows_k;  // (R)
  int64_t R, V;
  float* lse;             // (R)
  int32_t* top_ids;       // (R, kTopLogprobs)
  float* top_logprobs;    // (R, kTopLogprobs)
};
cudaError_t run_f32_logprobs_topk(const LogprobsTopkParams& p, cudaStream_t s);
struct LogitsProcessParams {
  float* logits;  // (R, V)
  int64_t R, V;
  const float* penalties;  // (R, 3)
  const int32_t* offsets;  // (R + 1)
  const int32_t* entries;  // (N, 4)
  int64_t N;
  float* saved;  // (N)
};
cudaError_t run_f32_logits_process(const LogitsProcessParams& p, cudaStream_t s);
struct LogprobsChosenParams {
  const float* logits;  // (R, V)
  int64_t R, V;
  const int32_t* offsets;  // (R + 1)
  const int32_t* entries;  // (N, 4)
  int64_t N;
  const float* saved;    // (N)
  const int32_t* ids;    // (R)
  const int32_t* rows_k;  // (R)
  const float* lse;      // (R)
  float* logprobs;       // (R)
};
cudaError_t run_f32_logprobs_chosen(const LogprobsChosenParams& p, cudaStream_t s);
cudaError_t run_add_i32(int32_t* x, int64_t n, int32_t value, cudaStream_t s);
cudaError_t run_take_prev_tokens(int32_t* tokens, const int32_t* from, const int32_t* prev, int64_t T, int64_t P,
                                 cudaStream_t s);
cudaError_t run_apply_table_updates(int32_t* tables, int64_t rows, int64_t width, const int32_t* updates, int64_t U,
                                    const int32_t* count, cudaStream_t s);

}  // namespace mx::cuda::kern
