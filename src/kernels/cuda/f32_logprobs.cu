// f32_logprobs: the sampling stage's log-probabilities on the GPU. f32_logprobs_topk: one block of
// 1024 threads per row that wants logprobs: one pass for the log-sum-exp (online max and sum per
// thread) and a floor under the k-th largest logit (the k-th largest of the 32 warp maxima); a
// second pass gathers the logits >= floor (a few dozen) into shared memory, ranked by (logit desc,
// id asc). A row whose gather overflows (ties) finds the exact k-th key by radix select instead.
// f32_logprobs_chosen: one warp per row, the sampled token's raw logit minus the log-sum-exp.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/util_kernels.h"
#include "kernels/logits_rule.h"

namespace mx::cuda::kern {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kCandidates = 1024;  // shared capacity of the gathered set
constexpr unsigned kFull = 0xffffffffu;
static_assert(kWarps >= kTopLogprobs, "the k-th largest warp maximum must exist");

// Calls f(v, x) for every logit x = l[v] of a row, as four float4 loads in flight per thread
// where the row is 16-byte aligned (a row alone is read by one SM: latency-bound otherwise).
template <typename F>
__device__ __forceinline__ void for_each_logit(const float* __restrict__ l, int64_t V, F f) {
  int64_t tail = 0;
  if ((reinterpret_cast<uintptr_t>(l) & 15) == 0) {
    const float4* l4 = reinterpret_cast<const float4*>(l);
    const int64_t n4 = V / 4;
    int64_t q = threadIdx.x;
    for (; q + 3 * kThreads < n4; q += 4 * kThreads) {
      float4 x[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) x[j] = l4[q + j * kThreads];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t v = 4 * (q + j * kThreads);
        f(v, x[j].x), f(v + 1, x[j].y), f(v + 2, x[j].z), f(v + 3, x[j].w);
      }
    }
    for (; q < n4; q += kThreads) {
      const float4 x = l4[q];
      f(4 * q, x.x), f(4 * q + 1, x.y), f(4 * q + 2, x.z), f(4 * q + 3, x.w);
    }
    tail = 4 * n4;
  }
  for (int64_t v = tail + threadIdx.x; v < V; v += kThreads) f(v, l[v]);
}

// Running max and Σ exp(x - max) of the finite-or-+inf logits seen (-inf and NaN hold no mass).
struct MaxSum {
  float m = -INFINITY, s = 0.0f;
  __device__ void add(float x) {
    if (!(x > -INFINITY)) return;
    if (x > m) s = s * expf(m - x) + 1.0f, m = x;
    else s += expf(x - m);
  }
  __device__ static MaxSum merge(MaxSum a, MaxSum b) {
    MaxSum r;
    r.m = fmaxf(a.m, b.m);
    if (r.m == -INFINITY) return r;
    r.s = (a.m == -INFINITY ? 0.0f : a.s * expf(a.m - r.m)) + (b.m == -INFINITY ? 0.0f : b.s * expf(b.m - r.m));
    return r;
  }
  __device__ MaxSum warp_merge() const {
    MaxSum r = *this;
    for (int off = 16; off > 0; off >>= 1) {
      MaxSum o;
      o.m = __shfl_xor_sync(kFull, r.m, off), o.s = __shfl_xor_sync(kFull, r.s, off);
      r = merge(r, o);
    }
    return r;
  }
  __device__ float lse() const { return isfinite(m) ? m + logf(s) : m; }  // as the CPU reference
};

struct TopkShared {
  float warp_m[kWarps], warp_s[kWarps];
  float lse;
  uint32_t floor;  // ukey <= the row's k-th largest
  int count;       // gathered so far (> kCandidates: overflowed)
  uint32_t cand_u[kCandidates];
  int32_t cand_id[kCandidates];
  int hist[256];
  int digit, remaining;
  int warp_n[kWarps];
};

// Pass 1: the row's log-sum-exp into sh.lse and the floor: of the 32 warp maxima, the k-th largest
// (k distinct logits are >= it, so the k-th largest logit of the row is too).
__device__ void lse_and_floor(const float* l, int64_t V, int k, TopkShared& sh) {
  MaxSum ms;
  for_each_logit(l, V, [&](int64_t, float x) { ms.add(x); });
  ms = ms.warp_merge();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) sh.warp_m[warp] = ms.m, sh.warp_s[warp] = ms.s;
  if (threadIdx.x == 0) sh.count = 0;
  __syncthreads();
  if (warp != 0) return;
  MaxSum w;
  w.m = sh.warp_m[lane], w.s = sh.warp_s[lane];
  const uint32_t key = logit_ukey(w.m);
  int rank = 0;  // among the warp maxima, ties by warp index
  for (int j = 0; j < kWarps; ++j) {
    const uint32_t o = __shfl_sync(kFull, key, j);
    rank += o > key || (o == key && j < lane);
  }
  if (k > 0 && rank == k - 1) sh.floor = key;
  w = w.warp_merge();
  if (lane == 0) sh.lse = w.lse();
}

// Pass 2: every logit with ukey >= floor into the candidates (order irrelevant: ranked later).
__device__ void gather_from_floor(const float* l, int64_t V, TopkShared& sh) {
  const uint32_t floor = sh.floor;
  for_each_logit(l, V, [&](int64_t v, float x) {
    const uint32_t u = logit_ukey(x);
    if (u < floor || *static_cast<volatile int*>(&sh.count) > kCandidates) return;
    const int at = atomicAdd(&sh.count, 1);
    if (at < kCandidates) sh.cand_u[at] = u, sh.cand_id[at] = int32_t(v);
  });
}

// Warp 0: the digit of the bin holding the remaining-th largest key among those with the prefix.
__device__ void pick_digit(TopkShared& sh, int remaining) {
  const int lane = threadIdx.x % 32;
  int c[8], sum = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) c[j] = sh.hist[8 * lane + j], sum += c[j];
  int suffix = sum;  // Σ over this lane's bins and all higher ones
  for (int off = 1; off < 32; off <<= 1) {
    const int o = __shfl_down_sync(kFull, suffix, off);
    if (lane + off < 32) suffix += o;
  }
  int above = suffix - sum;
  if (above >= remaining || suffix < remaining) return;
  for (int j = 7; j >= 0; --j) {
    if (above + c[j] >= remaining) {
      sh.digit = 8 * lane + j, sh.remaining = remaining - above;
      return;
    }
    above += c[j];
  }
}

// hist[bin] += 1, one atomic per group of lanes with the same bin (a constant row would otherwise
// serialise a whole row of atomics on one shared address).
__device__ __forceinline__ void add_to_bin(int* hist, uint32_t bin) {
  const unsigned peers = __match_any_sync(__activemask(), bin);
  if (int(threadIdx.x % 32) == __ffs(int(peers)) - 1) atomicAdd(&hist[bin], __popc(peers));
}

// The exact k-th largest ukey of the row (4 passes of 8 bits); *need: how many logits equal to it
// belong to the top k (the others above it number k - need).
__device__ uint32_t radix_select(const float* l, int64_t V, int k, TopkShared& sh, int* need) {
  uint32_t prefix = 0, mask = 0;
  int remaining = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) sh.hist[i] = 0;
    __syncthreads();
    for_each_logit(l, V, [&](int64_t, float x) {
      const uint32_t u = logit_ukey(x);
      if ((u & mask) == prefix) add_to_bin(sh.hist, (u >> shift) & 255);
    });
    __syncthreads();
    if (threadIdx.x < 32) pick_digit(sh, remaining);
    __syncthreads();
    prefix |= uint32_t(sh.digit) << shift, mask |= 0xffu << shift, remaining = sh.remaining;
  }
  *need = remaining;
  return prefix;
}

// The top k when the floor let too many through: the logits above the k-th key (order irrelevant),
// then the first `need` holding it in id order (chunks of kThreads ids, stops once enough).
__device__ void gather_exact(const float* l, int64_t V, int k, TopkShared& sh) {
  int need;
  const uint32_t kth = radix_select(l, V, k, sh, &need);
  if (threadIdx.x == 0) sh.count = 0;
  __syncthreads();
  for_each_logit(l, V, [&](int64_t v, float x) {
    const uint32_t u = logit_ukey(x);
    if (u <= kth) return;
    const int at = atomicAdd(&sh.count, 1);
    sh.cand_u[at] = u, sh.cand_id[at] = int32_t(v);
  });
  const int above = k - need, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t base = 0, taken = 0; base < V && taken < need; base += kThreads) {
    const int64_t v = base + threadIdx.x;
    const bool eq = v < V && logit_ukey(l[v]) == kth;
    const unsigned ballot = __ballot_sync(kFull, eq);
    if (lane == 0) sh.warp_n[warp] = __popc(ballot);
    __syncthreads();
    int64_t before = taken + __popc(ballot & ((1u << lane) - 1)), total = 0;
    for (int w = 0; w < kWarps; ++w) before += w < warp ? sh.warp_n[w] : 0, total += sh.warp_n[w];
    if (eq && before < need) sh.cand_u[above + before] = kth, sh.cand_id[above + before] = int32_t(v);
    taken += total;
    __syncthreads();
  }
  if (threadIdx.x == 0) sh.count = k;
}

// Writes the k best of the n candidates by rank (logit desc, id asc): ranks are distinct.
__device__ void write_ranked(const TopkShared& sh, int n, int k, int32_t* ids, float* logprobs) {
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const uint32_t u = sh.cand_u[i];
    const int32_t id = sh.cand_id[i];
    int rank = 0;
    for (int j = 0; j < n && rank < k; ++j) rank += sh.cand_u[j] > u || (sh.cand_u[j] == u && sh.cand_id[j] < id);
    if (rank < k) ids[rank] = id, logprobs[rank] = ukey_logit(u) - sh.lse;
  }
}

__global__ void __launch_bounds__(kThreads) f32_logprobs_topk(LogprobsTopkParams p) {
  __shared__ TopkShared sh;
  const int64_t r = blockIdx.x;
  const int32_t want = p.rows_k[r];
  if (want < 0) return;
  const int k = int(want < kTopLogprobs ? (want < p.V ? want : p.V) : (kTopLogprobs < p.V ? kTopLogprobs : p.V));
  const float* l = p.logits + r * p.V;
  lse_and_floor(l, p.V, k, sh);
  __syncthreads();
  if (threadIdx.x == 0) p.lse[r] = sh.lse;
  if (k == 0) return;
  gather_from_floor(l, p.V, sh);
  __syncthreads();
  if (sh.count > kCandidates) {
    __syncthreads();  // every thread has read the overflowed count before it is reset
    gather_exact(l, p.V, k, sh);
    __syncthreads();
  }
  write_ranked(sh, sh.count, k, p.top_ids + r * kTopLogprobs, p.top_logprobs + r * kTopLogprobs);
}

constexpr int kChosenThreads = 128;  // one warp per row

__global__ void __launch_bounds__(kChosenThreads) f32_logprobs_chosen(LogprobsChosenParams p) {
  const int64_t r = blockIdx.x * int64_t(kChosenThreads / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= p.R || p.rows_k[r] < 0) return;  // the warp leaves together
  const int32_t id = p.ids[r];
  if (id < 0 || id >= p.V) {
    if (lane == 0) p.logprobs[r] = NAN;
    return;
  }
  float raw = p.logits[r * p.V + id];
  const EntryRange e = entry_range(p.offsets, r, p.N);
  for (int64_t base = e.begin; base < e.end; base += 32) {  // the first entry of the row with this token
    const unsigned hit = __ballot_sync(kFull, base + lane < e.end && p.entries[4 * (base + lane)] == id);
    if (hit) {
      raw = p.saved[base + __ffs(int(hit)) - 1];
      break;
    }
  }
  if (lane == 0) p.logprobs[r] = raw - p.lse[r];
}

}  // namespace

cudaError_t run_f32_logprobs_topk(const LogprobsTopkParams& p, cudaStream_t s) {
  if (p.R == 0) return cudaSuccess;
  f32_logprobs_topk<<<unsigned(p.R), kThreads, 0, s>>>(p);
  return cudaGetLastError();
}

cudaError_t run_f32_logprobs_chosen(const LogprobsChosenParams& p, cudaStream_t s) {
  if (p.R == 0) return cudaSuccess;
  constexpr int rows_per_block = kChosenThreads / 32;
  f32_logprobs_chosen<<<unsigned((p.R + rows_per_block - 1) / rows_per_block), kChosenThreads, 0, s>>>(p);
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
