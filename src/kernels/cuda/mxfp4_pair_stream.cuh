// MXFP4 row-pair streams for the MoE GEMVs (bf16_mxfp4w_moe_gemv.cu): a warp reads row pairs of
// an expert matrix in the checkpoint layout, decodes the E2M1 codes to FP16 in registers and
// multiplies them with staged FP16 activations on the tensor cores (mma.sync m16n8k16, FP32
// accumulation). The fragment mapping is described in docs/KERNELS.md, "MoE GEMV".
#pragma once

#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern::moe_gemv {

// Element e of an 8-element word sits at slot (e % 4) * 2 + e / 4 of its staged uint4: the FP16
// pairs (e0,e4) (e1,e5) (e2,e6) (e3,e7) that the decode below produces.
__device__ __forceinline__ int staged_slot(int e) { return (e % 4) * 2 + e / 4; }

__device__ __forceinline__ uint32_t half2_bits(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

using dev::Fp4Word;

// One step of a row pair: this lane's words of r0 and r1 (block 8s + g), their scale bytes and
// the staged activations of the block; acc[0|1] += r0 dots in D columns 2t, 2t+1, acc[2|3] for r1.
__device__ __forceinline__ void block_step(uint32_t q0, uint32_t q1, uint32_t s0, uint32_t s1, const uint4& x,
                                           float (&acc)[4]) {
  const Fp4Word a(q0), b(q1);
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  dev::mma_f16_16816(d, __byte_perm(a.even, 0u, 0x2404), __byte_perm(b.even, 0u, 0x2404), __byte_perm(a.odd, 0u, 0x2404),
                __byte_perm(b.odd, 0u, 0x2404), x.x, x.y);
  dev::mma_f16_16816(d, __byte_perm(a.even, 0u, 0x3414), __byte_perm(b.even, 0u, 0x3414), __byte_perm(a.odd, 0u, 0x3414),
                __byte_perm(b.odd, 0u, 0x3414), x.z, x.w);
  const float f0 = __uint_as_float(s0 << 23), f1 = __uint_as_float(s1 << 23);  // 2^(e-127)
  acc[0] = fmaf(d[0], f0, acc[0]);
  acc[1] = fmaf(d[1], f0, acc[1]);
  acc[2] = fmaf(d[2], f1, acc[2]);
  acc[3] = fmaf(d[3], f1, acc[3]);
}

// The pair's dots on every lane: D[g][g] sits in lane (g, g/2), column g % 2 of its two.
__device__ __forceinline__ float2 pair_dots(const float (&acc)[4]) {
  const int lane = threadIdx.x % 32, g = lane / 4;
  const bool holds = lane % 4 == g / 2;
  return make_float2(dev::warp_sum(holds ? (g & 1 ? acc[1] : acc[0]) : 0.0f),
                     dev::warp_sum(holds ? (g & 1 ? acc[3] : acc[2]) : 0.0f));
}

// Blocks per row G -> steps of 8 blocks; staged activations hold 8 * steps(G) blocks (zero padded).
__host__ __device__ __forceinline__ int steps(int G) { return (G + 7) / 8; }

// Where lane (g, t) starts in a matrix with G blocks per row: word t of block g of row 2 * first
// and that block's scale; and its activation words in the staged x (block 8s + g, word t).
struct LaneStart {
  const uint8_t* words;
  const uint8_t* scales;
};
__device__ __forceinline__ LaneStart lane_start(const uint8_t* blocks, const uint8_t* scales, int G, int64_t first) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t row = 2 * first;
  return {blocks + (row * G + g) * 16 + 4 * t, scales + row * G + g};
}
__device__ __forceinline__ const uint4* lane_x(const uint4* xs) {
  const int lane = threadIdx.x % 32;
  return xs + 4 * (lane / 4) + lane % 4;
}

// Weight and scale loads with the L2::256B fill hint: each miss fills 256 bytes, so a row's next
// step is already in L2 (docs/lab/RUNS_11-20.md, run 12, change 2). `.cs` (read once: evict first,
// as the dense GEMVs' __ldcs) keeps the layer's 53 MB stream from pushing everything else out of
// the 50 MB L2 (run 16, change 1). Every weight and scale load of the streams below is this one
// instruction.
#define MXS_MOE_LDG "ld.global.cs.nc.L2::256B"
__device__ __forceinline__ uint32_t ldg_u32_l2_256(const uint32_t* p) {
  uint32_t v;
  asm(MXS_MOE_LDG ".u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t ldg_u8_l2_256(const uint8_t* p) {
  uint32_t v;
  asm(MXS_MOE_LDG ".u8 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// A warp's stream over `pairs` consecutive row pairs (2i, 2i+1), i = first.., of one MXFP4 matrix
// with G blocks per row: steps of 8 blocks (lane group g takes block 8s + g of both rows), kRing
// steps of words and scale bytes in flight in registers. Activations are staged with zero padding
// up to 8 * steps_per_pair blocks, so the tail groups multiply zero weights by zeros. `emit(i, r0,
// r1)` receives the dots of the stream's pair i (0-based; times 2^14 over the activation scale), on
// every lane.
template <int kRing>  // steps (8 blocks of a row pair) in flight per warp
struct RingStream {
  const uint8_t* words;   // word t of block g of row 2 * first
  const uint8_t* scales;  // scale of block g of row 2 * first
  int row_bytes;          // G * 16
  int steps_per_pair;
  int valid_steps;  // steps in which block 8s + g < G
  int left;         // steps not yet loaded
  int total;        // steps of the whole stream
  int ls = 0;       // loader step within its pair
  uint32_t off = 0;  // loader byte offset of the current block in `words` (scales: off / 16)
  uint32_t w0[kRing], w1[kRing], e0[kRing], e1[kRing];

  __device__ __forceinline__ static RingStream make(const uint8_t* blocks, const uint8_t* scales, int G, int64_t first,
                                                    int pairs) {
    const int g = threadIdx.x % 32 / 4, n = max(pairs, 0) * steps(G);
    const LaneStart at = lane_start(blocks, scales, G, first);
    return RingStream{.words = at.words, .scales = at.scales, .row_bytes = G * 16, .steps_per_pair = steps(G), .valid_steps = (G - g + 7) / 8, .left = n,
                      .total = n};
  }
  __device__ __forceinline__ void load(int i) {
    if (left > 0 && ls < valid_steps) {
      w0[i] = ldg_u32_l2_256(reinterpret_cast<const uint32_t*>(words + off));
      w1[i] = ldg_u32_l2_256(reinterpret_cast<const uint32_t*>(words + off + row_bytes));
      e0[i] = ldg_u8_l2_256(scales + off / 16);
      e1[i] = ldg_u8_l2_256(scales + (off + row_bytes) / 16);
    } else {
      w0[i] = w1[i] = e0[i] = e1[i] = 0;
    }
    --left;
    off += 128;  // eight blocks
    if (++ls == steps_per_pair) ls = 0, off += 2 * row_bytes - steps_per_pair * 128;
  }
  __device__ __forceinline__ void prologue() {
#pragma unroll
    for (int i = 0; i < kRing; ++i) load(i);
  }
  template <typename Emit>
  __device__ __forceinline__ void run(const uint4* xs, Emit&& emit) {
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int cs = 0, pair = 0;
    const uint4* x = lane_x(xs);
    for (int base = 0; base < total; base += kRing) {
#pragma unroll
      for (int i = 0; i < kRing; ++i) {
        if (base + i >= total) break;  // uniform over the warp
        block_step(w0[i], w1[i], e0[i], e1[i], x[32 * cs], acc);
        load(i);
        if (++cs == steps_per_pair) {
          const float2 r = pair_dots(acc);
          emit(pair, r.x, r.y);
          acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
          cs = 0, ++pair;
        }
      }
    }
  }
};

// The same stream for a compile-time SP = steps(G) (gpt-oss: G = 90, SP = 12): the ring is one
// whole pair deep, so every load of the next pair is an immediate offset from two row pointers.
template <int SP>
struct PairAheadStream {
  const uint8_t* words;   // word t of block g of row 2 * first
  const uint8_t* scales;  // scale of block g of row 2 * first
  int G, pairs;
  bool tail_ok;  // block 8 (SP-1) + g < G
  uint32_t w0[SP], w1[SP], e0[SP], e1[SP];

  __device__ __forceinline__ static PairAheadStream make(const uint8_t* blocks, const uint8_t* scales, int G,
                                                         int64_t first, int pairs) {
    const LaneStart at = lane_start(blocks, scales, G, first);
    return PairAheadStream{.words = at.words, .scales = at.scales, .G = G, .pairs = max(pairs, 0),
                           .tail_ok = 8 * (SP - 1) + int(threadIdx.x % 32 / 4) < G};
  }
  // Row pointers of one pair: words of r0 and r1, scales of r0 and r1.
  struct Rows {
    const uint32_t *w0, *w1;
    const uint8_t *s0, *s1;
  };
  __device__ __forceinline__ Rows rows(int q) const {
    const uint8_t* w = words + int64_t(q) * 32 * G;  // two rows of G 16-byte blocks per pair
    const uint8_t* sc = scales + int64_t(q) * 2 * G;
    return {reinterpret_cast<const uint32_t*>(w), reinterpret_cast<const uint32_t*>(w + 16 * G), sc, sc + G};
  }
  // Step s's four loads. For the steps whose blocks are all in the row they are one volatile asm
  // statement: the steps' load groups then keep their program order among themselves (ptxas still
  // places them among the mmas), which beat four separate non-volatile loads on both models
  // (docs/lab/RUNS_11-20.md, run 14, change 8).
  __device__ __forceinline__ void load(int s, const Rows& r) {
    if (s < SP - 1) {
      asm volatile(
          MXS_MOE_LDG ".u32 %0, [%4];\n\t" MXS_MOE_LDG ".u32 %1, [%5];\n\t"
          MXS_MOE_LDG ".u8 %2, [%6];\n\t" MXS_MOE_LDG ".u8 %3, [%7];"
          : "=r"(w0[s]), "=r"(w1[s]), "=r"(e0[s]), "=r"(e1[s])
          : "l"(r.w0 + 32 * s), "l"(r.w1 + 32 * s), "l"(r.s0 + 8 * s), "l"(r.s1 + 8 * s));
      return;
    }
    w0[s] = tail_ok ? ldg_u32_l2_256(r.w0 + 32 * s) : 0u;
    w1[s] = tail_ok ? ldg_u32_l2_256(r.w1 + 32 * s) : 0u;
    e0[s] = tail_ok ? ldg_u8_l2_256(r.s0 + 8 * s) : 0u;
    e1[s] = tail_ok ? ldg_u8_l2_256(r.s1 + 8 * s) : 0u;
  }
  __device__ __forceinline__ void prologue() {
    if (pairs == 0) return;
    const Rows r = rows(0);
#pragma unroll
    for (int s = 0; s < SP; ++s) load(s, r);
  }
  template <typename Emit>
  __device__ __forceinline__ void run(const uint4* xs, Emit&& emit) {
    const uint4* x = lane_x(xs);
    for (int q = 0; q < pairs; ++q) {
      // The last pair loads itself again (L2 hits) rather than loading under `if (more)`: ptxas
      // gathered the twelve guarded load groups after the pair's last mma, where the next pair
      // waited for them; unguarded, they start during the pair (docs/lab/RUNS_11-20.md, run 14,
      // change 2).
      const Rows next = rows(q + 1 < pairs ? q + 1 : q);
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int s = 0; s < SP; ++s) {
        block_step(w0[s], w1[s], e0[s], e1[s], x[32 * s], acc);
        load(s, next);
      }
      const float2 r = pair_dots(acc);
      emit(q, r.x, r.y);
    }
  }
};

}  // namespace mx::cuda::kern::moe_gemv
