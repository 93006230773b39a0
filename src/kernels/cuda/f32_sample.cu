// f32_sample: ops::sample on the GPU. First `parts` blocks per row find the row's max, min and
// first argmax (one block alone reading a vocabulary-sized row was slow: docs/lab/RUNS_01-10.md,
// run 6); then one 1024-thread block per row merges those: greedy rows are done, the others find
// their thresholds (top-k, top-p, min-p) by bisection over order-preserving float keys with block
// reductions over the row (which stays in L2), then the draw walks the kept tokens in id order
// with a block scan.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/util_kernels.h"
#include "kernels/sample_rule.h"

namespace mx::cuda::kern {
namespace {

constexpr int kThreads = 1024;

template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T* smem) {
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = smem[lane < kThreads / 32 ? lane : 0];
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;  // every thread holds the result
}

struct Add {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Min {
  __device__ float operator()(float a, float b) const { return fminf(a, b); }
};

struct RowStats {  // of a part of a row
  float max, min;
  int32_t argmax;  // lowest index holding max (V if none: all NaN)
  int32_t unused;
};
static_assert(sizeof(RowStats) == kSampleStatBytes);

constexpr int kStatThreads = 256;

// Block (part, row): max, min and the first index of the max over its contiguous share of the row.
__global__ void __launch_bounds__(kStatThreads) f32_row_stats(const float* logits, int64_t V, RowStats* stats) {
  __shared__ float fs[kStatThreads / 32], ns[kStatThreads / 32];
  __shared__ int64_t is[kStatThreads / 32];
  const float* l = logits + blockIdx.y * V;
  const int64_t share = (V + gridDim.x - 1) / gridDim.x, begin = blockIdx.x * share;
  const int64_t end = begin + share < V ? begin + share : V;
  float mx = -INFINITY, mn = INFINITY;
  int64_t at = V;
  for (int64_t v = begin + threadIdx.x; v < end; v += kStatThreads) {
    const float x = l[v];
    if (x > mx) mx = x, at = v;  // ascending v: the first index of this thread's max
    mn = fminf(mn, x);
  }
  for (int off = 16; off > 0; off >>= 1) {
    const float om = __shfl_xor_sync(0xffffffffu, mx, off);
    const int64_t oa = __shfl_xor_sync(0xffffffffu, at, off);
    if (om > mx || (om == mx && oa < at)) mx = om, at = oa;
    mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, off));
  }
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) fs[warp] = mx, ns[warp] = mn, is[warp] = at;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kStatThreads / 32; ++w) {
    if (fs[w] > mx || (fs[w] == mx && is[w] < at)) mx = fs[w], at = is[w];
    mn = fminf(mn, ns[w]);
  }
  stats[blockIdx.y * gridDim.x + blockIdx.x] = RowStats{mx, mn, int32_t(at), 0};
}

__global__ void __launch_bounds__(kThreads) f32_sample(const float* logits, const float* params,
                                                              const int32_t* seeds, const int32_t* positions,
                                                              int32_t* ids, int64_t V, const RowStats* stats,
                                                              int parts) {
  __shared__ float fsm[32];
  __shared__ int64_t ism[32];
  __shared__ float scan[kThreads];
  const float* l = logits + blockIdx.x * V;
  const float temperature = params[blockIdx.x * 4], top_p = params[blockIdx.x * 4 + 1];
  const float min_p = params[blockIdx.x * 4 + 2];
  const int64_t top_k = int64_t(params[blockIdx.x * 4 + 3]);

  RowStats part{-INFINITY, INFINITY, int32_t(V), 0};
  if (int(threadIdx.x) < parts) part = stats[blockIdx.x * parts + threadIdx.x];
  const float m = block_reduce(part.max, Max{}, fsm);
  const float lowest = block_reduce(part.min, Min{}, fsm);
  if (temperature <= 0.0f) {  // greedy: lowest index of the max
    const int64_t first = part.max == m ? part.argmax : V;
    const int64_t best = block_reduce(first, [](int64_t a, int64_t b) { return a < b ? a : b; }, ism);
    if (threadIdx.x == 0) ids[blockIdx.x] = int32_t(best);
    return;
  }
  const int32_t top = float_key(m);
  int32_t t = float_key(lowest);
  auto count_ge = [&](int32_t key) {
    int64_t n = 0;
    for (int64_t v = threadIdx.x; v < V; v += kThreads) n += float_key(l[v]) >= key;
    return block_reduce(n, Add{}, ism);
  };
  auto mass_ge = [&](int32_t key) {
    float z = 0;
    for (int64_t v = threadIdx.x; v < V; v += kThreads)
      if (float_key(l[v]) >= key) z += expf((l[v] - m) / temperature);
    return block_reduce(z, Add{}, fsm);
  };
  // Largest key in [lo, hi] satisfying a monotone predicate that holds at lo.
  auto bisect = [&](int32_t lo, int32_t hi, auto pred) {
    while (lo < hi) {
      const int32_t mid = int32_t(lo + (int64_t(hi) - lo + 1) / 2);
      if (pred(mid)) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  if (top_k > 0 && top_k < V) t = bisect(t, top, [&](int32_t key) { return count_ge(key) >= top_k; });
  if (min_p > 0.0f) t = max(t, min(top, float_key(m + temperature * logf(min_p))));
  if (top_p < 1.0f) {
    const float target = top_p * mass_ge(t);
    t = bisect(t, top, [&](int32_t key) { return mass_ge(key) >= target; });
  }
  // Inverse CDF in id order: each thread owns a contiguous segment; scan the segment sums.
  const int64_t seg = (V + kThreads - 1) / kThreads;
  const int64_t begin = threadIdx.x * seg, end = begin + seg < V ? begin + seg : V;
  float local = 0;
  for (int64_t v = begin; v < end; ++v)
    if (float_key(l[v]) >= t) local += expf((l[v] - m) / temperature);
  scan[threadIdx.x] = local;
  __syncthreads();
  for (int off = 1; off < kThreads; off <<= 1) {  // inclusive Hillis-Steele scan
    const float add = threadIdx.x >= off ? scan[threadIdx.x - off] : 0.0f;
    __syncthreads();
    scan[threadIdx.x] += add;
    __syncthreads();
  }
  const float total = scan[kThreads - 1];
  const float u = sample_uniform(seeds[blockIdx.x], positions[blockIdx.x]) * total;
  const float before = threadIdx.x ? scan[threadIdx.x - 1] : 0.0f;
  // The thread whose range holds u walks its segment; if rounding leaves u past the end, the
  // last thread with mass takes its last kept token.
  const bool mine = (u >= before && u < scan[threadIdx.x] && local > 0) ||
                    (threadIdx.x == kThreads - 1 && u >= total);
  if (mine) {
    float acc = before;
    int64_t pick = -1;
    for (int64_t v = begin; v < end; ++v) {
      if (float_key(l[v]) < t) continue;
      acc += expf((l[v] - m) / temperature);
      pick = v;
      if (acc > u) break;
    }
    if (pick >= 0) ids[blockIdx.x] = int32_t(pick);
  }
  if (threadIdx.x == kThreads - 1 && u >= total) {  // fallback: the last kept token of the row
    for (int64_t v = V - 1; v >= 0; --v)
      if (float_key(l[v]) >= t) {
        ids[blockIdx.x] = int32_t(v);
        break;
      }
  }
}

}  // namespace

cudaError_t run_f32_sample(const float* logits, const float* params, const int32_t* seeds, const int32_t* positions,
                           int32_t* ids, int64_t R, int64_t V, int parts, void* stats, cudaStream_t s) {
  if (R == 0) return cudaSuccess;
  if (parts < 1 || parts > kSampleMaxParts || R > 65535) return cudaErrorInvalidValue;
  RowStats* st = static_cast<RowStats*>(stats);
  f32_row_stats<<<dim3(unsigned(parts), unsigned(R)), kStatThreads, 0, s>>>(logits, V, st);
  f32_sample<<<unsigned(R), kThreads, 0, s>>>(logits, params, seeds, positions, ids, V, st, parts);
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
