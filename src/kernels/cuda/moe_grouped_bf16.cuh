// Device helpers of the BF16 grouped MoE GEMMs (bf16_mxfp4w_moe_grouped.cu on mma.sync,
// sm90_bf16_mxfp4w_moe_grouped.cu on wgmma): MXFP4 -> BF16 in registers (a 32-bit word of a block,
// 8 E2M1 codes, becomes 4 BF16 pairs in element order with the block's E8M0 scale applied exactly)
// and the epilogue of an output pair.
#pragma once

#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern::grouped_bf16 {

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  __nv_bfloat162 r = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<uint32_t*>(&r);
}

// One 32-bit word of an MXFP4 block (8 elements) -> 4 BF16 pairs in element order, exactly. Each
// E2M1 code s.e1e0.m is moved to BF16 bits 15 and 8..6, where it reads as value * 2^-126 (0.5
// becomes a BF16 subnormal); multiplying by 2^(scale - 1) (and, for scales above 128, by
// 2^(scale - 128) once more: `fix_big`) is a power-of-two scaling, hence exact, and gives
// value * 2^(scale - 127).
__device__ __forceinline__ uint32_t bf16x2_pow2(uint32_t f) { return (f << 7) | (f << 23); }  // 2^(f-127) twice
__device__ __forceinline__ uint32_t mxfp4_factor1(uint32_t scale) {  // 2^(scale-1), or 2^127 above 128
  return bf16x2_pow2(scale > 128 ? 254u : scale + 126);
}
__device__ __forceinline__ uint32_t mxfp4_factor2(uint32_t scale) {  // 2^(scale-128) above 128, else 1
  return bf16x2_pow2(scale > 128 ? scale - 1 : 127u);
}
__device__ __forceinline__ void decode_word_bf16(uint32_t q, uint32_t m1, uint32_t (&out)[4]) {
  const uint32_t qs = q >> 4;
  // byte b of q holds elements 2b (low nibble) and 2b+1 (high nibble): low nibble of byte b of q
  // into bits 0..3, low nibble of byte b of q>>4 (= the high nibble) into bits 16..19.
  const uint32_t sel[4] = {0x4400u, 0x5511u, 0x6622u, 0x7733u};
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    const uint32_t u = __byte_perm(q, qs, sel[b]) << 6;
    out[b] = bf16x2_mul((u & 0x01c001c0u) | ((u << 6) & 0x80008000u), m1);
  }
}
// One 32-bit word of an MXFP4 block (element i = nibble i) -> the BF16 pairs (e0, e4), (e1, e5),
// (e2, e6), (e3, e7), exactly, with 3 operations a pair: `q << 4(3 - j)` brings nibbles j and j + 4
// to the top of the two halves, where the sign already sits at bit 15; the magnitude e1 e0 m moves
// to bits 8..6 (the lowest exponent bits and the top mantissa bit), reading value · 2^-126 as
// decode_word_bf16 does; the block's factor then scales it (and fix_big above scale 128).
__device__ __forceinline__ void decode_word_pairs(uint32_t q, uint32_t m1, uint32_t (&out)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t t = q << (4 * (3 - j));
    out[j] = bf16x2_mul(((t & 0x70007000u) >> 6) | (t & 0x80008000u), m1);
  }
}

// The second factor where a scale exceeds 128 (rare: weights of magnitude >= 2^2); the caller
// branches once per warp, not per pair.
__device__ __forceinline__ void fix_big(uint32_t m2, uint32_t (&out)[4]) {
#pragma unroll
  for (int b = 0; b < 4; ++b) out[b] = bf16x2_mul(out[b], m2);
}

// Runs body(std::true_type) where any lane of the warp has a scale above 128 (rare), else
// body(std::false_type): one warp-uniform branch per stage, so that the common path, compiled
// without fix_big, is one straight block the scheduler can interleave.
template <typename Body>
__device__ __forceinline__ void with_big_scales(bool mine_big, Body&& body) {
  if (__any_sync(0xffffffffu, mine_big))
    body(std::true_type{});
  else
    body(std::false_type{});
}

// The block's scale bytes (rows n0.. of the expert's matrix, `bytes` = rows x G: contiguous in the
// checkpoint layout) into shared memory, read from there every stage: by cp.async where 16-byte
// aligned (joining the caller's next commit group), else by plain loads; visible to the block after
// the caller's next barrier. (Loading them from global memory two stages ahead stalled every stage
// on the memory latency: docs/lab/RUNS_01-10.md, run 10.)
template <int kThreads>
__device__ __forceinline__ void stage_block_scales(const uint8_t* src, int bytes, uint8_t* dst) {
  if ((reinterpret_cast<uintptr_t>(src) & 15) == 0 && bytes % 16 == 0) {
    for (int c = threadIdx.x; c < bytes / 16; c += kThreads)
      dev::cp_async16(dst + 16 * c, src + 16 * c, true);
  } else {
    for (int i = threadIdx.x; i < bytes; i += kThreads) dst[i] = src[i];
  }
}

// Epilogue of one pair row (sorted position pos) and weight rows n, n + 1 (v0, v1: their products).
// gate_up: (gate 2j, up 2j + 1) -> bias, clamped SwiGLU with the +1 -> act[pos][act_col] BF16 (the
// caller's column of j); down: + bias -> y[pos][n, n + 1] FP32.
template <bool kGateUp>
__device__ __forceinline__ void store_pair(const MoeGroupedParams& p, int e, int N, int64_t pos, int n, float v0,
                                           float v1, int64_t act_col) {
  if constexpr (kGateUp) {
    const __nv_bfloat16* bias = static_cast<const __nv_bfloat16*>(p.gu_bias) + int64_t(e) * N;
    float gate = v0 + __bfloat162float(bias[n]);
    float up = v1 + __bfloat162float(bias[n + 1]);
    gate = fminf(gate, p.limit);               // gate: upper clamp only
    up = fminf(fmaxf(up, -p.limit), p.limit);  // up: both sides
    const float out = gate / (1.0f + expf(-p.alpha * gate)) * (up + 1.0f);  // g·σ(αg)·(u+1)
    static_cast<__nv_bfloat16*>(p.act)[pos * p.F + act_col] = __float2bfloat16(out);
  } else {
    const __nv_bfloat16* bias = static_cast<const __nv_bfloat16*>(p.dn_bias) + int64_t(e) * N;
    *reinterpret_cast<float2*>(p.y + pos * p.D + n) =
        make_float2(v0 + __bfloat162float(bias[n]), v1 + __bfloat162float(bias[n + 1]));
  }
}

}  // namespace mx::cuda::kern::grouped_bf16
