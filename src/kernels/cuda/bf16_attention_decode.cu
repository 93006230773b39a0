// bf16_attention_decode: attention with sinks (and an optional sliding window) over the paged
// BF16 KV cache, split over the key range (flash-decoding). A block owns (token, kv head, split)
// and the group's <= 8 q heads, so each K/V load serves all of them; a second kernel merges the
// splits with the sink. Any T: each token attends to its own positions 0..pos of the cache.
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

constexpr int kWarps = 4;
constexpr int kDh = kAttnHeadDim;   // 64 = 8 lanes x 8 dims
constexpr int kG = kAttnMaxGroup;   // q heads per kv head, padded to 8
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kEmpty = -1e30f;    // running max before any key (finite: exp2(kEmpty - m) = 0)

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

__global__ void __launch_bounds__(kWarps * 32) bf16_attention_split(AttentionParams p) {
  dev::pdl_wait();  // launched as a programmatic dependent: resident before q/k/v are written
  dev::pdl_launch_dependents();
  const int64_t t = blockIdx.x;
  const int g = blockIdx.y, split = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, kg = lane / 8, c = lane % 8;
  const int G = p.H / p.Hkv;
  const int pos = p.positions[t];
  const int lo = p.window > 0 ? max(0, pos - p.window + 1) : 0;
  const int len = pos - lo + 1;
  const int chunk = ((len + p.splits - 1) / p.splits + 32 * kWarps - 1) / (32 * kWarps) * (32 * kWarps);
  const int begin = lo + split * chunk, end = min(lo + (split + 1) * chunk, pos + 1);
  const int32_t* table = p.block_tables + int64_t(p.seq_index[t]) * p.max_blocks;
  const int64_t row = int64_t(p.H + 2 * p.Hkv) * kDh;

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
  const uint4* kc = static_cast<const uint4*>(p.k_cache);
  const uint4* vc = static_cast<const uint4*>(p.v_cache);
  for (int tile = begin + warp * 32; tile < end; tile += 32 * kWarps) {
    uint4 kv[8], vv[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int j = tile + kg + 4 * i;
      kv[i] = vv[i] = make_uint4(0, 0, 0, 0);
      if (j < end) {
        const int64_t slot = (int64_t(table[j / p.block_size]) * p.block_size + j % p.block_size) * p.Hkv + g;
        kv[i] = __ldg(kc + slot * (kDh / 8) + c);
        vv[i] = __ldg(vc + slot * (kDh / 8) + c);
      }
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
    float* out = p.partials + ((t * p.H + g * G + h) * p.splits + split) * stride;
    out[2 + d] = o;
    if (d == 0) out[0] = mb, out[1] = lb;
  }
}

// Merges the splits of one (token, q head) with the sink: out = sum_s o_s 2^(m_s - M) / denom.
// The per-split maxima and sums are staged in shared memory by parallel loads (one thread per
// split), so the loop over splits only waits on independent loads of o_s.
__global__ void __launch_bounds__(kDh) bf16_attention_combine(AttentionParams p) {
  static_assert(kDh >= 64, "one thread per split needs blockDim >= the 64 splits");
  dev::pdl_wait();  // the partials of bf16_attention_split
  dev::pdl_launch_dependents();
  const int64_t t = blockIdx.x / p.H;
  const int h = blockIdx.x % p.H, d = threadIdx.x;
  const float sink = (p.sinks_f32 ? static_cast<const float*>(p.sinks)[h]
                                  : __bfloat162float(static_cast<const __nv_bfloat16*>(p.sinks)[h])) * kLog2e;
  const int stride = kDh + 2;
  const float* part = p.partials + (t * p.H + h) * p.splits * stride;
  __shared__ float ms[kDh], ls[kDh], fs[kDh];
  __shared__ float denom_s;
  if (d < p.splits) ms[d] = part[d * stride], ls[d] = part[d * stride + 1];
  __syncthreads();
  float M = sink;
  for (int s = 0; s < p.splits; ++s) M = fmaxf(M, ms[s]);
  if (d < p.splits) fs[d] = exp2f(ms[d] - M);
  __syncthreads();
  if (d == 0) {
    float denom = exp2f(sink - M);
    for (int s = 0; s < p.splits; ++s) denom += ls[s] * fs[s];
    denom_s = denom;
  }
  float o = 0.0f;
#pragma unroll 8
  for (int s = 0; s < p.splits; ++s) o += part[s * stride + 2 + d] * fs[s];
  __syncthreads();
  static_cast<__nv_bfloat16*>(p.out)[t * p.H * kDh + h * kDh + d] = __float2bfloat16(o / denom_s);
}

}  // namespace

cudaError_t run_bf16_attention_decode(const AttentionParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  // Both as programmatic dependents (sm_90+): each is resident and waiting when its predecessor ends.
  if (const cudaError_t e = launch_pdl(bf16_attention_split, dim3(unsigned(p.T), unsigned(p.Hkv), unsigned(p.splits)),
                                       dim3(kWarps * 32), 0, s, p);
      e != cudaSuccess)
    return e;
  return launch_pdl(bf16_attention_combine, dim3(unsigned(p.T * p.H)), dim3(kDh), 0, s, p);
}

}  // namespace mx::cuda::kern
