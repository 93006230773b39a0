// Launchers of the utility ops (fill_random, sample, add_i32, the step prologue) and the op-timing events.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/launch_util.h"
#include "kernels/cuda/util_kernels.h"

namespace mx::cuda {
namespace {
Status launched(const char* what, cudaError_t err) {
  MX_CHECK(err == cudaSuccess, "{}: launch failed: {}", what, cudaGetErrorString(err));
  return ok_status();
}

// f32_sample's max/argmax pass: about two blocks per SM over all rows, at most kSampleMaxParts per
// row; and the per-part statistics it keeps in the scratch.
int sample_parts(const Backend& b, int64_t R) {
  const int64_t per_row = 2 * int64_t(b.sm_count()) / std::max<int64_t>(R, 1);
  return int(std::clamp<int64_t>(per_row, 1, kern::kSampleMaxParts));
}
size_t sample_stats_bytes(int64_t R, int parts) {
  return size_t(std::max<int64_t>(R, 1)) * size_t(parts) * kern::kSampleStatBytes;
}

// f32_sample's contract, with the reason it fails (empty when the kernel can run).
std::string sample_contract_violation(const ops::SampleArgs& a) {
  if (a.logits.dim(0) > 65535) return fmt::format("{} rows > 65535 (the grid's y dimension)", a.logits.dim(0));
  return {};
}
}  // namespace

Status fill_random(Backend& b, const ops::FillRandomArgs& a) {
  const kern::FillKind kind = a.out.dtype == DType::U8     ? kern::FillKind::U8
                              : a.out.dtype == DType::BF16 ? kern::FillKind::BF16
                                                           : kern::FillKind::F32;
  return launched("fill_random", kern::run_fill_random(a.out.data, kind, a.out.numel(), a.seed, a.scale, a.offset,
                                                       a.byte_lo, a.byte_hi, b.stream()));
}

Status sample(Backend& b, const ops::SampleArgs& a) {
  const std::string bad = sample_contract_violation(a);
  MX_CHECK(bad.empty(), "f32_sample: {}", bad);
  const int64_t R = a.logits.dim(0), V = a.logits.dim(1);
  const int parts = sample_parts(b, R);
  void* stats;
  MX_ASSIGN(stats, b.workspace(sample_stats_bytes(R, parts), "f32_sample"));
  return launched("f32_sample", kern::run_f32_sample(a.logits.ptr<const float>(), a.params.ptr<const float>(),
                                                     a.seeds.ptr<const int32_t>(), a.positions.ptr<const int32_t>(),
                                                     a.ids.ptr<int32_t>(), R, V, parts, stats, b.stream()));
}

size_t sample_scratch_bytes(const Backend& b, const ops::CallShapes& s) {
  size_t most = 0;
  for (int64_t R = 1; R <= std::max<int64_t>(s.max_rows, 1); ++R) most = std::max(most, sample_stats_bytes(R, sample_parts(b, R)));
  return most;
}

Status add_i32(Backend& b, const ops::AddI32Args& a) {
  return launched("add_i32", kern::run_add_i32(a.x.ptr<int32_t>(), a.x.numel(), a.value, b.stream()));
}

Status take_prev_tokens(Backend& b, const ops::TakePrevTokensArgs& a) {
  return launched("take_prev_tokens",
                  kern::run_take_prev_tokens(a.tokens.ptr<int32_t>(), a.from.ptr<const int32_t>(),
                                             a.prev.ptr<const int32_t>(), a.tokens.numel(), a.prev.numel(),
                                             b.stream()));
}

Status apply_table_updates(Backend& b, const ops::TableUpdatesArgs& a) {
  return launched("apply_table_updates",
                  kern::run_apply_table_updates(a.tables.ptr<int32_t>(), a.tables.dim(0), a.tables.dim(1),
                                                a.updates.ptr<const int32_t>(), a.updates.dim(0),
                                                a.count.ptr<const int32_t>(), b.stream()));
}

void* event_record(const Backend& b) {
  cudaEvent_t e = nullptr;
  cudaEventCreate(&e);
  cudaEventRecord(e, b.stream());
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

int device_compute_capability() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return 10 * major + minor;
}

// The ops of step() queue on b's stream: a fresh one while it is captured, non-blocking, so that
// another context's work on the legacy stream meanwhile (a second engine's thread) does not
// synchronise with it, which would invalidate the capture. Once a graph holds the scratch's
// address, the scratch may no longer move (Backend::reserve).
Result<void*> graph_capture(Backend& b, const std::function<Status()>& step) {
  const cudaStream_t previous = b.stream();
  cudaStream_t s = nullptr;
  MX_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "cudaStreamCreate failed");
  b.set_stream(s);
  b.mark_captured();
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  Status st = err == cudaSuccess ? step() : MX_ERROR("cudaStreamBeginCapture: {}", cudaGetErrorString(err));
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  b.set_stream(previous);
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

Status graph_replay(const Backend& b, void* exec) {
  const cudaError_t err = cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), b.stream());
  MX_CHECK(err == cudaSuccess, "cudaGraphLaunch: {}", cudaGetErrorString(err));
  return ok_status();
}

void graph_destroy(void* exec) { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec)); }

}  // namespace mx::cuda
