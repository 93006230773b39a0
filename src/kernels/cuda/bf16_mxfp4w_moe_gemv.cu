// bf16_mxfp4w_moe_gemv: the MoE experts as GEMVs straight from the top-k ids (no sort, no host
// sync), MXFP4 weights in the repacked "mma tile" layout (docs/KERNELS.md) decoded in registers to
// FP16 and multiplied on the tensor cores (mma.sync m16n8k16, FP32 accumulation, E8M0 scale applied
// once per 32-block). Kernel 1: gate_up for each (token, k) with the clamped SwiGLU fused -> act
// (T, K, F) f32. Kernel 2: down for each token over its K experts in order (deterministic), routing
// weights, bias and residual fused, launched as a programmatic dependent of kernel 1.
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

constexpr int kGuTiles = 4;    // gate_up: 16-row tiles per block (8 SwiGLU outputs each)
constexpr int kGuSplits = 2;   // gate_up: warps splitting the D/32 blocks of one tile
constexpr int kGuThreads = kGuTiles * kGuSplits * 32;
constexpr int kDnWarps = 16;   // down: warps per block (K experts x F/32 splits), one 16-row tile
constexpr int kDnThreads = kDnWarps * 32;
constexpr int kUnroll = 8;     // 32-blocks of one tile in flight per warp (2 KB)

__device__ __forceinline__ float2 load2(const __nv_bfloat16* src, int i) {
  const uint32_t w = *reinterpret_cast<const uint32_t*>(src + i);
  return make_float2(dev::bf16_lo(w), dev::bf16_hi(w));
}
__device__ __forceinline__ float2 load2(const float* src, int i) { return *reinterpret_cast<const float2*>(src + i); }

// 2^p for |p| <= 126.
__device__ __forceinline__ float exp2i(int p) { return __uint_as_float(uint32_t(p + 127) << 23); }

// Exponent p with max|x| * 2^p in [2^14, 2^15): the FP16 hi/lo split then keeps ~22 bits of every
// element (bf16 inputs exactly) without overflow. 0 for an all-zero or non-finite row.
__device__ __forceinline__ int prescale_exp(float m) {
  if (!(m > 0.0f) || isinf(m)) return 0;
  const int em = max(int((__float_as_uint(m) >> 23) & 0xff), 1);
  return min(max(141 - em, -126), 126);
}

// Stages `rows` activation rows (n elements each, row stride n) into shared memory as the mma B
// operand: per 32-block 128 bytes = [hi, lo][t = 0..3][8 halves k = 2t, 2t+1, 2t+8, 2t+9, 16+2t,
// 17+2t, 24+2t, 25+2t], where hi + lo = x * 2^p in FP16 with one p for all rows (the split keeps
// ~2^-39 of max|x| absolute, so rows of different size lose nothing). Returns 2^-p. The loops are
// flat and unrolled so that each thread's loads are in flight together (one L2 trip per pass).
template <typename Src>
__device__ float stage_rows(uint4* xs, const Src* src, int rows, int n, float* red) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int pairs = rows * n / 2;
  float m = 0.0f;
#pragma unroll 8
  for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
    const float2 v = load2(src, 2 * i);
    m = fmaxf(m, fmaxf(fabsf(v.x), fabsf(v.y)));
  }
  m = dev::warp_max(m);
  if (lane == 0) red[warp] = m;
  __syncthreads();
  m = 0.0f;
  for (int w = 0; w < warps; ++w) m = fmaxf(m, red[w]);
  const int p = prescale_exp(m);
  const float s = exp2i(p);
  __half* dst = reinterpret_cast<__half*>(xs);
#pragma unroll 8
  for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
    const float2 v = load2(src, 2 * i);
    const float vx = v.x * s, vy = v.y * s;
    const __half2 hi = __floats2half2_rn(vx, vy);
    const float2 hf = __half22float2(hi);
    const __half2 lo = __floats2half2_rn(vx - hf.x, vy - hf.y);
    const int kk = (2 * i) % 32, k16 = kk % 16;  // rows are whole 32-blocks: one index space
    const int at = (2 * i / 32) * 64 + ((k16 % 8) / 2) * 8 + (kk / 16) * 4 + (k16 / 8) * 2;
    *reinterpret_cast<__half2*>(dst + at) = hi;
    *reinterpret_cast<__half2*>(dst + at + 32) = lo;
  }
  __syncthreads();
  return exp2i(-p);
}

// One repacked 32-bit word (8 E2M1 codes) -> the 4 FP16x2 registers of an m16n8k16 A fragment,
// each value times 2^-14 (exact; 0.5 becomes an FP16 subnormal). Register j takes its two signs
// from bits 15-j, 31-j and its two magnitudes from bits 9-3j.., 25-3j.. (kern::mxfp4_tile_word).
__device__ __forceinline__ void decode_tile_word(uint32_t q, uint32_t (&a)[4]) {
  a[0] = q & 0x8e008e00u;
  a[1] = ((q << 1) & 0x80008000u) | ((q << 3) & 0x0e000e00u);
  a[2] = ((q << 2) & 0x80008000u) | ((q << 6) & 0x0e000e00u);
  a[3] = ((q << 3) & 0x80008000u) | ((q << 9) & 0x0e000e00u);
}

__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The weight stream of one warp: 32-blocks [kb, end) of one 16-row tile, kUnroll in registers.
struct TileStream {
  const uint2* w;       // tile's blocks: (G, 32 lanes) uint2, this lane's column
  const uint16_t* sc;   // tile's scales: (G, 8) u16 (rows g, g+8), this lane's g
  int kb, end;
  uint2 wv[kUnroll];
  uint32_t sv[kUnroll];

  __device__ __forceinline__ void load() {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int b = kb + u;
      wv[u] = b < end ? __ldcs(w + b * 32) : make_uint2(0, 0);
      sv[u] = b < end ? __ldcs(sc + b * 8) : 0u;
    }
  }
};

// Runs the stream to its end against the staged activation row xs; the group in registers must
// be loaded. Returns, on lanes with t = lane % 4 == 0, the dots of rows g and g+8 (g = lane / 4)
// in the prescaled domain (times 2^p of the row).
__device__ __forceinline__ float2 tile_dot(TileStream& s, const uint4* xs, int lane) {
  const int g = lane / 4, t = lane % 4;
  float2 acc = make_float2(0.0f, 0.0f);
  while (s.kb < s.end) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int b = s.kb + u;
      if (b >= s.end) break;
      const uint4 x = g < 2 ? xs[b * 8 + g * 4 + t] : make_uint4(0, 0, 0, 0);  // column 0 hi, 1 lo
      float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      uint32_t a[4];
      decode_tile_word(s.wv[u].x, a);
      mma_f16(c, a, x.x, x.y);
      decode_tile_word(s.wv[u].y, a);
      mma_f16(c, a, x.z, x.w);
      acc.x = fmaf(c[0] + c[1], dev::e8m0_scale_fp16domain(s.sv[u] & 0xffu), acc.x);
      acc.y = fmaf(c[2] + c[3], dev::e8m0_scale_fp16domain(s.sv[u] >> 8), acc.y);
    }
    s.kb += kUnroll;
    if (s.kb < s.end) s.load();
  }
  return acc;
}

__device__ __forceinline__ TileStream open_tile(const uint8_t* blocks, const uint8_t* scales, int64_t tile, int G,
                                                int kb0, int kb1, int lane) {
  TileStream s;
  s.w = reinterpret_cast<const uint2*>(blocks) + tile * G * 32 + lane;
  s.sc = reinterpret_cast<const uint16_t*>(scales) + tile * G * 8 + lane / 4;
  s.kb = kb0;
  s.end = kb1;
  s.load();
  return s;
}

__global__ void __launch_bounds__(kGuThreads, 4) bf16_mxfp4w_moe_gemv_swiglu(MoeParams p) {
  extern __shared__ uint4 smem4[];
  __shared__ float red[32];
  __shared__ float2 part[kGuTiles * kGuSplits][8];
  const int64_t tk = blockIdx.x;  // (token, slot)
  const int64_t t = tk / p.K;
  const int e = p.ids[tk];
  const bool valid = e >= 0 && e < p.E;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tiles = p.F / 8, G = p.D / 32;  // 16-row tiles (8 gate + 8 up rows) per expert
  const int tile = blockIdx.y * kGuTiles + warp / kGuSplits, split = warp % kGuSplits;
  const bool active = valid && tile < tiles;
  // Weights first (they do not depend on x), then x, so both latencies overlap.
  TileStream s = open_tile(p.gu_blocks, p.gu_scales, int64_t(valid ? e : 0) * tiles + min(tile, tiles - 1), G,
                           active ? split * G / kGuSplits : 0, active ? (split + 1) * G / kGuSplits : 0, lane);
  dev::pdl_launch_dependents();
  const float inv = stage_rows(smem4, static_cast<const __nv_bfloat16*>(p.x) + t * p.D, 1, p.D, red);
  const float2 acc = tile_dot(s, smem4, lane);
  if (lane % 4 == 0) part[warp][lane / 4] = acc;
  __syncthreads();
  const int i = threadIdx.x, j = blockIdx.y * kGuTiles * 8 + i;  // one SwiGLU output per thread
  if (i >= kGuTiles * 8 || j >= p.F) return;
  float out = 0.0f;
  if (valid) {
    float gate = 0.0f, up = 0.0f;
#pragma unroll
    for (int sp = 0; sp < kGuSplits; ++sp) {
      const float2 v = part[(i / 8) * kGuSplits + sp][i % 8];
      gate += v.x;
      up += v.y;
    }
    const __nv_bfloat16* bias = static_cast<const __nv_bfloat16*>(p.gu_bias) + int64_t(e) * 2 * p.F;
    gate = gate * inv + __bfloat162float(bias[2 * j]);
    up = up * inv + __bfloat162float(bias[2 * j + 1]);
    gate = fminf(gate, p.limit);                  // gate: upper clamp only
    up = fminf(fmaxf(up, -p.limit), p.limit);     // up: both sides
    out = gate / (1.0f + expf(-p.alpha * gate)) * (up + 1.0f);  // g * sigmoid(alpha g) * (u + 1)
  }
  p.act[tk * p.F + j] = out;
}

__global__ void __launch_bounds__(kDnThreads, 2) bf16_mxfp4w_moe_gemv_down_combine(MoeParams p) {
  extern __shared__ uint4 smem4[];  // K staged act rows
  __shared__ float red[32];
  __shared__ float2 part[kDnWarps][8];
  const int64_t t = blockIdx.x;
  const int tile = blockIdx.y;  // rows 16 tile .. 16 tile + 15
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int G = p.F / 32, per = kDnWarps / p.K;  // warps per expert
  const int k = warp / per, split = warp % per;
  const int e = k < p.K ? p.ids[t * p.K + k] : -1;
  const bool active = e >= 0 && e < p.E;
  // ids come from before kernel 1, so the weight stream starts before kernel 1 has finished.
  TileStream s = open_tile(p.dn_blocks, p.dn_scales, int64_t(active ? e : 0) * (p.D / 16) + tile, G,
                           active ? split * G / per : 0, active ? (split + 1) * G / per : 0, lane);
  dev::pdl_wait();  // act is written by kernel 1
  const float inv = stage_rows(smem4, p.act + t * p.K * p.F, p.K, p.F, red);
  const float2 acc = tile_dot(s, smem4 + int64_t(min(k, p.K - 1)) * (p.F / 4), lane);
  if (lane % 4 == 0) part[warp][lane / 4] = acc;
  __syncthreads();
  const int r = threadIdx.x, d = tile * 16 + r;
  if (r >= 16) return;
  float y = 0.0f;
  for (int kk = 0; kk < p.K; ++kk) {
    const int ek = p.ids[t * p.K + kk];
    if (ek < 0 || ek >= p.E) continue;
    float dot = 0.0f;
    for (int sp = 0; sp < per; ++sp) {
      const float2 v = part[kk * per + sp][r % 8];
      dot += r < 8 ? v.x : v.y;
    }
    const float b = __bfloat162float(static_cast<const __nv_bfloat16*>(p.dn_bias)[int64_t(ek) * p.D + d]);
    y += p.weights[t * p.K + kk] * (dot * inv + b);
  }
  __nv_bfloat16& res = static_cast<__nv_bfloat16*>(p.residual)[t * p.D + d];
  res = __float2bfloat16(__bfloat162float(res) + y);
}

cudaError_t allow_smem(const void* kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
}

// ---- repack: checkpoint layout -> mma tile layout ----

// Source row of local row l (0..15) of tile `tile`: gate_up tiles hold gate rows 2j then up rows
// 2j+1 of j = 8 tile .. 8 tile + 7 (so a lane holds the gate and up of one j); down tiles are rows
// 16 tile .. 16 tile + 15.
__device__ __forceinline__ int64_t source_row(int64_t tile, int l, bool gate_up) {
  return gate_up ? 2 * (8 * tile + (l % 8)) + l / 8 : 16 * tile + l;
}

__global__ void mxfp4_repack_blocks(MoeRepackParams p) {
  const int64_t n = p.rows / 16 * p.G * 64;  // words per expert
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int m = int(i % 2), lane = int(i / 2 % 32);
  const int64_t kb = i / 64 % p.G, tile = i / 64 / p.G;
  const int g = lane / 4, tq = lane % 4;
  uint32_t q = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int l = g + 8 * (j % 2);                 // A fragment register j: rows g, g+8, g, g+8
      const int kk = 16 * m + 2 * tq + h + 8 * (j / 2);  // k 2t+h, then 2t+8+h
      const int64_t row = source_row(tile, l, p.matrix == MoeMatrix::GateUp);
      const uint8_t byte = p.src_blocks[(row * p.G + kb) * 16 + kk / 2];
      const uint32_t code = kk % 2 ? byte >> 4 : byte & 15u;
      q |= ((code >> 3) << (15 - j + 16 * h)) | ((code & 7u) << (9 - 3 * j + 16 * h));
    }
  reinterpret_cast<uint32_t*>(p.dst_blocks)[i] = q;
}

__global__ void mxfp4_repack_scales(MoeRepackParams p) {
  const int64_t n = p.rows * p.G;  // bytes per expert
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int b = int(i % 16);  // byte 2g: row g, 2g+1: row g+8
  const int64_t kb = i / 16 % p.G, tile = i / 16 / p.G;
  p.dst_scales[i] = p.src_scales[source_row(tile, b / 2 + 8 * (b % 2), p.matrix == MoeMatrix::GateUp) * p.G + kb];
}

}  // namespace

// Shared memory of each kernel (checked against the device limit by the launcher).
size_t moe_gemv_smem_bytes(int D, int F, int K) {
  const size_t gu = size_t(D) * 4, dn = size_t(K) * F * 4;
  return gu > dn ? gu : dn;
}

cudaError_t run_bf16_mxfp4w_moe_gemv(const MoeParams& p, cudaStream_t s) {
  if (p.T == 0) return cudaSuccess;
  const size_t gu_smem = size_t(p.D) * 4, dn_smem = size_t(p.K) * p.F * 4;
  if (cudaError_t e = allow_smem(reinterpret_cast<const void*>(bf16_mxfp4w_moe_gemv_swiglu), gu_smem); e != cudaSuccess)
    return e;
  if (cudaError_t e = allow_smem(reinterpret_cast<const void*>(bf16_mxfp4w_moe_gemv_down_combine), dn_smem);
      e != cudaSuccess)
    return e;
  const unsigned gu_blocks = unsigned((p.F / 8 + kGuTiles - 1) / kGuTiles);
  bf16_mxfp4w_moe_gemv_swiglu<<<dim3(unsigned(p.T * p.K), gu_blocks), kGuThreads, gu_smem, s>>>(p);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  return launch_pdl(bf16_mxfp4w_moe_gemv_down_combine, dim3(unsigned(p.T), unsigned(p.D / 16)), dim3(kDnThreads),
                    dn_smem, s, p);
}

cudaError_t run_mxfp4_moe_repack(const MoeRepackParams& p, cudaStream_t s) {
  constexpr int kThreads = 256;
  const int64_t words = p.rows / 16 * p.G * 64, bytes = p.rows * p.G;
  mxfp4_repack_blocks<<<unsigned((words + kThreads - 1) / kThreads), kThreads, 0, s>>>(p);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  mxfp4_repack_scales<<<unsigned((bytes + kThreads - 1) / kThreads), kThreads, 0, s>>>(p);
  return cudaGetLastError();
}

}  // namespace mx::cuda::kern
