// The parts of the decode GEMVs (bf16_bf16w_gemv.cu, bf16_mxfp4w_gemv.cu) that do not depend on
// the weight format: the block shape, the fused input RMSNorm that stages x' in shared memory,
// and the qkv epilogue (RoPE of the q and k rows, k and v written to the paged cache).
#pragma once

#include <utility>

#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern::gemv {

constexpr int kWarps = 4;   // warps per block
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 2;    // output rows per warp

enum class InNorm { No, RmsNorm };

// xs (T rows of `stride` words, kv used) <- bf16((x * rsqrt(mean(x^2) + eps)) * norm weight), the
// values of bf16_bf16w_rmsnorm up to FP32 summation order; nws (kv) holds the norm weight. All
// threads of the block call it.
template <int T>
__device__ void stage_rmsnorm(const uint4* __restrict__ x, const uint4* nws, uint4* xs, int64_t kv, float eps,
                              int64_t stride) {
  __shared__ float partial[kWarps][T];
  float ss[T] = {};
  auto add = [&](int t, int64_t c, const uint4& v) {
    xs[t * stride + c] = v;
    float f[8];
    dev::unpack_bf16x8(v, f);
#pragma unroll
    for (int i = 0; i < 8; ++i) ss[t] = fmaf(f[i], f[i], ss[t]);
  };
  constexpr int kBatch = T < 4 ? 4 / T : 1;  // 16-byte words of x per thread and token in flight together
  if (kv <= kBatch * kThreads) {  // gpt-oss: all of a thread's words in one round trip
    uint4 v[kBatch][T];
#pragma unroll
    for (int u = 0; u < kBatch; ++u)
#pragma unroll
      for (int t = 0; t < T; ++t) {
        const int64_t c = threadIdx.x + u * kThreads;
        v[u][t] = c < kv ? __ldg(x + t * kv + c) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
    for (int u = 0; u < kBatch; ++u)
#pragma unroll
      for (int t = 0; t < T; ++t)
        if (threadIdx.x + u * kThreads < kv) add(t, threadIdx.x + u * kThreads, v[u][t]);
  } else {
    for (int64_t c = threadIdx.x; c < kv; c += kThreads)
#pragma unroll
      for (int t = 0; t < T; ++t) add(t, c, __ldg(x + t * kv + c));
  }
#pragma unroll
  for (int t = 0; t < T; ++t) {
    ss[t] = dev::warp_sum(ss[t]);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32][t] = ss[t];
  }
  __syncthreads();
  float r[T];
#pragma unroll
  for (int t = 0; t < T; ++t) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += partial[w][t];
    r[t] = 1.0f / sqrtf(total / float(kv * 8) + eps);
  }
  for (int64_t c = threadIdx.x; c < kv; c += kThreads) {  // each thread rewrites what it staged
    float wf[8];
    dev::unpack_bf16x8(nws[c], wf);
#pragma unroll
    for (int t = 0; t < T; ++t) {
      float f[8];
      dev::unpack_bf16x8(xs[t * stride + c], f);
#pragma unroll
      for (int i = 0; i < 8; ++i) f[i] = (f[i] * r[t]) * wf[i];
      xs[t * stride + c] = dev::pack_bf16x8(f);
    }
  }
  __syncthreads();
}

// Waits for the previous kernel (PDL; the weights' first loads are issued before) and returns where
// x' is read: with the input norm the normalised copy staged in smem (T x kv words, the norm weight
// staged after it, loaded before the wait), else x itself. Every thread of the block calls it.
template <int T, InNorm kNorm>
__device__ __forceinline__ const uint4* input_after_wait(const uint4* x, const uint4* __restrict__ norm_w, uint4* smem,
                                                         int64_t kv, float eps) {
  if constexpr (kNorm == InNorm::RmsNorm) {
    uint4* nws = smem + T * kv;
    for (int64_t c = threadIdx.x; c < kv; c += kThreads) nws[c] = __ldg(norm_w + c);
    dev::pdl_wait();
    dev::pdl_launch_dependents();
    stage_rmsnorm<T>(x, nws, smem, kv, eps, kv);
    return smem;
  } else {
    dev::pdl_wait();
    dev::pdl_launch_dependents();
    return x;
  }
}

// Epilogue: store (out = / += y), or the qkv epilogue of qkv_rope_cache: q and k rows paired
// (i, i + Dh/2) within a head and rotated, k and v also written to the paged cache.
enum class Epilogue { Store, RopeCache };

// Output rows of warp `pair` (kRows == 2): rows 2·pair, 2·pair + 1; with RopeCache the q and k
// rows h·Dh + i and h·Dh + i + Dh/2 (pair = h·Dh/2 + i), then the v rows as usual. Returns the
// rotation index i, or -1 when the pair is not rotated.
template <Epilogue kEpi>
__device__ __forceinline__ int rows_of_pair(int64_t pair, const RopeCacheParams& rope, int64_t (&rows)[kRows]) {
  static_assert(kRows == 2, "rows are rotation pairs");
  if constexpr (kEpi == Epilogue::RopeCache) {
    const int half = rope.Dh / 2;
    if (pair < int64_t(rope.H + rope.Hkv) * half) {
      const int64_t h = pair / half, i = pair % half;
      rows[0] = h * rope.Dh + i;
      rows[1] = rows[0] + half;
      return int(i);
    }
  }
  rows[0] = 2 * pair;
  rows[1] = 2 * pair + 1;
  return -1;
}

// RopeCache epilogue of one token (lane 0): y are the two rows' outputs incl. bias (FP32).
__device__ __forceinline__ void rope_cache_store(const RopeCacheParams& rope, int t, const int64_t (&rows)[kRows],
                                                 int rot_i, const float (&y)[kRows], __nv_bfloat16* out, int64_t N) {
  float v0 = __bfloat162float(__float2bfloat16(y[0])), v1 = __bfloat162float(__float2bfloat16(y[1]));  // qkv is bf16
  const int pos = rope.positions[t];
  if (rot_i >= 0) {  // as bf16_qkv_rope_cache: one FP32 rotation of the bf16 values, one rounding
    float sn, cs;
    sincosf(float(pos) * rope.inv_freq[rot_i], &sn, &cs);
    cs *= rope.concentration;
    sn *= rope.concentration;
    const float r0 = v0 * cs - v1 * sn, r1 = v1 * cs + v0 * sn;
    v0 = r0;
    v1 = r1;
  }
  const __nv_bfloat16 o[kRows] = {__float2bfloat16(v0), __float2bfloat16(v1)};
#pragma unroll
  for (int r = 0; r < kRows; ++r) out[int64_t(t) * N + rows[r]] = o[r];
  const int64_t k0 = int64_t(rope.H) * rope.Dh, v_start = k0 + int64_t(rope.Hkv) * rope.Dh;
  if (rows[0] < k0) return;
  // A k or v row: the cache slot of this token, laid out (Hkv, Dh) like qkv.
  const int32_t block = rope.block_tables[int64_t(rope.seq_index[t]) * rope.max_blocks + pos / rope.block_size];
  const int64_t slot = (int64_t(block) * rope.block_size + pos % rope.block_size) * rope.Hkv * rope.Dh;
  const bool is_v = rows[0] >= v_start;
  const int64_t at = slot - (is_v ? v_start : k0);
  void* cache = is_v ? rope.v_cache : rope.k_cache;
  if (rope.kv_scales) {
    const float inv = __frcp_rn(rope.kv_scales[is_v ? 1 : 0]);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      static_cast<uint8_t*>(cache)[at + rows[r]] = dev::kv_fp8_code(__bfloat162float(o[r]), inv);
  } else {
#pragma unroll
    for (int r = 0; r < kRows; ++r) static_cast<__nv_bfloat16*>(cache)[at + rows[r]] = o[r];
  }
}

// Lane 0's epilogue for token t: y are the rows' dot products plus bias (FP32); out = y or out += y
// (bf16 or f32), or the qkv epilogue.
template <Epilogue kEpi>
__device__ __forceinline__ void store_token(const RopeCacheParams& rope, int t, const int64_t (&rows)[kRows],
                                            int rot_i, const float (&y)[kRows], void* out, bool out_f32,
                                            bool accumulate, int64_t N) {
  if constexpr (kEpi == Epilogue::RopeCache) {
    rope_cache_store(rope, t, rows, rot_i, y, static_cast<__nv_bfloat16*>(out), N);  // N even: both rows exist
  } else {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t n = rows[r];
      if (n >= N) continue;
      if (out_f32) {
        float& o = static_cast<float*>(out)[t * N + n];
        o = accumulate ? o + y[r] : y[r];
      } else {
        __nv_bfloat16& o = static_cast<__nv_bfloat16*>(out)[t * N + n];
        o = __float2bfloat16(accumulate ? __bfloat162float(o) + y[r] : y[r]);
      }
    }
  }
}

// ---- host side: one kernel instance per (token count, input norm, epilogue) ----------------------
// Whether the params ask for a shape the qkv epilogue cannot serve: a bf16 qkv row of (H + 2 Hkv)
// heads of Dh, Dh a multiple of `dh_multiple` (the kernel's rotation pairing), no accumulate.
inline bool bad_rope_cache(const GemvParams& p, int dh_multiple) {
  return p.rope_cache && (p.out_f32 || p.accumulate || p.rope.Dh % dh_multiple != 0 ||
                          p.N != int64_t(p.rope.H + 2 * p.rope.Hkv) * p.rope.Dh);
}

// Calls launch.template operator()<T, norm, epilogue>() for T = p.T in 1..kMaxT and the params'
// input norm and epilogue; nothing for T = 0, cudaErrorInvalidValue above kMaxT.
template <int kMaxT, typename Launch>
cudaError_t launch_instance(const GemvParams& p, Launch&& launch) {
  if (p.T == 0) return cudaSuccess;
  cudaError_t err = cudaErrorInvalidValue;
  auto for_t = [&]<int T>() {
    if (p.rope_cache)
      err = p.norm_weight ? launch.template operator()<T, InNorm::RmsNorm, Epilogue::RopeCache>()
                          : launch.template operator()<T, InNorm::No, Epilogue::RopeCache>();
    else
      err = p.norm_weight ? launch.template operator()<T, InNorm::RmsNorm, Epilogue::Store>()
                          : launch.template operator()<T, InNorm::No, Epilogue::Store>();
  };
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((p.T == I + 1 ? (for_t.template operator()<I + 1>(), 0) : 0), ...);
  }(std::make_integer_sequence<int, kMaxT>{});
  return err;
}

}  // namespace mx::cuda::kern::gemv
