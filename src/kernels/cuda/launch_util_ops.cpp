// Launchers of the utility ops (fill_random, sample, add_i32, the step prologue) and the op-timing events.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/launch_util.h"
#include "kernels/cuda/util_kernels.h"

namespace mx::cuda {
namespace {
cudaStream_t engine_stream() { return static_cast<cudaStream_t>(current_stream()); }

Status launched(const char* what, cudaError_t err) {
  MX_CHECK(err == cudaSuccess, "{}: launch failed: {}", what, cudaGetErrorString(err));
  return ok_status();
}

// f32_sample's contract, with the reason it fails (empty when the kernel can run).
std::string sample_contract_violation(const ops::SampleArgs& a) {
  if (a.logits.dim(0) > 65535) return fmt::format("{} rows > 65535 (the grid's y dimension)", a.logits.dim(0));
  return {};
}
}  // namespace

Status fill_random(const ops::FillRandomArgs& a) {
  const kern::FillKind kind = a.out.dtype == DType::U8     ? kern::FillKind::U8
                              : a.out.dtype == DType::BF16 ? kern::FillKind::BF16
                                                           : kern::FillKind::F32;
  return launched("fill_random", kern::run_fill_random(a.out.data, kind, a.out.numel(), a.seed, a.scale, a.offset,
                                                       a.byte_lo, a.byte_hi, engine_stream()));
}

Status sample(const ops::SampleArgs& a) {
  const std::string bad = sample_contract_violation(a);
  MX_CHECK(bad.empty(), "f32_sample: {}", bad);
  const int64_t R = a.logits.dim(0), V = a.logits.dim(1);
  // About two blocks per SM over all rows for the max/argmax pass, at most kSampleMaxParts per row.
  const int64_t per_row = 2 * int64_t(sm_count()) / std::max<int64_t>(R, 1);
  const int parts = int(std::clamp<int64_t>(per_row, 1, kern::kSampleMaxParts));
  void* stats;
  MX_ASSIGN(stats, workspace(size_t(std::max<int64_t>(R, 1)) * size_t(parts) * kern::kSampleStatBytes));
  return launched("f32_sample", kern::run_f32_sample(a.logits.ptr<const float>(), a.params.ptr<const float>(),
                                                     a.seeds.ptr<const int32_t>(), a.positions.ptr<const int32_t>(),
                                                     a.ids.ptr<int32_t>(), R, V, parts, stats, engine_stream()));
}

Status add_i32(const ops::AddI32Args& a) {
  return launched("add_i32", kern::run_add_i32(a.x.ptr<int32_t>(), a.x.numel(), a.value, engine_stream()));
}

Status take_prev_tokens(const ops::TakePrevTokensArgs& a) {
  return launched("take_prev_tokens",
                  kern::run_take_prev_tokens(a.tokens.ptr<int32_t>(), a.from.ptr<const int32_t>(),
                                             a.prev.ptr<const int32_t>(), a.tokens.numel(), a.prev.numel(),
                                             engine_stream()));
}

Status apply_table_updates(const ops::TableUpdatesArgs& a) {
  return launched("apply_table_updates",
                  kern::run_apply_table_updates(a.tables.ptr<int32_t>(), a.tables.dim(0), a.tables.dim(1),
                                                a.updates.ptr<const int32_t>(), a.updates.dim(0),
                                                a.count.ptr<const int32_t>(), engine_stream()));
}

void* event_record() {
  cudaEvent_t e = nullptr;
  cudaEventCreate(&e);
  cudaEventRecord(e, engine_stream());
  return e;
}

double event_elapsed_us(void* a, void* b) {
  float ms = 0;
  cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(a), static_cast<cudaEvent_t>(b));
  cudaEventDestroy(static_cast<cudaEvent_t>(a));
  cudaEventDestroy(static_cast<cudaEvent_t>(b));
  return double(ms) * 1000.0;
}

}  // namespace mx::cuda

namespace mx::cuda {

Status mem_info(size_t* free_bytes, size_t* total_bytes) {
  const cudaError_t err = cudaMemGetInfo(free_bytes, total_bytes);
  MX_CHECK(err == cudaSuccess, "cudaMemGetInfo: {}", cudaGetErrorString(err));
  return ok_status();
}

int device_compute_capability() { return compute_capability(); }

Result<void*> graph_capture(const std::function<Status()>& step) {
  void* const previous = current_stream();
  cudaStream_t s = nullptr;
  MX_CHECK(cudaStreamCreate(&s) == cudaSuccess, "cudaStreamCreate failed");
  set_current_stream(s);
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  Status st = err == cudaSuccess ? step() : MX_ERROR("cudaStreamBeginCapture: {}", cudaGetErrorString(err));
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  set_current_stream(previous);
  cudaStreamDestroy(s);
  if (!st.ok()) {
    if (graph) cudaGraphDestroy(graph);
    return st.with_context("capturing a CUDA graph");
  }
  MX_CHECK(end == cudaSuccess, "cudaStreamEndCapture: {}", cudaGetErrorString(end));
  cudaGraphExec_t exec = nullptr;
  err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  MX_CHECK(err == cudaSuccess, "cudaGraphInstantiate: {}", cudaGetErrorString(err));
  return static_cast<void*>(exec);
}

Status graph_replay(void* exec) {
  const cudaError_t err = cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), engine_stream());
  MX_CHECK(err == cudaSuccess, "cudaGraphLaunch: {}", cudaGetErrorString(err));
  return ok_status();
}

void graph_destroy(void* exec) { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec)); }

}  // namespace mx::cuda
