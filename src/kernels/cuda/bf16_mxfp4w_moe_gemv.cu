// bf16_mxfp4w_moe_gemv: the MoE experts as GEMVs straight from the top-k ids (no sort, no host
// sync), MXFP4 weights in the checkpoint layout decoded in registers. Kernel 1: gate_up for each
// (token, k) with the clamped SwiGLU fused -> act (T, K, F) f32. Kernel 2: down for each token,
// looping over its K experts in order (deterministic), routing weights, bias and residual fused.
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

constexpr int kWarps = 4;
constexpr int kPad = 36;       // floats per 32-element block in shared memory: conflict-free float4 reads
constexpr int kGateUpJ = 4;    // SwiGLU outputs per warp (8 weight rows)
constexpr int kDownRows = 2;   // output rows per warp
constexpr int kUnroll = 3;     // 32-element blocks per row in flight per lane (D/32 = 90 -> one pass)

// Loads n values (bf16 or f32) into the padded shared layout, 8 per thread step.
template <typename Src>
__device__ void stage_padded(float* dst, const Src* src, int n);

template <>
__device__ void stage_padded(float* dst, const __nv_bfloat16* src, int n) {
  for (int e = 8 * threadIdx.x; e < n; e += 8 * blockDim.x) {
    float f[8];
    dev::unpack_bf16x8(*reinterpret_cast<const uint4*>(src + e), f);
    float4* d = reinterpret_cast<float4*>(dst + (e / 32) * kPad + e % 32);
    d[0] = make_float4(f[0], f[1], f[2], f[3]);
    d[1] = make_float4(f[4], f[5], f[6], f[7]);
  }
}

template <>
__device__ void stage_padded(float* dst, const float* src, int n) {
  for (int e = 4 * threadIdx.x; e < n; e += 4 * blockDim.x)
    *reinterpret_cast<float4*>(dst + (e / 32) * kPad + e % 32) = *reinterpret_cast<const float4*>(src + e);
}

// Dot of one MXFP4 block (16 bytes, scale byte) with 32 staged activations.
__device__ __forceinline__ float block_dot(const uint4& b, uint8_t scale, const float* x) {
  const uint32_t w[4] = {b.x, b.y, b.z, b.w};
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float4 xa = *reinterpret_cast<const float4*>(x + 8 * i);
    const float4 xb = *reinterpret_cast<const float4*>(x + 8 * i + 4);
    float2 lo[2], hi[2];
    dev::decode_fp4x8(w[i], lo, hi);
    s = fmaf(lo[0].x, xa.x, s);
    s = fmaf(hi[0].x, xa.y, s);
    s = fmaf(lo[0].y, xa.z, s);
    s = fmaf(hi[0].y, xa.w, s);
    s = fmaf(lo[1].x, xb.x, s);
    s = fmaf(hi[1].x, xb.y, s);
    s = fmaf(lo[1].y, xb.z, s);
    s = fmaf(hi[1].y, xb.w, s);
  }
  return s * dev::e8m0_scale_fp16domain(scale);
}

// acc[r] += row_r . x for ROWS rows of one expert matrix (G blocks per row), lane-strided blocks.
template <int ROWS>
__device__ __forceinline__ void rows_dot(const uint4* const (&blocks)[ROWS], const uint8_t* const (&scales)[ROWS],
                                         const float* xs, int G, int lane, float (&acc)[ROWS]) {
  for (int g0 = lane; g0 < G; g0 += 32 * kUnroll) {
    uint4 b[kUnroll][ROWS];
    uint8_t sc[kUnroll][ROWS];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < ROWS; ++r) {
        const int g = g0 + 32 * u;
        b[u][r] = g < G ? __ldcs(blocks[r] + g) : make_uint4(0, 0, 0, 0);
        sc[u][r] = g < G ? __ldcs(scales[r] + g) : uint8_t(0);
      }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int g = g0 + 32 * u;
      if (g >= G) break;
#pragma unroll
      for (int r = 0; r < ROWS; ++r) acc[r] += block_dot(b[u][r], sc[u][r], xs + g * kPad);
    }
  }
#pragma unroll
  for (int r = 0; r < ROWS; ++r) acc[r] = dev::warp_sum(acc[r]);
}

__global__ void __launch_bounds__(kWarps * 32) bf16_mxfp4w_moe_gemv_swiglu(MoeParams p) {
  extern __shared__ float4 smem4[];
  float* xs = reinterpret_cast<float*>(smem4);
  const int64_t tk = blockIdx.x;  // (token, slot)
  const int64_t t = tk / p.K;
  const int e = p.ids[tk];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int j0 = (blockIdx.y * kWarps + warp) * kGateUpJ;
  const bool valid = e >= 0 && e < p.E;
  stage_padded(xs, static_cast<const __nv_bfloat16*>(p.x) + t * p.D, p.D);
  __syncthreads();
  if (j0 >= p.F) return;

  const int G = p.D / 32;
  const uint4* blocks[2 * kGateUpJ];
  const uint8_t* scales[2 * kGateUpJ];
#pragma unroll
  for (int r = 0; r < 2 * kGateUpJ; ++r) {
    const int64_t n = int64_t(valid ? e : 0) * 2 * p.F + min(2 * j0 + r, 2 * p.F - 1);  // rows 2j gate, 2j+1 up
    blocks[r] = reinterpret_cast<const uint4*>(p.gu_blocks) + n * G;
    scales[r] = p.gu_scales + n * G;
  }
  float acc[2 * kGateUpJ] = {};
  if (valid) rows_dot(blocks, scales, xs, G, lane, acc);
#pragma unroll
  for (int jj = 0; jj < kGateUpJ; ++jj) {
    const int j = j0 + jj;
    if (lane != jj || j >= p.F) continue;
    float out = 0.0f;
    if (valid) {
      const __nv_bfloat16* bias = static_cast<const __nv_bfloat16*>(p.gu_bias) + int64_t(e) * 2 * p.F;
      float gate = acc[2 * jj] + __bfloat162float(bias[2 * j]);
      float up = acc[2 * jj + 1] + __bfloat162float(bias[2 * j + 1]);
      gate = fminf(gate, p.limit);                  // gate: upper clamp only
      up = fminf(fmaxf(up, -p.limit), p.limit);     // up: both sides
      out = gate / (1.0f + expf(-p.alpha * gate)) * (up + 1.0f);  // g * sigmoid(alpha g) * (u + 1)
    }
    p.act[tk * p.F + j] = out;
  }
}

__global__ void __launch_bounds__(kWarps * 32) bf16_mxfp4w_moe_gemv_down_combine(MoeParams p) {
  extern __shared__ float4 smem4[];
  float* as = reinterpret_cast<float*>(smem4);  // K padded act rows of this token
  const int64_t t = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int d0 = (blockIdx.y * kWarps + warp) * kDownRows;
  const int G = p.F / 32, padded = G * kPad;
  for (int k = 0; k < p.K; ++k) stage_padded(as + k * padded, p.act + (t * p.K + k) * p.F, p.F);
  __syncthreads();
  if (d0 >= p.D) return;

  float y[kDownRows] = {};
  for (int k = 0; k < p.K; ++k) {
    const int e = p.ids[t * p.K + k];
    if (e < 0 || e >= p.E) continue;
    const uint4* blocks[kDownRows];
    const uint8_t* scales[kDownRows];
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) {
      const int64_t n = int64_t(e) * p.D + min(d0 + r, p.D - 1);
      blocks[r] = reinterpret_cast<const uint4*>(p.dn_blocks) + n * G;
      scales[r] = p.dn_scales + n * G;
    }
    float acc[kDownRows] = {};
    rows_dot(blocks, scales, as + k * padded, G, lane, acc);
    const float w = p.weights[t * p.K + k];
    const __nv_bfloat16* bias = static_cast<const __nv_bfloat16*>(p.dn_bias) + int64_t(e) * p.D;
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) y[r] += w * (acc[r] + __bfloat162float(bias[min(d0 + r, p.D - 1)]));
  }
#pragma unroll
  for (int r = 0; r < kDownRows; ++r)
    if (lane == r && d0 + r < p.D) {
      __nv_bfloat16& res = static_cast<__nv_bfloat16*>(p.residual)[t * p.D + d0 + r];
      res = __float2bfloat16(__bfloat162float(res) + y[r]);
    }
}

cudaError_t allow_smem(const void* kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
}

}  // namespace

// Shared memory of each kernel (checked against the device limit by the launcher).
size_t moe_gemv_smem_bytes(int D, int F, int K) {
  const size_t gu = size_t(D / 32) * kPad * 4, dn = size_t(K) * (F / 32) * kPad * 4;
  return gu > dn ? gu : dn;
}

cudaError_t run_bf16_mxfp4w_moe_gemv(const MoeParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  const size_t gu_smem = size_t(p.D / 32) * kPad * 4, dn_smem = size_t(p.K) * (p.F / 32) * kPad * 4;
  if (cudaError_t e = allow_smem(reinterpret_cast<const void*>(bf16_mxfp4w_moe_gemv_swiglu), gu_smem); e != cudaSuccess)
    return e;
  if (cudaError_t e = allow_smem(reinterpret_cast<const void*>(bf16_mxfp4w_moe_gemv_down_combine), dn_smem);
      e != cudaSuccess)
    return e;
  const unsigned gu_slabs = unsigned((p.F + kWarps * kGateUpJ - 1) / (kWarps * kGateUpJ));
  bf16_mxfp4w_moe_gemv_swiglu<<<dim3(unsigned(p.T * p.K), gu_slabs), kWarps * 32, gu_smem, s>>>(p);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const unsigned dn_slabs = unsigned((p.D + kWarps * kDownRows - 1) / (kWarps * kDownRows));
  bf16_mxfp4w_moe_gemv_down_combine<<<dim3(unsigned(p.T), dn_slabs), kWarps * 32, dn_smem, s>>>(p);
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
