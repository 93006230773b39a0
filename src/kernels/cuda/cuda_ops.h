// CUDA backend entry points called by kernels/dispatch.cpp and kernels/memory.cpp. Activations
// are BF16, accumulation FP32. Host-side declarations only (no CUDA headers), so that C++ files
// can include it. Every launch goes to the stream of the Backend it is given (an ops::Context's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "kernels/heuristics.h"
#include "kernels/ops.h"

namespace mx::cuda {

class Backend;  // backend.h

// memory.cpp
int device_count();
Result<void*> device_malloc(size_t bytes);
void device_free(void* p);
Status memcpy_any(void* dst, const void* src, size_t bytes);  // cudaMemcpyDefault, synchronous
Status memcpy_async(const Backend& b, void* dst, const void* src, size_t bytes);  // on b's stream
Status memcpy_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height);  // synchronous
Status memcpy_2d_async(const Backend& b, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                       size_t height);  // on b's stream
Result<void*> host_malloc_pinned(size_t bytes);
void host_free_pinned(void* p);
Result<void*> event_create();  // a cudaEvent_t without timing
Status event_record_on_stream(const Backend& b, void* event);  // on b's stream
Status event_synchronize(void* event);
void event_destroy(void* event);
Status synchronize(const Backend& b);  // waits for b's stream
// The scratch the ops need at most for calls up to `s` (the largest of the kernel families').
size_t scratch_bytes_for(const Backend& b, const ops::CallShapes& s);

// ops (one file per kernel family)
Status embed(Backend& b, const ops::EmbedArgs& a);
Status rmsnorm(Backend& b, const ops::RmsNormArgs& a);
Status linear_gemv(Backend& b, const ops::LinearArgs& a);  // bf16_bf16w_gemv, T <= kern::kGemvMaxTokens, input norm fused
Status linear_gemm(Backend& b, const ops::LinearArgs& a);  // cuBLASLt (after the rmsnorm kernel with an input norm)
bool linear_gemv_supported(const ops::LinearArgs& a);  // shape/alignment contract of the GEMV
// The kernel stems these launchers run for a call (profile and route names, dispatch.cpp):
// bf16_bf16w_gemv, bf16_mxfp4w_gemv (T = 1) or bf16_mxfp4w_gemv_mma; the tiled prefill attention kAuto picks.
const char* linear_gemv_kernel_name(const ops::LinearArgs& a);
const char* qkv_projection_kernel_name(const ops::QkvProjectionArgs& a);
const char* attention_prefill_kernel_name();
Status gather_rows(Backend& b, const ops::GatherRowsArgs& a);
Status silu_mul(Backend& b, const ops::SiluMulArgs& a);  // bf16_silu_mul (launch_dense.cpp)
Status qkv_rope_cache(Backend& b, const ops::QkvRopeCacheArgs& a);
Status kv_scales(Backend& b, const ops::KvScalesArgs& a);  // bf16_kv_scales
// qkv_projection for T <= kern::kGemvMaxTokens: bf16_bf16w_gemv with the RoPE + cache epilogue
Status qkv_projection_fused(Backend& b, const ops::QkvProjectionArgs& a);
bool qkv_projection_fused_supported(const ops::QkvProjectionArgs& a);
Status attention_decode(Backend& b, const ops::AttentionArgs& a);   // bf16_attention_decode: split-K, any T
// Tiled attention for many tokens: sm90_bf16_attention_prefill where the device runs this build's
// sm_90a code (kAuto), else bf16_attention_prefill (mma.sync); tests name each kernel.
enum class PrefillKernel { kAuto, kMmaSync, kWgmma };
Status attention_prefill(Backend& b, const ops::AttentionArgs& a, PrefillKernel kernel = PrefillKernel::kAuto);
bool attention_prefill_wgmma_available();
bool attention_prefill_supported(const Backend& b, const ops::AttentionArgs& a);  // head_dim, group size, alignment
Status router_topk(Backend& b, const ops::RouterTopkArgs& a);
// moe_router's norm + router GEMV for T <= kern::kRouterFusedMaxTokens: bf16_bf16w_norm_router
// (launch_router.cpp); the top-k, when asked for, runs after it (router_topk)
Status moe_router_fused(Backend& b, const ops::MoeRouterArgs& a);
bool moe_router_fused_supported(const ops::MoeRouterArgs& a);  // the fused kernel's contract
Status moe(Backend& b, const ops::MoeArgs& a);
bool moe_selects_supported(int64_t E);  // moe can select from E experts' logits (E <= kTopkMaxExperts)
Status moe_grouped(Backend& b, const ops::MoeArgs& a, heuristics::MoeGroupedPin pin);  // many tokens: sort by expert, grouped GEMMs (launch_moe_grouped.cpp)
bool moe_grouped_wgmma_available();
// The family a call runs under `pin` (heuristics::plan_moe_grouped), as its profile and route name it.
const char* moe_grouped_kernel_name(const ops::MoeArgs& a, heuristics::MoeGroupedPin pin);

// utility ops (util_kernels.cu, launch_util_ops.cpp) and op timing events (profile_events.cpp)
Status fill_random(Backend& b, const ops::FillRandomArgs& a);
Status sample(Backend& b, const ops::SampleArgs& a);  // f32_sample.cu
// the sampling stage's logits ops (launch_sampling.cpp): f32_logprobs.cu, f32_logits_process.cu
Status logprobs_topk(Backend& b, const ops::LogprobsTopkArgs& a);
Status logits_process(Backend& b, const ops::LogitsProcessArgs& a);
Status logprobs_chosen(Backend& b, const ops::LogprobsChosenArgs& a);
Status add_i32(Backend& b, const ops::AddI32Args& a);
Status take_prev_tokens(Backend& b, const ops::TakePrevTokensArgs& a);
Status apply_table_updates(Backend& b, const ops::TableUpdatesArgs& a);
Status mem_info(size_t* free_bytes, size_t* total_bytes);
int device_compute_capability();  // the current GPU's, 10 x major + minor
// Captures step() on a fresh stream into an instantiated graph (cudaGraphExec_t), replays it on
// the engine stream, destroys it.
Result<void*> graph_capture(Backend& b, const std::function<Status()>& step);
Status graph_replay(const Backend& b, void* exec);
void graph_destroy(void* exec);
void* event_record(const Backend& b);  // records a timing event on b's stream
double event_elapsed_us(void* a, void* b);  // after a synchronize; frees both events

}  // namespace mx::cuda
