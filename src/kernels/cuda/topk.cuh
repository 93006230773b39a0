// Warp-level top-k + softmax over the k, shared by bf16_router_topk and the MoE GEMVs that select
// from the logits themselves: the same code, so both give the same ids and weights bitwise.
#pragma once

#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::dev {

inline constexpr int kTopkPerLane = kern::kTopkMaxExperts / 32;

// A float as an unsigned key with the same order (-0 as +0; NaN as the smallest key).
__device__ __forceinline__ uint32_t order_key(float v) {
  if (v != v) return 0u;
  const uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
  return u >> 31 ? ~u : u | 0x80000000u;
}
__device__ __forceinline__ float key_value(uint32_t k) { return __uint_as_float(k >> 31 ? k & 0x7fffffffu : ~k); }

// Token t's E <= kTopkMaxExperts logits (bf16 or f32, row-major (T, E)) into a warp: lane l holds
// experts 8l..8l+7 in v[0..8), -inf past E; one 16-byte load per lane (two for f32) where the row
// is aligned, so a warp asks L2 for whole lines (many blocks read the same row). Read through L2:
// other blocks may have just written them.
__device__ __forceinline__ void load_logits(const void* logits, bool f32, int64_t t, int E,
                                            float (&v)[kTopkPerLane]) {
  static_assert(kTopkPerLane == 8, "lane l holds experts 8l..8l+7");
  const int e0 = (threadIdx.x % 32) * kTopkPerLane;
#pragma unroll
  for (int i = 0; i < kTopkPerLane; ++i) v[i] = -INFINITY;
  if (e0 >= E) return;
  if (f32) {
    const float* row = static_cast<const float*>(logits) + t * E;
    if (E % 4 == 0 && reinterpret_cast<uintptr_t>(row) % 16 == 0) {
      const float4 a = __ldcg(reinterpret_cast<const float4*>(row + e0));
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
      if (e0 + 4 < E) {
        const float4 b = __ldcg(reinterpret_cast<const float4*>(row + e0 + 4));
        v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
      }
      return;
    }
#pragma unroll
    for (int i = 0; i < kTopkPerLane; ++i)
      if (e0 + i < E) v[i] = __ldcg(row + e0 + i);
    return;
  }
  const unsigned short* row = static_cast<const unsigned short*>(logits) + t * E;
  if (E % 8 == 0 && reinterpret_cast<uintptr_t>(row) % 16 == 0) {
    const uint4 u = __ldcg(reinterpret_cast<const uint4*>(row + e0));
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[2 * i] = __uint_as_float(w[i] << 16);
      v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < kTopkPerLane; ++i)
    if (e0 + i < E) v[i] = __uint_as_float(uint32_t(__ldcg(row + e0 + i)) << 16);  // bf16 -> f32
}

// The K <= kTopkMaxK largest of a warp's logits (load_logits' layout) in descending order, ties:
// the lower expert index first (like a stable sort); every lane gets top_e and top_v.
// BF16 logits (bf16 = true: the low 16 bits of every value are zero): the order key's high half
// orders them, its low half is replaced by 0xffff - expert, so that every key is unique and one
// warp max per round names the winner (the MoE GEMVs wait for their route: docs/lab/RUNS_11-20.md,
// run 15, change 6). F32 logits: below. Both give the ids and values of a stable descending sort.
__device__ __forceinline__ void warp_topk(const float (&v)[kTopkPerLane], int E, int K, bool bf16,
                                          int (&top_e)[kern::kTopkMaxK], float (&top_v)[kern::kTopkMaxK]) {
  const int e0 = (threadIdx.x % 32) * kTopkPerLane;
  uint32_t key[kTopkPerLane];
#pragma unroll
  for (int i = 0; i < kTopkPerLane; ++i) key[i] = e0 + i < E ? order_key(v[i]) : 0u;
  if (bf16) {
#pragma unroll
    for (int i = 0; i < kTopkPerLane; ++i) key[i] = e0 + i < E ? (key[i] & 0xffff0000u) | (0xffffu - (e0 + i)) : 0u;
#pragma unroll
    for (int k = 0; k < kern::kTopkMaxK; ++k) {
      if (k >= K) break;
      uint32_t best = key[0];
#pragma unroll
      for (int i = 1; i < kTopkPerLane; ++i) best = max(best, key[i]);
      const uint32_t m = __reduce_max_sync(0xffffffffu, best);
#pragma unroll
      for (int i = 0; i < kTopkPerLane; ++i)
        if (key[i] == m) key[i] = 0u;
      top_e[k] = int(0xffffu - (m & 0xffffu));
      // The value's key: the high half, and the low half order_key gave a BF16 value (negative:
      // ones); a high half of 0 is NaN's key 0.
      const uint32_t hi = m & 0xffff0000u;
      top_v[k] = key_value(hi == 0u ? 0u : hi | (m >> 31 ? 0u : 0xffffu));
    }
    return;
  }
  // F32 logits: the same rounds over the order keys, raised to at least 1 so that 0 marks a taken
  // expert (NaN's key 0 becomes 1: still below every number). The winner is the lowest lane holding
  // the maximum (lanes hold ascending experts) and, in it, the lowest index: one warp max, a ballot
  // and a shuffle a round.
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < kTopkPerLane; ++i) key[i] = e0 + i < E ? max(key[i], 1u) : 0u;
#pragma unroll
  for (int k = 0; k < kern::kTopkMaxK; ++k) {
    if (k >= K) break;
    uint32_t best = key[0];
#pragma unroll
    for (int i = 1; i < kTopkPerLane; ++i) best = max(best, key[i]);
    const uint32_t m = __reduce_max_sync(0xffffffffu, best);
    const int winner = __ffs(__ballot_sync(0xffffffffu, best == m)) - 1;
    int at = 0;
#pragma unroll
    for (int i = kTopkPerLane - 1; i >= 0; --i)
      if (key[i] == m) at = i;
#pragma unroll
    for (int i = 0; i < kTopkPerLane; ++i)
      if (lane == winner && i == at) key[i] = 0u;
    top_e[k] = __shfl_sync(0xffffffffu, e0 + at, winner);
    top_v[k] = key_value(m);
  }
}

// Softmax over the K selected logits, in double like the CPU reference.
__device__ __forceinline__ void topk_softmax(const float (&top_v)[kern::kTopkMaxK], int K,
                                             float (&w)[kern::kTopkMaxK]) {
  double ex[kern::kTopkMaxK], sum = 0.0;
#pragma unroll
  for (int k = 0; k < kern::kTopkMaxK; ++k)
    if (k < K) sum += ex[k] = exp(double(top_v[k]) - double(top_v[0]));
#pragma unroll
  for (int k = 0; k < kern::kTopkMaxK; ++k) w[k] = k < K ? float(ex[k] / sum) : 0.0f;
}

// warp_topk + topk_softmax of token t; lane 0 writes ids[0..K) and weights[0..K). Every lane of
// the warp must call it.
__device__ __forceinline__ void warp_topk_softmax(const void* logits, bool f32, int64_t t, int E, int K, int32_t* ids,
                                                  float* weights) {
  float v[kTopkPerLane], top_v[kern::kTopkMaxK], w[kern::kTopkMaxK];
  int top_e[kern::kTopkMaxK];
  load_logits(logits, f32, t, E, v);
  warp_topk(v, E, K, !f32, top_e, top_v);
  if (threadIdx.x % 32 != 0) return;
  topk_softmax(top_v, K, w);
#pragma unroll
  for (int k = 0; k < kern::kTopkMaxK; ++k)
    if (k < K) ids[k] = top_e[k], weights[k] = w[k];
}

}  // namespace mx::cuda::dev
