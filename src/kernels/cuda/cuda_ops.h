// CUDA backend entry points called by kernels/dispatch.cpp and kernels/memory.cpp. Activations
// are BF16, accumulation FP32. Host-side declarations only (no CUDA headers), so that C++ files
// can include it. All launches go to the current stream (cuda::current_stream()).
#pragma once

#include <cstddef>

#include "kernels/ops.h"

namespace mx::cuda {

// memory.cu
int device_count();
Result<void*> device_malloc(size_t bytes);
void device_free(void* p);
Status memcpy_any(void* dst, const void* src, size_t bytes);  // cudaMemcpyDefault, synchronous
Status synchronize();
void* current_stream();  // cudaStream_t of the engine (default: the legacy stream)
void set_current_stream(void* stream);

// ops (one file per kernel family)
Status embed(const ops::EmbedArgs& a);
Status rmsnorm(const ops::RmsNormArgs& a);
Status linear(const ops::LinearArgs& a);
Status gather_rows(const ops::GatherRowsArgs& a);
Status qkv_rope_cache(const ops::QkvRopeCacheArgs& a);
Status attention(const ops::AttentionArgs& a);
Status router_topk(const ops::RouterTopkArgs& a);
Status moe(const ops::MoeArgs& a);

}  // namespace mx::cuda
