// ops::Context: the state the ops of one engine share on one device, passed to every op. On the
// CUDA backend: the stream the ops queue on, the scratch workspace (reserved once when the engine
// is made, from its largest call: never grown while graphs hold its address), the cuBLASLt handle,
// the device's properties; on every backend: the settings that choose kernels (--moe-activation,
// a grouped-GEMM pin for tests and sweeps), the op profiler and the route recorder of the tests.
// Nothing of it is process state: two engines (a target and a draft on one GPU, or one per
// tensor-parallel rank, each on its thread) each have their own.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/heuristics.h"

namespace mx::cuda {
class Backend;  // kernels/cuda/backend.h
}

namespace mx::ops {

// Activations of the many-token MoE GEMMs: BF16, or FP8 E4M3 with one E8M0 scale per 32 values
// (x quantized in the expand that sorts the pairs by expert, the SwiGLU output in the gate_up
// epilogue; core/dtype.h quantize_mx_e4m3 is the rule). The CUDA grouped path (prefill) follows
// it; the decode GEMVs stay BF16. The CPU reference is fp32 unless a call asks for FP8, which it
// then emulates (the kernels' reference).
enum class MoeActivation { Default, BF16, FP8 };  // Default (in MoeArgs): the context's setting

// The shapes of the largest calls an engine makes, from which its context's CUDA scratch is sized
// (Context::scratch_bytes_for); a model and its draft each give theirs, the engine reserves the larger.
struct CallShapes {
  int64_t max_tokens = 0;       // T of a forward call
  int64_t max_rows = 0;         // rows sampled (or whose log-probabilities are taken) in a call
  int64_t max_in_features = 0;  // the widest linear input (D, H·Dh, an EAGLE-3 fc's 3·D)
  int64_t max_keys = 0;         // positions one sequence's attention reads (the model length)
  int64_t hidden = 0, heads = 0, kv_heads = 0;           // D, H, Hkv
  int64_t experts = 0, top_k = 0, expert_width = 0;      // E, K, F (0: no MoE)
  bool fp8_kv = false;
  bool fp8_moe = false;  // FP8 activations in the grouped MoE GEMMs (set from the context's setting)
};

// One op's time and traffic in a profile (Context::take_profile).
struct OpProfile {
  std::string name;  // op and kernel, e.g. "moe:bf16_mxfp4w_moe_gemv" ("moe:cpu" on the reference)
  int calls = 0;
  double microseconds = 0;
  double bytes = 0;
};

struct ContextOptions {
  MoeActivation moe_activation = MoeActivation::BF16;  // --moe-activation
  size_t scratch_bytes = 0;                            // reserved at creation (reserve_scratch)
};

class Context {
  struct BackendDeleter {
    void operator()(cuda::Backend* b) const;  // context.cpp: Backend is complete only in CUDA builds
  };

 public:
  Context();  // the CPU reference's: ops on host tensors need no device state
  // A context on `device`; on CUDA it takes the calling thread's current GPU and queues on that
  // GPU's legacy default stream, so the synchronous copies (ops::copy) stay ordered with its ops;
  // two contexts on one GPU share that stream, their work serialised (graph captures run on a
  // non-blocking stream of their own, which another context's work does not disturb).
  static Result<std::unique_ptr<Context>> create(Device device, const ContextOptions& o = {});
  // On CUDA where a device is present, else the CPU reference's (tests and benchmarks).
  static Result<std::unique_ptr<Context>> create_on_best_device(const ContextOptions& o = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device device() const { return device_; }
  cuda::Backend* cuda() const { return cuda_.get(); }  // null on the CPU
  // The CUDA half for `what` (an op or copy on device memory), or the error that this is a CPU context.
  Result<cuda::Backend*> cuda_for(const char* what) const;

  // The CUDA scratch grows to at least `bytes`; refused once a StepGraph was captured over this
  // context (the graphs hold its address). Ops never grow it: one that needs more fails, naming
  // both sizes. The CPU needs none.
  Status reserve_scratch(size_t bytes);
  size_t scratch_reserved() const;
  // What the ops need at most for calls up to `s` on this device (0 on the CPU).
  size_t scratch_bytes_for(const CallShapes& s) const;

  MoeActivation moe_activation() const { return moe_activation_; }
  void set_moe_activation(MoeActivation a) { moe_activation_ = a == MoeActivation::Default ? MoeActivation::BF16 : a; }
  heuristics::MoeGroupedPin moe_grouped_pin() const { return moe_grouped_pin_; }
  void pin_moe_grouped(heuristics::MoeGroupedPin p) { moe_grouped_pin_ = p; }

  // Profiling: while on, every op is timed (device events on CUDA) and the bytes it touched
  // counted. set_profiling may come from another thread than the one running the ops.
  void set_profiling(bool on) { profiling_ = on; }
  bool profiling() const { return profiling_; }
  struct Timing {
    std::string name;
    double bytes = 0;
    void* start = nullptr;  // device events (CUDA), or null with host_us (CPU)
    void* stop = nullptr;
    double host_us = 0;
  };
  void add_timing(Timing t) { timings_.push_back(std::move(t)); }
  std::vector<OpProfile> take_profile();  // waits for the device, returns and clears the table

  // The live RouteRecorder's list (ops/dispatch.cpp appends each op's route), or null.
  std::vector<std::string>* routes = nullptr;

 private:
  Device device_ = Device::CPU;
  std::unique_ptr<cuda::Backend, BackendDeleter> cuda_;
  MoeActivation moe_activation_ = MoeActivation::BF16;
  heuristics::MoeGroupedPin moe_grouped_pin_ = heuristics::MoeGroupedPin::kAuto;
  std::atomic<bool> profiling_{false};
  std::vector<Timing> timings_;
};

// The routes the ops of a context took while the recorder lived (tests pin their path with it):
// the names dispatch.cpp routes by, as the profile writes them: "<op>:<kernel stem>" on CUDA
// ("moe_router:bf16_bf16w_norm_router", "rmsnorm+linear:bf16_bf16w_gemm"), "<op>:cpu" on the
// reference ("router_topk:cpu"), in call order, ops routed inside another op included
// (moe_router's rmsnorm and linear). Contract errors are not routes. A recorder made while
// another lives on the context takes the routes until it ends, then hands them to the outer one.
class RouteRecorder {
 public:
  explicit RouteRecorder(Context& cx);
  ~RouteRecorder();
  RouteRecorder(const RouteRecorder&) = delete;
  RouteRecorder& operator=(const RouteRecorder&) = delete;
  const std::vector<std::string>& routes() const { return routes_; }

 private:
  Context& cx_;
  std::vector<std::string> routes_;
  std::vector<std::string>* outer_;  // the recorder this one took over from, or null
};

}  // namespace mx::ops
