// bf16_mxfp4w_moe_gemv: the MoE experts for a few tokens (decode) straight from the top-k ids, or
// from the router logits with each block selecting its token's top-k itself (no sort, no host
// sync, no separate top-k pass), MXFP4 weights in the checkpoint layout decoded in registers and
// multiplied on the tensor cores (mma.sync m16n8k16, FP16 operands, FP32 accumulation). Kernel 1:
// gate_up for each (token, slot) with bias and the clamped SwiGLU fused -> act. Kernel 2: down for
// each token, its K experts in slot order (deterministic), routing weights, bias and residual fused.
//
// The weights stream through mxfp4_pair_stream.cuh (fragment mapping: docs/KERNELS.md, "MoE
// GEMV"). Activations are staged once per block in shared memory as FP16 in the order the mma B
// fragments read: x scaled by a power of two per token (max |x| < 2^15, exact for BF16 input), the
// SwiGLU output, bounded by the clamps, as FP16 * act_scale (11 significant bits).
#include <algorithm>

#include "kernels/cuda/mxfp4_pair_stream.cuh"
#include "kernels/cuda/topk.cuh"

namespace mx::cuda::kern {
namespace {

using namespace moe_gemv;

constexpr int kGuWarps = 4;       // gate_up: warps per block
constexpr int kWarpsPerSm = 16;  // resident warps the work split aims at (measured: 12, 20, 24 slower)
constexpr int kMaxPairs = 64;    // row pairs per warp at most (bounds the down kernel's partials)
constexpr int kXBatch = 4;       // gate_up: x words per thread loaded together (gpt-oss: 3 per thread)

__device__ __forceinline__ float block_max(float v, float* red) {
  v = dev::warp_max(v);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float m = 0.0f;
  for (int w = 0; w < int(blockDim.x / 32); ++w) m = fmaxf(m, red[w]);
  return m;
}

static_assert(kMoeMaxK == kTopkMaxK, "a route holds kMoeMaxK experts");

// Token t's top-K experts (descending) and their logits, selected by the calling warp from the
// router logits (topk.cuh: the ids of bf16_router_topk); every lane gets them.
__device__ __forceinline__ void select_route(const MoeParams& p, int64_t t, int (&ids)[kMoeMaxK],
                                             float (&top)[kMoeMaxK]) {
  float v[dev::kTopkPerLane];
  dev::load_logits(p.logits, p.logits_f32, t, p.E, v);
  dev::warp_topk(v, p.E, p.K, !p.logits_f32, ids, top);
}

template <typename A>
__device__ __forceinline__ A pick(const A (&a)[kMoeMaxK], int k) {  // a[k] without local memory
  A r = a[0];
#pragma unroll
  for (int j = 1; j < kMoeMaxK; ++j)
    if (j == k) r = a[j];
  return r;
}

__device__ __forceinline__ float pow2(int s) { return __uint_as_float(uint32_t(127 + s) << 23); }

// Grid (T*K, ceil(F / (kGuWarps*P))); warp w of block y: SwiGLU outputs j in [(y*kGuWarps+w)*P, +P).
template <typename Stream>
__global__ void __launch_bounds__(kGuWarps * 32) bf16_mxfp4w_moe_gemv_gate_up(MoeParams p, int P) {
  extern __shared__ uint4 xs[];  // the token's x as FP16 * 2^s, D/8 staged words + zero padding
  __shared__ float red[kGuWarps];
  dev::pdl_wait();  // ids (or logits) and x come from the kernels before
  const int64_t tk = blockIdx.x, t = tk / p.K;
  __shared__ int slot_e;  // one warp reads or selects the expert: one L2 request per block
  if (threadIdx.x < 32) {
    int e = 0;
    if (p.logits) {
      int ids[kMoeMaxK];
      float top[kMoeMaxK];
      select_route(p, t, ids, top);
      e = pick(ids, int(tk % p.K));
    } else if (threadIdx.x == 0) {
      e = p.ids[tk];
    }
    if (threadIdx.x == 0) slot_e = e;
  }
  __syncthreads();
  const int e = slot_e;
  const bool valid = e >= 0 && e < p.E;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int j0 = (blockIdx.y * kGuWarps + warp) * P;
  const int G = p.D / 32;
  auto st = Stream::make(p.gu_blocks, p.gu_scales, G, int64_t(valid ? e : 0) * p.F + j0,
                         valid ? min(P, p.F - j0) : 0);
  st.prologue();  // weights stream while x is staged
  const __nv_bfloat16* bias = static_cast<const __nv_bfloat16*>(p.gu_bias);
  if (valid && lane < 2 && j0 < p.F)  // the SwiGLU's bias lines (its first and last), read at the end
    dev::prefetch_l2(bias + 2 * (int64_t(e) * p.F + (lane == 0 ? j0 : min(j0 + P, p.F) - 1)));

  // x in batches of kXBatch words per thread, all loads of a batch in flight together. The two
  // passes are written out: one helper taking a lambda for both measured slower end to end
  // (docs/lab/RUNS_11-20.md, run 12, change 4b).
  const uint4* x = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.x) + t * p.D);
  const int xw = p.D / 8;
  float m = 0.0f;
  for (int w0 = threadIdx.x; w0 < xw; w0 += kXBatch * blockDim.x) {
    uint4 v[kXBatch];
#pragma unroll
    for (int u = 0; u < kXBatch; ++u) v[u] = w0 + u * blockDim.x < xw ? x[w0 + u * blockDim.x] : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < kXBatch; ++u) {
      float f[8];
      dev::unpack_bf16x8(v[u], f);
      for (float a : f) m = fmaxf(m, fabsf(a));
    }
  }
  m = block_max(m, red);
  // m < 2^(em+1) -> m * 2^(14-em) < 2^15; clamped so that 2^s stays a normal float.
  const int s = m > 0.0f ? max(-100, min(100, 14 - (int(__float_as_uint(m) >> 23) - 127))) : 0;
  const float up = pow2(s);
  for (int w0 = threadIdx.x; w0 < xw; w0 += kXBatch * blockDim.x) {
    uint4 v[kXBatch];
#pragma unroll
    for (int u = 0; u < kXBatch; ++u) v[u] = w0 + u * blockDim.x < xw ? x[w0 + u * blockDim.x] : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < kXBatch; ++u) {
      if (w0 + u * blockDim.x >= xw) break;
      float f[8];
      dev::unpack_bf16x8(v[u], f);
      xs[w0 + u * blockDim.x] = make_uint4(half2_bits(f[0] * up, f[4] * up), half2_bits(f[1] * up, f[5] * up),
                                           half2_bits(f[2] * up, f[6] * up), half2_bits(f[3] * up, f[7] * up));
    }
  }
  for (int w = p.D / 8 + threadIdx.x; w < 32 * steps(G); w += blockDim.x) xs[w] = make_uint4(0, 0, 0, 0);
  __syncthreads();
  // down is released once every block has its route, its first weights in flight and x staged:
  // released at the start, down's blocks (which request their weights before they wait) took
  // SM slots and bandwidth from gate_up's first loads; at the end, nothing overlapped (run 31:
  // 120b batch 1 424.7 -> 425.7 t/s and 411, batch 8 925 -> 945 and 915).
  dev::pdl_launch_dependents();

  __half* act = static_cast<__half*>(p.act) + tk * p.F;
  const float down = pow2(14 - s);  // undoes the 2^-14 of the decode and the 2^s of x
  // Lane i keeps the dots of the warp's pair i (mod 32); the SwiGLU runs on all lanes at once
  // every 32 pairs and at the end.
  float my_gate = 0.0f, my_up = 0.0f;
  const int pairs = valid ? min(P, p.F - j0) : 0;
  st.run(xs, [&](int i, float gate, float upv) {
    if (lane == i % 32) my_gate = gate, my_up = upv;
    if (i % 32 != 31 && i != pairs - 1) return;  // uniform over the warp
    const int j = j0 + (i / 32) * 32 + lane;
    if (lane > i % 32) return;
    float g = my_gate * down + __bfloat162float(bias[2 * (int64_t(e) * p.F + j)]);
    float u = my_up * down + __bfloat162float(bias[2 * (int64_t(e) * p.F + j) + 1]);
    g = fminf(g, p.limit);               // gate: upper clamp only
    u = fminf(fmaxf(u, -p.limit), p.limit);  // up: both sides
    const float out = g / (1.0f + expf(-p.alpha * g)) * (u + 1.0f);  // g * sigmoid(alpha g) * (u + 1)
    act[(j / 8) * 8 + staged_slot(j % 8)] = __float2half_rn(out * p.act_scale);
  });
  if (!valid) {  // an unused slot: its act row is zero
    for (int j = j0 + lane; j < min(j0 + P, p.F); j += 32) act[(j / 8) * 8 + staged_slot(j % 8)] = __half();
  }
}

// Grid (T, ceil(D/2 / (R*P))), block (32K, R): R row groups of K warps share one staging of the K
// act rows (R = kMoeMaxK / K; with one group per block, the 480 blocks of a 120b layer read 11 MB of
// act rows out of L2 at once; two groups are faster: docs/lab/RUNS_11-20.md, run 13, change 6).
// Warp (k, g) takes rows 2i, 2i+1, i in [y*R*P + g*P, +P), of expert ids[t,k]; the block then sums
// the K slots in order with weights, biases and the residual.
template <typename Stream>
__global__ void __launch_bounds__(kMoeMaxK * 32, 2) bf16_mxfp4w_moe_gemv_down(MoeParams p, int P) {
  extern __shared__ uint4 as[];  // K act rows as staged words (F/8 each, zero padded), then K * 2Pb partials
  const int64_t t = blockIdx.x;
  const int k = threadIdx.x / 32, rg = threadIdx.y;  // slot, row group
  const int tid = threadIdx.x + threadIdx.y * blockDim.x, threads = blockDim.x * blockDim.y;
  const int Pb = int(blockDim.y) * P;  // row pairs of the block
  const int i0 = blockIdx.y * Pb, pairs = min(Pb, p.D / 2 - i0);
  const int mine = max(0, min(P, pairs - rg * P));  // the warp's: i0 + rg * P ..
  const int words = p.F / 8, padded = 32 * steps(p.F / 32);
  // The route (ids or logits) was written before gate_up ran, so it is visible before pdl_wait.
  // Warp 0 reads or selects it (one L2 request per block) and shares it through shared memory.
  __shared__ int route_e[kMoeMaxK];
  __shared__ float route_w[kMoeMaxK];
  int ids[kMoeMaxK];
  float top[kMoeMaxK];
  if (tid < 32) {
    if (p.logits) {
      select_route(p, t, ids, top);
      if (tid == 0)
#pragma unroll
        for (int kk = 0; kk < kMoeMaxK; ++kk)
          if (kk < p.K) route_e[kk] = ids[kk];
    } else if (tid < p.K) {
      route_e[tid] = p.ids[t * p.K + tid];
      route_w[tid] = p.weights[t * p.K + tid];
    }
  }
  __syncthreads();
  const int e = route_e[k];
  const bool valid = e >= 0 && e < p.E;
  if (p.logits && tid == 0) {  // the routing weights (ids and top die before the stream starts)
    float w[kMoeMaxK];
    dev::topk_softmax(top, p.K, w);
#pragma unroll
    for (int kk = 0; kk < kMoeMaxK; ++kk) {
      if (kk >= p.K) break;
      route_w[kk] = w[kk];
      if (blockIdx.y == 0) p.ids[t * p.K + kk] = ids[kk], p.weights[t * p.K + kk] = w[kk];  // the op's outputs
    }
  }

  auto st = Stream::make(p.dn_blocks, p.dn_scales, p.F / 32, int64_t(valid ? e : 0) * (p.D / 2) + i0 + rg * P,
                         valid ? mine : 0);
  st.prologue();  // the weights stream during gate_up's tail
  const __nv_bfloat16* dn_bias = static_cast<const __nv_bfloat16*>(p.dn_bias);
  __nv_bfloat16* residual = static_cast<__nv_bfloat16*>(p.residual) + t * p.D + 2 * i0;
  if (threadIdx.x % 32 < 2 && mine > 0) {  // the epilogue's lines (first and last) into L2
    const int r = 2 * rg * P + (threadIdx.x % 32 == 0 ? 0 : 2 * mine - 1);
    if (valid) dev::prefetch_l2(dn_bias + int64_t(e) * p.D + 2 * i0 + r);
    if (k == 0) dev::prefetch_l2(residual + r);
  }
  dev::pdl_wait();  // act from gate_up
  dev::pdl_launch_dependents();
  // All of a thread's act words in flight at once (cp.async; the padding zero-filled): a load-store
  // loop waited for each word in turn, ~12 L2 round trips on the critical path at gpt-oss sizes.
  const uint4* act = static_cast<const uint4*>(p.act) + t * p.K * words;
  for (int w = tid; w < p.K * padded; w += threads) {
    const int kk = w / padded, i = w % padded;
    dev::cp_async16(as + w, act + kk * words + min(i, words - 1), i < words);
  }
  float* part = reinterpret_cast<float*>(as + p.K * padded);  // [k][2Pb rows]
  for (int r = tid; r < p.K * 2 * Pb; r += threads) part[r] = 0.0f;
  dev::cp_async_wait_all();
  __syncthreads();

  float* my_part = part + k * 2 * Pb + 2 * rg * P;  // the warp's rows of slot k
  st.run(as + k * padded, [&](int i, float r0, float r1) {
    if (threadIdx.x % 32 != 0) return;
    my_part[2 * i] = r0;
    my_part[2 * i + 1] = r1;
  });
  __syncthreads();
  const float down = 16384.0f / p.act_scale;  // undoes the 2^-14 of the decode and act_scale
  for (int r = tid; r < 2 * pairs; r += threads) {
    const int d = 2 * i0 + r;
    float bias[kMoeMaxK];  // all loads of the row in flight together
#pragma unroll
    for (int kk = 0; kk < kMoeMaxK; ++kk) {
      const int ek = kk < p.K ? route_e[kk] : -1;
      bias[kk] = ek >= 0 && ek < p.E ? __bfloat162float(dn_bias[int64_t(ek) * p.D + d]) : 0.0f;
    }
    const float res = __bfloat162float(residual[r]);
    float y = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kMoeMaxK; ++kk) {
      const int ek = kk < p.K ? route_e[kk] : -1;
      if (ek >= 0 && ek < p.E) y += route_w[kk] * (part[kk * 2 * Pb + r] * down + bias[kk]);
    }
    residual[r] = __float2bfloat16(res + y);
  }
}

// Work units per warp so that the launch fills about kWarpsPerSm warps on every SM.
int per_warp(int64_t units, int sms) {
  const int64_t warps = int64_t(std::max(sms, 1)) * kWarpsPerSm;
  return int(std::clamp<int64_t>((units + warps - 1) / warps, 1, kMaxPairs));
}
int gate_up_pairs(const MoeParams& p) { return per_warp(p.T * p.K * p.F, p.sms); }
int down_pairs(const MoeParams& p) { return per_warp(p.T * p.K * (p.D / 2), p.sms); }
// Row groups per down block (its blockDim.y): the K act rows are staged once for all of them.
int down_groups(int K) { return kMoeMaxK / std::max(K, 1); }

size_t gate_up_smem(int D) { return size_t(steps(D / 32)) * 8 * 64; }
size_t down_smem(int F, int K, int P) { return size_t(K) * steps(F / 32) * 8 * 64 + size_t(K) * 2 * P * 4; }

cudaError_t allow_smem(const void* kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
}

}  // namespace

size_t moe_gemv_smem_bytes(int D, int F, int K) {
  return std::max(gate_up_smem(D), down_smem(F, K, down_groups(K) * kMaxPairs));
}

float moe_gemv_act_scale(float limit, float alpha) {
  // |act| <= max(limit, max_{y>0} y / (1 + e^(alpha y))) * (limit + 1); the middle term is
  // 0.2785 / alpha. The largest power of two keeping that below 2^15 (FP16 holds up to 65504).
  const float bound = fmaxf(fmaxf(limit, 0.2785f / alpha), 1.0f) * (limit + 1.0f);
  return exp2f(floorf(log2f(32768.0f / bound)));
}

// GuStream reads gate_up (rows of D / 32 blocks), DnStream down (rows of F / 32 blocks).
template <typename GuStream, typename DnStream>
cudaError_t run_streams(const MoeParams& p, cudaStream_t s) {
  const int gu_p = gate_up_pairs(p), dn_p = down_pairs(p), groups = down_groups(p.K);
  if (cudaError_t e = allow_smem(reinterpret_cast<const void*>(bf16_mxfp4w_moe_gemv_gate_up<GuStream>), gate_up_smem(p.D));
      e != cudaSuccess)
    return e;
  if (cudaError_t e = allow_smem(reinterpret_cast<const void*>(bf16_mxfp4w_moe_gemv_down<DnStream>),
                                 down_smem(p.F, p.K, groups * dn_p));
      e != cudaSuccess)
    return e;
  const unsigned gu_blocks = unsigned((p.F + kGuWarps * gu_p - 1) / (kGuWarps * gu_p));
  if (cudaError_t e = launch_pdl(bf16_mxfp4w_moe_gemv_gate_up<GuStream>, dim3(unsigned(p.T * p.K), gu_blocks), dim3(kGuWarps * 32),
                                 gate_up_smem(p.D), s, p, gu_p);
      e != cudaSuccess)
    return e;
  const unsigned dn_blocks = unsigned((p.D / 2 + groups * dn_p - 1) / (groups * dn_p));
  return launch_pdl(bf16_mxfp4w_moe_gemv_down<DnStream>, dim3(unsigned(p.T), dn_blocks), dim3(unsigned(p.K * 32), unsigned(groups)),
                    down_smem(p.F, p.K, groups * dn_p), s, p, dn_p);
}

cudaError_t run_bf16_mxfp4w_moe_gemv(const MoeParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  // gpt-oss (D = 2880: 12 steps of 8 blocks): the pair-ahead ring with immediate offsets, for the
  // expert width of one GPU (F = 2880) and of a tensor-parallel rank's share of it (TP 2: 45
  // blocks, 6 steps; TP 4: 22-23, 3; TP 8: 11-12, 2); other sizes: the generic ring (slower at
  // batch 1: docs/lab/KERNEL_NOTES.md, "MoE GEMV on the tensor cores").
  if (steps(p.D / 32) == 12) {
    using Gu = PairAheadStream<12>;
    switch (steps(p.F / 32)) {
      case 12: return run_streams<Gu, PairAheadStream<12>>(p, s);
      case 6: return run_streams<Gu, PairAheadStream<6>>(p, s);
      case 3: return run_streams<Gu, PairAheadStream<3>>(p, s);
      case 2: return run_streams<Gu, PairAheadStream<2>>(p, s);
      default: break;
    }
  }
  return run_streams<RingStream<8>, RingStream<8>>(p, s);
}

}  // namespace mx::cuda::kern
