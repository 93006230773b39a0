// bf16_attention_decode: attention with sinks (and an optional sliding window) over the paged
// BF16 KV cache, split over the key range (flash-decoding). A block owns (token, kv head, split)
// and the group's <= 8 q heads, so each K/V load serves all of them. With one split the block
// writes the output itself; with several, the last split block of a (token, kv head) to finish
// (device-memory counter) merges them with the sinks. Any T: each token attends to 0..pos.
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

constexpr int kWarps = 4;
constexpr int kDh = kAttnHeadDim;   // 64 = 8 lanes x 8 dims
constexpr int kG = kAttnMaxGroup;   // q heads per kv head, padded to 8
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kEmpty = -1e30f;    // running max before any key (finite: exp2(kEmpty - m) = 0)

// Split blocks of each (token, kv head) that have stored their partials; the last one merges and
// resets its counter to 0, so the counters are zero between calls.
__device__ unsigned int g_splits_done[kAttnMergeCounters];

__device__ __forceinline__ float sink_log2(const AttentionParams& p, int h) {
  return (p.sinks_f32 ? static_cast<const float*>(p.sinks)[h]
                      : __bfloat162float(static_cast<const __nv_bfloat16*>(p.sinks)[h])) * kLog2e;
}

// Merges the splits of q heads h0..h0+n-1 of token t with their sinks, by the whole block:
// out = sum_s o_s 2^(m_s - M) / (2^(sink - M) + sum_s l_s 2^(m_s - M)), M = max(sink, max_s m_s).
// The partials are read through L2 (__ldcg): other blocks wrote them.
__device__ void merge_splits(const AttentionParams& p, int64_t t, int h0, int n) {
  __shared__ float ms[kG][kAttnMaxSplits], ls[kG][kAttnMaxSplits], Ms[kG], dens[kG];
  const int S = p.splits, stride = kDh + 2;
  const float* part = p.partials + (t * p.H + h0) * S * stride;  // [head][split][m, l, o[kDh]]
  for (int i = threadIdx.x; i < n * S; i += blockDim.x) {
    ms[i / S][i % S] = __ldcg(part + int64_t(i) * stride);
    ls[i / S][i % S] = __ldcg(part + int64_t(i) * stride + 1);
  }
  __syncthreads();
  if (threadIdx.x < n) {
    float M = sink_log2(p, h0 + threadIdx.x);
    for (int s = 0; s < S; ++s) M = fmaxf(M, ms[threadIdx.x][s]);
    Ms[threadIdx.x] = M;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n * S; i += blockDim.x) {
    const float f = exp2f(ms[i / S][i % S] - Ms[i / S]);
    ms[i / S][i % S] = f;  // from here on: the split's factor
    ls[i / S][i % S] *= f;
  }
  __syncthreads();
  if (threadIdx.x < n) {
    float denom = exp2f(sink_log2(p, h0 + threadIdx.x) - Ms[threadIdx.x]);
    for (int s = 0; s < S; ++s) denom += ls[threadIdx.x][s];
    dens[threadIdx.x] = denom;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n * kDh; i += blockDim.x) {
    const int h = i / kDh, d = i % kDh;
    const float* o = part + int64_t(h) * S * stride + 2 + d;
    float acc = 0.0f;
#pragma unroll 8
    for (int s = 0; s < S; ++s) acc += __ldcg(o + int64_t(s) * stride) * ms[h][s];
    static_cast<__nv_bfloat16*>(p.out)[(t * p.H + h0 + h) * kDh + d] = __float2bfloat16(acc / dens[h]);
  }
}

// Lane (kg, c) = (lane / 8, lane % 8) holds dims 8c..8c+7 of keys kg, kg+4, ... of a 32-key tile.
// Reduce-scatter of 8 per-head partial dots over the 8 lanes of a key: lane c gets head c's sum.
__device__ __forceinline__ float reduce_scatter8(const float (&p)[kG], int c) {
  float r4[4], r2[2];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const bool up = c & 4;
    r4[j] = (up ? p[j + 4] : p[j]) + __shfl_xor_sync(0xffffffffu, up ? p[j] : p[j + 4], 4);
  }
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const bool up = c & 2;
    r2[j] = (up ? r4[j + 2] : r4[j]) + __shfl_xor_sync(0xffffffffu, up ? r4[j] : r4[j + 2], 2);
  }
  const bool up = c & 1;
  return (up ? r2[1] : r2[0]) + __shfl_xor_sync(0xffffffffu, up ? r2[0] : r2[1], 1);
}

// Loads keys j = tile + kg + 4i (i < 8) with from <= j < to of the lane's 8 dims: K into kv, V into
// vv (the others keep their values). Through L2 (coherent) or the read-only path.
template <bool kCoherent>
__device__ __forceinline__ void load_keys(const AttentionParams& p, const int32_t* table, int g, int tile, int from,
                                          int to, uint4 (&kv)[8], uint4 (&vv)[8]) {
  const int lane = threadIdx.x % 32, kg = lane / 8, c = lane % 8;
  const uint4* kc = static_cast<const uint4*>(p.k_cache);
  const uint4* vc = static_cast<const uint4*>(p.v_cache);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int j = tile + kg + 4 * i;
    if (j < from || j >= to) continue;
    const int64_t slot = (int64_t(table[j / p.block_size]) * p.block_size + j % p.block_size) * p.Hkv + g;
    kv[i] = kCoherent ? __ldcg(kc + slot * (kDh / 8) + c) : __ldg(kc + slot * (kDh / 8) + c);
    vv[i] = kCoherent ? __ldcg(vc + slot * (kDh / 8) + c) : __ldg(vc + slot * (kDh / 8) + c);
  }
}

// Tokens per call up to which a block looks for its sequence's other tokens to prefetch keys.
constexpr int kPrefetchMaxTokens = 64;

__global__ void __launch_bounds__(kWarps * 32) bf16_attention_split(AttentionParams p) {
  const int64_t t = blockIdx.x;
  const int g = blockIdx.y, split = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, kg = lane / 8, c = lane % 8;
  const int G = p.H / p.Hkv;
  const int pos = p.positions[t];
  const int lo = p.window > 0 ? max(0, pos - p.window + 1) : 0;
  const int len = pos - lo + 1;
  const int chunk = ((len + p.splits - 1) / p.splits + 32 * kWarps - 1) / (32 * kWarps) * (32 * kWarps);
  const int begin = lo + split * chunk, end = min(lo + (split + 1) * chunk, pos + 1);
  const int seq = p.seq_index[t];
  const int32_t* table = p.block_tables + int64_t(seq) * p.max_blocks;
  const int64_t row = int64_t(p.H + 2 * p.Hkv) * kDh;

  // Positions, tables and the keys of earlier calls are there before the kernel before this one
  // (qkv_projection) runs; it writes the keys of this call's tokens only. Keys below the lowest
  // position of this sequence's tokens in the call are stable: the warp's first tile of them loads
  // before pdl_wait, while qkv_projection still runs.
  int stable = pos;
  if (p.T > kPrefetchMaxTokens) {
    stable = lo;
  } else if (p.T > 1) {
    for (int u = 0; u < int(p.T); ++u)
      if (p.seq_index[u] == seq) stable = min(stable, p.positions[u]);
  }
  const int first = begin + warp * 32;
  uint4 kv[8], vv[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) kv[i] = vv[i] = make_uint4(0, 0, 0, 0);
  load_keys<false>(p, table, g, first, first, min(end, stable), kv, vv);
  dev::pdl_wait();  // q and this call's keys come from qkv_projection
  load_keys<true>(p, table, g, first, max(first, stable), end, kv, vv);

  // q of the group's heads, dims 8c..8c+7, pre-scaled so that scores are in log2 units.
  float q[kG][8];
  const float qscale = p.scale * kLog2e;
#pragma unroll
  for (int h = 0; h < kG; ++h) {
    uint4 v = make_uint4(0, 0, 0, 0);
    if (h < G) v = *reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.qkv) + t * row + (g * G + h) * kDh + 8 * c);
    dev::unpack_bf16x8(v, q[h]);
#pragma unroll
    for (int d = 0; d < 8; ++d) q[h][d] *= qscale;
  }

  __shared__ float4 probs[kWarps][32][kG / 4];  // (key, head) of the current tile
  __shared__ float4 alphas[kWarps][kG / 4];
  float m = kEmpty, l = 0.0f, acc[kG][8] = {};
  for (int tile = first; tile < end; tile += 32 * kWarps) {
    if (tile != first) {
#pragma unroll
      for (int i = 0; i < 8; ++i) kv[i] = vv[i] = make_uint4(0, 0, 0, 0);
      load_keys<false>(p, table, g, tile, tile, end, kv, vv);
    }
    float s[8], tmax = -INFINITY;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      float kf[8], part[kG];
      dev::unpack_bf16x8(kv[i], kf);
#pragma unroll
      for (int h = 0; h < kG; ++h) {
        part[h] = 0.0f;
#pragma unroll
        for (int d = 0; d < 8; ++d) part[h] = fmaf(q[h][d], kf[d], part[h]);
      }
      s[i] = reduce_scatter8(part, c);
      if (tile + kg + 4 * i >= end) s[i] = -INFINITY;
      tmax = fmaxf(tmax, s[i]);
    }
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 8));
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 16));
    const float m_new = fmaxf(m, tmax), alpha = exp2f(m - m_new);
    m = m_new;
    l *= alpha;
    float* pw = reinterpret_cast<float*>(probs[warp]);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float e = exp2f(s[i] - m_new);
      l += e;
      pw[(kg + 4 * i) * kG + c] = e;
    }
    if (kg == 0) reinterpret_cast<float*>(alphas[warp])[c] = alpha;
    __syncwarp();
    const float4 a0 = alphas[warp][0], a1 = alphas[warp][1];
    const float al[kG] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
#pragma unroll
    for (int h = 0; h < kG; ++h)
#pragma unroll
      for (int d = 0; d < 8; ++d) acc[h][d] *= al[h];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float4 p0 = probs[warp][kg + 4 * i][0], p1 = probs[warp][kg + 4 * i][1];
      const float pr[kG] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
      float vf[8];
      dev::unpack_bf16x8(vv[i], vf);
#pragma unroll
      for (int h = 0; h < kG; ++h)
#pragma unroll
        for (int d = 0; d < 8; ++d) acc[h][d] = fmaf(pr[h], vf[d], acc[h][d]);
    }
    __syncwarp();
  }

  // The next kernel (the o projection) may start streaming its weights now, not earlier: its
  // prefetch would queue ahead of this kernel's latency-bound K/V loads (measured +2 us per layer).
  dev::pdl_launch_dependents();
  // Sum over the 4 key groups of the warp, then merge the warps through shared memory.
  l += __shfl_xor_sync(0xffffffffu, l, 8);
  l += __shfl_xor_sync(0xffffffffu, l, 16);
#pragma unroll
  for (int h = 0; h < kG; ++h)
#pragma unroll
    for (int d = 0; d < 8; ++d) {
      acc[h][d] += __shfl_xor_sync(0xffffffffu, acc[h][d], 8);
      acc[h][d] += __shfl_xor_sync(0xffffffffu, acc[h][d], 16);
    }
  __shared__ float wm[kWarps][kG], wl[kWarps][kG], wacc[kWarps][kG][kDh];
  if (kg == 0) {
    wm[warp][c] = m;
    wl[warp][c] = l;
#pragma unroll
    for (int h = 0; h < kG; ++h)
#pragma unroll
      for (int d = 0; d < 8; ++d) wacc[warp][h][8 * c + d] = acc[h][d];
  }
  __syncthreads();
  const int stride = kDh + 2;
  for (int i = threadIdx.x; i < G * kDh; i += kWarps * 32) {
    const int h = i / kDh, d = i % kDh;
    float mb = kEmpty;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mb = fmaxf(mb, wm[w][h]);
    float o = 0.0f, lb = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = exp2f(wm[w][h] - mb);
      o += wacc[w][h][d] * f;
      lb += wl[w][h] * f;
    }
    if (p.splits == 1) {  // the whole key range: merge with the sink here (merge_splits' arithmetic)
      const float sink = sink_log2(p, g * G + h), M = fmaxf(sink, mb), f = exp2f(mb - M);
      static_cast<__nv_bfloat16*>(p.out)[(t * p.H + g * G + h) * kDh + d] =
          __float2bfloat16(o * f / (exp2f(sink - M) + lb * f));
      continue;
    }
    float* out = p.partials + ((t * p.H + g * G + h) * p.splits + split) * stride;
    out[2 + d] = o;
    if (d == 0) out[0] = mb, out[1] = lb;
  }
  if (p.splits == 1) return;

  __shared__ bool last;
  __threadfence();  // this block's partials are visible device-wide before it counts as done
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&g_splits_done[t * p.Hkv + g], 1u) == unsigned(p.splits) - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  merge_splits(p, t, g * G, G);
  if (threadIdx.x == 0) g_splits_done[t * p.Hkv + g] = 0;
}

}  // namespace

cudaError_t run_bf16_attention_decode(const AttentionParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  if (p.splits < 1 || p.splits > kAttnMaxSplits || (p.splits > 1 && p.T * p.Hkv > kAttnMergeCounters))
    return cudaErrorInvalidValue;
  // A programmatic dependent (sm_90+): resident and waiting when its predecessor ends.
  return launch_pdl(bf16_attention_split, dim3(unsigned(p.T), unsigned(p.Hkv), unsigned(p.splits)),
                    dim3(kWarps * 32), 0, s, p);
}

}  // namespace mx::cuda::kern
