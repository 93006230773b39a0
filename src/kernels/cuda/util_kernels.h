// Raw launchers of the utility kernels (util_kernels.cu): seeded random fill, i32 add,
// and (f32_sample.cu) token sampling.
// Called by launch_util_ops.cpp, which checks the contracts.
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
cudaError_t run_add_i32(int32_t* x, int64_t n, int32_t value, cudaStream_t s);
cudaError_t run_take_prev_tokens(int32_t* tokens, const int32_t* from, const int32_t* prev, int64_t T, int64_t P,
                                 cudaStream_t s);
cudaError_t run_apply_table_updates(int32_t* tables, int64_t rows, int64_t width, const int32_t* updates, int64_t U,
                                    const int32_t* count, cudaStream_t s);

}  // namespace mx::cuda::kern
