// bf16_bf16w_norm_router: the MoE block's entry (rmsnorm -> router GEMV) as one kernel for decode.
// Block e computes router row e for all T tokens: it normalises x itself (FP32 sum of squares, the
// BF16 rounding of bf16_bf16w_rmsnorm), dots it with the row, stores the logit; block 0 also writes
// xn. The top-k is not here: the MoE GEMVs select from the logits (or bf16_router_topk runs after).
// Launched as a programmatic dependent: the router row, its bias and the norm weight load during
// the previous kernel's tail. With an MXFP4 router (--mxfp4-layers router) a thread reads the 4-byte
// word of its 8 inputs and the block's scale byte instead of 16 bytes of BF16, decoded as in
// bf16_mxfp4w_gemv.
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kChunks = kRouterFusedMaxD / (8 * kThreads);  // 16-byte chunks of a row per thread

// v[j] <- the sum of v[j] over the block, for j < n (every thread gets the totals, in one order).
template <int kMaxT>
__device__ __forceinline__ void block_sum(float (&v)[kMaxT], int n, float (&partial)[kWarps][kMaxT]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < kMaxT; ++j)
    if (j < n) {
      v[j] = dev::warp_sum(v[j]);
      if (lane == 0) partial[warp][j] = v[j];
    }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kMaxT; ++j)
    if (j < n) {
      float s = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) s += partial[w][j];
      v[j] = s;
    }
  __syncthreads();  // partial may be reused
}

// kMaxT: the token count the registers are sized for (the launch picks the smallest >= T).
template <int kMaxT, bool kMxfp4>
__global__ void __launch_bounds__(kThreads) bf16_bf16w_norm_router(NormRouterParams p) {
  __shared__ float partial[kWarps][kMaxT];
  const int e = blockIdx.x;  // router row (expert)
  const int T = int(p.T), kv = p.D / 8;
  const uint4* x = static_cast<const uint4*>(p.x);
  const uint4* wrow = static_cast<const uint4*>(p.w) + int64_t(e) * kv;
  const uint4* nw = static_cast<const uint4*>(p.norm_weight);
  uint4 wv[kChunks], nv[kChunks];
  uint32_t wq[kChunks], ws[kChunks];  // MXFP4: the word of inputs 8c..8c+7 and its block's scale
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if constexpr (kMxfp4) {
      wq[i] = c < kv ? __ldcs(static_cast<const uint32_t*>(p.w) + int64_t(e) * kv + c) : 0u;
      ws[i] = c < kv ? __ldcs(static_cast<const uint8_t*>(p.w_scales) + int64_t(e) * (kv / 4) + c / 4) : 0u;
    } else {
      wv[i] = c < kv ? __ldcs(wrow + c) : make_uint4(0, 0, 0, 0);
    }
    nv[i] = c < kv ? __ldg(nw + c) : make_uint4(0, 0, 0, 0);
  }
  const float bias = p.bias ? __bfloat162float(static_cast<const __nv_bfloat16*>(p.bias)[e]) : 0.0f;
  dev::pdl_wait();
  // Dependents only after the wait: the MoE gate_up has nothing to load before it knows the experts,
  // and its 480 blocks, released early, sat resident and waiting through the kernels before (the
  // release after the wait measured faster: docs/lab, run 6).
  dev::pdl_launch_dependents();

  // Sum of squares of every token.
  uint4 xv[kMaxT][kChunks];
  float acc[kMaxT] = {};
#pragma unroll
  for (int t = 0; t < kMaxT; ++t)
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int c = threadIdx.x + i * kThreads;
      xv[t][i] = t < T && c < kv ? __ldg(x + int64_t(t) * kv + c) : make_uint4(0, 0, 0, 0);
      float f[8];
      dev::unpack_bf16x8(xv[t][i], f);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[t] = fmaf(f[j], f[j], acc[t]);
    }
  block_sum(acc, T, partial);

  // xn = bf16((x * r) * w_norm); the logit = xn . row.
#pragma unroll
  for (int t = 0; t < kMaxT; ++t) {
    const float r = 1.0f / sqrtf(acc[t] / float(p.D) + p.eps);
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int c = threadIdx.x + i * kThreads;
      if (t >= T || c >= kv) continue;
      float f[8], g[8], h[8];
      dev::unpack_bf16x8(xv[t][i], f);
      dev::unpack_bf16x8(nv[i], g);
#pragma unroll
      for (int j = 0; j < 8; ++j) f[j] = (f[j] * r) * g[j];
      const uint4 xn = dev::pack_bf16x8(f);
      if (e == 0) static_cast<uint4*>(p.xn)[int64_t(t) * kv + c] = xn;
      dev::unpack_bf16x8(xn, f);
      if constexpr (kMxfp4) {
        dev::mxfp4_word_to_f32(wq[i], h);
        float part = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) part = fmaf(f[j], h[j], part);
        dot = fmaf(part, __uint_as_float(ws[i] << 23), dot);  // 2^(s-127); the 2^14 below
      } else {
        dev::unpack_bf16x8(wv[i], h);
#pragma unroll
        for (int j = 0; j < 8; ++j) dot = fmaf(f[j], h[j], dot);
      }
    }
    acc[t] = kMxfp4 ? dot * 16384.0f : dot;
  }
  block_sum(acc, T, partial);
  if (threadIdx.x == 0) {
#pragma unroll
    for (int t = 0; t < kMaxT; ++t) {
      if (t >= T) continue;
      const float y = acc[t] + bias;
      if (p.logits_f32)
        static_cast<float*>(p.logits)[int64_t(t) * p.E + e] = y;
      else
        static_cast<__nv_bfloat16*>(p.logits)[int64_t(t) * p.E + e] = __float2bfloat16(y);
    }
  }
}

template <bool kMxfp4>
cudaError_t launch_t(const NormRouterParams& p, cudaStream_t s) {
  const dim3 grid(unsigned(p.E)), block(kThreads);
  if (p.T == 1) return launch_pdl(bf16_bf16w_norm_router<1, kMxfp4>, grid, block, 0, s, p);
  if (p.T == 2) return launch_pdl(bf16_bf16w_norm_router<2, kMxfp4>, grid, block, 0, s, p);
  if (p.T <= 4) return launch_pdl(bf16_bf16w_norm_router<4, kMxfp4>, grid, block, 0, s, p);
  static_assert(kRouterFusedMaxTokens == 8, "the largest instance below");
  return launch_pdl(bf16_bf16w_norm_router<8, kMxfp4>, grid, block, 0, s, p);
}

}  // namespace

// Requires T <= kRouterFusedMaxTokens, D % 8 == 0, D <= kRouterFusedMaxD, 16-byte aligned x, norm
// weight, w and xn (checked by the launcher).
cudaError_t run_bf16_bf16w_norm_router(const NormRouterParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  if (p.T > kRouterFusedMaxTokens || p.D % 8 != 0 || p.D > kRouterFusedMaxD) return cudaErrorInvalidValue;
  if (p.w_scales && p.D % 32 != 0) return cudaErrorInvalidValue;
  return p.w_scales ? launch_t<true>(p, s) : launch_t<false>(p, s);
}

}  // namespace mx::cuda::kern
