// Tensor parallelism's communication (docs/TENSOR_PARALLEL.md): N ranks run the same forward,
// each over its shard of the weights, and meet in three collectives — the sum of the layers'
// partial outputs, the gather of the logits' vocabulary slices, and the broadcast of the sampled
// ids. A Collective is one rank's end of a group. The CPU backend's group (threads meeting at a
// barrier) is the reference and CI's stand-in; the CUDA group (rank r on GPU r) runs one-shot
// kernels over peer memory that synchronise on the GPUs, so a step never waits on the host and a
// decode step is captured in a CUDA graph like a single-GPU one.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/context.h"

namespace mx::ops {

// The two partial sums of a layer: the o projection's and the experts'.
enum class PartialSlot { Attention, Experts };

// Sizes a group's buffers are made for.
struct CollectiveShape {
  int64_t max_tokens = 0;            // T of a forward call at most
  int64_t width = 0;                 // D: columns of the partial sums
  int64_t max_rows = 0;              // logit rows of a call at most
  std::vector<int64_t> vocab_starts; // (N + 1): rank r's logits are columns [starts[r], starts[r+1])

  int64_t cols(int r) const { return vocab_starts[size_t(r) + 1] - vocab_starts[size_t(r)]; }
  int64_t max_cols() const {
    int64_t m = 0;
    for (size_t r = 0; r + 1 < vocab_starts.size(); ++r) m = std::max(m, cols(int(r)));
    return m;
  }
};

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // This rank's (T, width) act buffer for a partial sum. Attention: any content (the o projection
  // overwrites it). Experts: all zeros (the experts accumulate into it), provided the Attention
  // all-reduce of the same layer ran before (the backend may clear it there).
  virtual Result<Tensor> partial(Context& cx, PartialSlot s, int64_t T) = 0;
  // x += Σ over ranks, in rank order, of the slot's partial sums: the same values on every rank.
  virtual Status all_reduce_add(Context& cx, PartialSlot s, const Tensor& x) = 0;

  // This rank's (R, its vocabulary columns) f32 logits buffer.
  virtual Result<Tensor> local_logits(int64_t R) = 0;
  // Rank 0: `full` (R, V) f32 = every rank's local logits at its columns. Other ranks pass an empty
  // tensor and only take part.
  virtual Status gather_logits(Context& cx, const Tensor& full, int64_t R) = 0;

  // Every rank binds one i32 buffer (once, before the first broadcast); broadcast(n) then copies
  // rank 0's first n values into every other rank's.
  virtual Status bind_broadcast(const Tensor& buf) = 0;
  virtual Status broadcast(Context& cx, int64_t n) = 0;
};

// The collectives as ops: what the forward calls, timed by the profiler like every op (dispatch.cpp).
// The collectives as ops (routed and profiled like the others), on the context of this rank.
Status all_reduce_add(Context& cx, Collective& c, PartialSlot s, const Tensor& x);
Status gather_logits(Context& cx, Collective& c, const Tensor& full, int64_t R, Device device);
Status broadcast(Context& cx, Collective& c, int64_t n, Device device);

// One Collective per rank. CPU: ranks are threads of this process. CUDA: rank r on GPU r, with
// peer access enabled between every pair (an error names a pair that has none).
Result<std::vector<std::shared_ptr<Collective>>> make_collectives(Device device, int size,
                                                                  const CollectiveShape& shape);
// How the CUDA group communicates, for the start-up log ("one-shot all-reduce over peer memory ...").
std::string describe_collectives(Device device, int size);

// The calling thread's current GPU when `device` is CUDA (else nothing). Rank r's thread selects
// GPU r before it allocates or launches anything.
Status use_gpu(Device device, int index);
// f() with the calling thread on GPU `index` (when `device` is CUDA), then back on GPU 0; f's
// Status or Result, or the error of switching.
template <typename F>
auto on_gpu(Device device, int index, F&& f) -> decltype(f()) {
  if (Status st = use_gpu(device, index); !st.ok()) return st;
  auto out = f();
  if (Status st = use_gpu(device, 0); !st.ok()) return st;
  return out;
}
int gpu_count();

}  // namespace mx::ops
