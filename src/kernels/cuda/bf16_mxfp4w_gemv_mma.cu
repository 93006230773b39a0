// bf16_mxfp4w_gemv_mma: bf16_mxfp4w_gemv (MXFP4 dense weights, --mxfp4-layers) for decode batches
// of 2 to kMxfp4MmaMaxTokens tokens: out (T, N) (=|+=) x' (T, Kin) . W (N, Kin)^T + bias with the
// same fused input RMSNorm and qkv epilogue (gemv_common.cuh).
//
// On the tensor cores (mma.sync m16n8k16, FP16 in, FP32 accumulate): a block owns a tile of 16
// output rows, its 4 warps split the row's blocks (quads of 4 MXFP4 blocks, warp w takes quads
// w, w + 4, ...) and add their sums in shared memory at the end. A quad of the 16 rows (1 KB) is
// copied to shared memory with cp.async (a ring of kStages quads per warp, each lane 16 contiguous
// bytes of a row: 64-byte runs), and two ldmatrix.x4 hand lane (g, t) word t of each of the 4 blocks
// of rows g and g + 8 — the layout an mma A fragment wants, so that one mma pair covers exactly one
// block of 16 rows and the block's scale multiplies the mma's FP32 result. Words decode to FP16
// E2M1 * 2^-14 as in the MoE GEMVs (Fp4Word + prmt, cuda_common.cuh); x' is staged once per block as
// FP16 * 2^s per token (max |x'| < 2^15: BF16 values are exact) in the pair order of those
// fragments, the tokens as the mma's 8 columns: well under one instruction per weight at any T <= 8
// (bf16_mxfp4w_gemv's FP32 FMAs: 3.7 at T = 1, 8.4 at T = 4). Blocks are persistent (as many as
// stay resident, looping over tiles), so x' is staged once per block. At T = 1 the FP32 kernel is
// faster: its whole row loads in one round trip and it needs no FP16 staging pass.
#include <algorithm>

#include "kernels/cuda/gemv_common.cuh"
#include "kernels/cuda/mxfp4_pair_stream.cuh"

namespace mx::cuda::kern {
namespace {

using namespace gemv;

constexpr int kTileRows = 16;  // output rows per tile (the mma's M)
constexpr int kStages = 4;     // quads in flight per warp (8 measured no faster)
// One ring stage: a quad (4 MXFP4 blocks) of the tile's 16 rows as two 8-row halves of 32 words,
// then the two 16-byte aligned scale chunks around each row's 4 scale bytes.
constexpr int kQuadWords = 2 * 32, kScaleWords = 2 * kTileRows, kStageWords = kQuadWords + kScaleWords;

// Words of x per staged token: kv + pad with (kv + pad) % 8 == 4, so that the 16-byte B loads of
// tokens g and g + 1 (one shared-memory phase) fall in different banks.
__host__ __device__ __forceinline__ int64_t x_stride(int64_t kv) { return kv + (12 - kv % 8) % 8; }

struct SmemLayout {  // offsets in uint4 words
  int64_t xs, nws, ring, total;
  __host__ __device__ SmemLayout(int T, int64_t Kin, bool norm) {
    const int64_t kv = Kin / 8;
    xs = 0;
    nws = xs + T * x_stride(kv);
    ring = nws + (norm ? kv : 0);
    total = ring + int64_t(kWarps) * kStages * kStageWords;
  }
};

// Rows of the tile's halves for lane group g: r[0] = row of A row g, r[1] = of A row g + 8; with the
// qkv epilogue the q/k tiles are 8 rotation pairs (h·Dh + i, h·Dh + i + Dh/2), v tiles 16 rows.
// Returns the rotation index i, or -1.
template <Epilogue kEpi>
__device__ __forceinline__ int tile_rows(int64_t tile, int g, const RopeCacheParams& rope, int64_t (&r)[kRows]) {
  if constexpr (kEpi == Epilogue::RopeCache) {
    const int half = rope.Dh / 2;
    const int64_t qk_tiles = int64_t(rope.H + rope.Hkv) * half / 8;
    if (tile < qk_tiles) {
      const int64_t pair = tile * 8 + g, h = pair / half, i = pair % half;
      r[0] = h * rope.Dh + i;
      r[1] = r[0] + half;
      return int(i);
    }
    r[0] = int64_t(rope.H + rope.Hkv) * rope.Dh + (tile - qk_tiles) * kTileRows + g;
    r[1] = r[0] + 8;
    return -1;
  }
  r[0] = tile * kTileRows + g;
  r[1] = r[0] + 8;
  return -1;
}

// x (T, kv) -> xs rows of `stride` words (no input norm).
template <int T>
__device__ void stage_x(const uint4* __restrict__ x, uint4* xs, int64_t kv, int64_t stride) {
  for (int64_t c = threadIdx.x; c < kv; c += kThreads)
#pragma unroll
    for (int t = 0; t < T; ++t) xs[t * stride + c] = __ldg(x + t * kv + c);
  __syncthreads();
}

// The staged BF16 x' rewritten in place as FP16 * 2^s[t] (s[t] = 14 - exponent of the token's
// max |x'|), each word's 8 values in the fragment order of moe_gemv::staged_slot.
template <int T>
__device__ void stage_fp16(uint4* xs, int64_t kv, int64_t stride, int (&s)[T]) {
  __shared__ float partial[kWarps][T];
  float m[T] = {};
  for (int64_t c = threadIdx.x; c < kv; c += kThreads)
#pragma unroll
    for (int t = 0; t < T; ++t) {
      float f[8];
      dev::unpack_bf16x8(xs[t * stride + c], f);
#pragma unroll
      for (int i = 0; i < 8; ++i) m[t] = fmaxf(m[t], fabsf(f[i]));
    }
#pragma unroll
  for (int t = 0; t < T; ++t) {
    m[t] = dev::warp_max(m[t]);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32][t] = m[t];
  }
  __syncthreads();
  float up[T];
#pragma unroll
  for (int t = 0; t < T; ++t) {
    float mt = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mt = fmaxf(mt, partial[w][t]);
    // mt < 2^(e+1) -> mt * 2^(14-e) < 2^15; clamped so that 2^s stays a normal float.
    s[t] = mt > 0.0f ? max(-100, min(100, 14 - (int(__float_as_uint(mt) >> 23) - 127))) : 0;
    up[t] = __uint_as_float(uint32_t(127 + s[t]) << 23);
  }
  for (int64_t c = threadIdx.x; c < kv; c += kThreads)
#pragma unroll
    for (int t = 0; t < T; ++t) {
      float f[8], h[8];
      dev::unpack_bf16x8(xs[t * stride + c], f);
#pragma unroll
      for (int e = 0; e < 8; ++e) h[moe_gemv::staged_slot(e)] = f[e] * up[t];
      xs[t * stride + c] = make_uint4(moe_gemv::half2_bits(h[0], h[1]), moe_gemv::half2_bits(h[2], h[3]),
                                      moe_gemv::half2_bits(h[4], h[5]), moe_gemv::half2_bits(h[6], h[7]));
    }
  __syncthreads();
}

template <int T, InNorm kNorm, Epilogue kEpi>
__global__ void __launch_bounds__(kThreads)
    bf16_mxfp4w_gemv_mma(const uint4* __restrict__ x, const uint8_t* __restrict__ blocks,
                     const uint8_t* __restrict__ scales, const __nv_bfloat16* __restrict__ bias,
                     const uint4* __restrict__ norm_w, float eps, void* out, bool out_f32, bool accumulate,
                     int64_t N, int64_t Kin, const RopeCacheParams rope) {
  extern __shared__ uint4 smem[];
  const SmemLayout L(T, Kin, kNorm == InNorm::RmsNorm);
  const int64_t kv = Kin / 8, G = Kin / 32, stride = x_stride(kv), quads = (G + 3) / 4;
  const int64_t n_tiles = (N + kTileRows - 1) / kTileRows;
  const int64_t my_tiles = (n_tiles - blockIdx.x + gridDim.x - 1) / gridDim.x;  // tiles blockIdx.x + k·gridDim.x
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  const int64_t my_quads = quads > warp ? (quads - warp + kWarps - 1) / kWarps : 0;  // per tile: w, w + 4, ...
  uint4* ring = smem + L.ring + int64_t(warp) * kStages * kStageWords;

  // Where the scale chunks of row r start: the 16-byte aligned address at or below its quad's
  // first scale byte (two chunks cover the quad's 4 bytes).
  auto scale_base = [&](int64_t row, int64_t q) { return (row * G + 4 * q) & ~int64_t(15); };
  // The warp's n-th quad (tile k = n / my_quads, quad w + 4·(n % my_quads)) into stage n % kStages:
  // lane (g, t) copies block 4q + t of rows g and g + 8 into slot (t + g/2) % 4 of its half (the
  // swizzle puts the 8 rows an ldmatrix matrix reads in 8 bank groups), and one scale chunk of
  // row l / 2, chunk l % 2.
  const int slot = g * 4 + ((t4 + g / 2) & 3);
  const int64_t total = my_tiles * my_quads;
  auto issue = [&](int64_t n) {
    if (n < total) {
      const int64_t tile = blockIdx.x + (n / my_quads) * gridDim.x, q = warp + int64_t(kWarps) * (n % my_quads);
      uint4* st = ring + (n % kStages) * kStageWords;
      int64_t rows[kRows];
      tile_rows<kEpi>(tile, g, rope, rows);
      const int64_t b = 4 * q + t4;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int64_t row = rows[r] < N ? rows[r] : N - 1;
        dev::cp_async16(st + 32 * r + slot, blocks + (row * G + (b < G ? b : 0)) * 16, b < G);
      }
      int64_t srows[kRows];  // the scale chunk of tile row lane / 2
      const int tr = lane / 2;
      tile_rows<kEpi>(tile, tr % 8, rope, srows);
      const int64_t srow = tr < 8 ? srows[0] : srows[1], at = scale_base(srow < N ? srow : N - 1, q) + 16 * (lane % 2);
      if (at + 16 <= N * G) {
        dev::cp_async16(st + kQuadWords + lane, scales + at, true);
      } else {  // the matrix's last chunk, shorter than 16 bytes: plain loads (read after the stage's syncwarp)
        uint8_t* dst = reinterpret_cast<uint8_t*>(st + kQuadWords + lane);
        for (int i = 0; i < 16; ++i) dst[i] = at + i < N * G ? scales[at + i] : uint8_t(0);
      }
    }
    dev::cp_async_commit();
  };
#pragma unroll
  for (int n = 0; n < kStages; ++n) issue(n);
  if constexpr (kNorm == InNorm::RmsNorm) {
    for (int64_t c = threadIdx.x; c < kv; c += kThreads) smem[L.nws + c] = __ldg(norm_w + c);
  }
  dev::pdl_wait();
  dev::pdl_launch_dependents();
  if constexpr (kNorm == InNorm::RmsNorm)
    stage_rmsnorm<T>(x, smem + L.nws, smem + L.xs, kv, eps, stride);
  else
    stage_x<T>(x, smem + L.xs, kv, stride);
  int s[T];
  stage_fp16<T>(smem + L.xs, kv, stride, s);

  const uint4* xg = smem + L.xs + int64_t(g) * stride + t4;  // token g's word t4 of block 0
  const int mi = lane / 8, mr = lane % 8;  // ldmatrix: lanes 8i..8i+7 address rows 0..7 of matrix i = block i
  __shared__ float red[2][kWarps][32][4];
  int64_t n = 0;
  for (int64_t k = 0; k < my_tiles; ++k) {
    const int64_t tile = blockIdx.x + k * gridDim.x;
    int64_t rows[kRows];
    const int rot_i = tile_rows<kEpi>(tile, g, rope, rows);
    float acc[4] = {};
    for (int64_t j = 0; j < my_quads; ++j, ++n) {
      dev::cp_async_wait<kStages - 1>();
      __syncwarp();
      const uint4* st = ring + (n % kStages) * kStageWords;
      uint32_t wa[4], wb[4];  // word t4 of blocks 4q + i of rows g (wa) and g + 8 (wb)
      dev::ldmatrix_x4(wa, st + mr * 4 + ((mi + mr / 2) & 3));
      dev::ldmatrix_x4(wb, st + 32 + mr * 4 + ((mi + mr / 2) & 3));
      const int64_t q = warp + int64_t(kWarps) * j;
      const uint8_t* sch = reinterpret_cast<const uint8_t*>(st + kQuadWords);
      uint32_t sp[kRows];  // this quad's 4 scale bytes of rows g and g + 8
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int tr = g + 8 * r;
        const int64_t off = (rows[r] < N ? rows[r] : N - 1) * G + 4 * q;
        const uint8_t* p = sch + 32 * tr + (off - scale_base(rows[r] < N ? rows[r] : N - 1, q));
        sp[r] = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
      }
      __syncwarp();  // every lane has read the stage before it is refilled
      issue(n + kStages);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t b = 4 * q + i;
        if (b >= G) break;
        const uint4 xb = g < T ? xg[b * 4] : make_uint4(0, 0, 0, 0);
        const dev::Fp4Word a(wa[i]), c(wb[i]);
        float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        dev::mma_f16_16816(d, __byte_perm(a.even, 0u, 0x2404), __byte_perm(c.even, 0u, 0x2404),
                           __byte_perm(a.odd, 0u, 0x2404), __byte_perm(c.odd, 0u, 0x2404), xb.x, xb.y);
        dev::mma_f16_16816(d, __byte_perm(a.even, 0u, 0x3414), __byte_perm(c.even, 0u, 0x3414),
                           __byte_perm(a.odd, 0u, 0x3414), __byte_perm(c.odd, 0u, 0x3414), xb.z, xb.w);
        const float s0 = __uint_as_float(((sp[0] >> (8 * i)) & 0xffu) << 23);  // 2^(e-127), row g
        const float s1 = __uint_as_float(((sp[1] >> (8 * i)) & 0xffu) << 23);  // row g + 8
        acc[0] = fmaf(d[0], s0, acc[0]);
        acc[1] = fmaf(d[1], s0, acc[1]);
        acc[2] = fmaf(d[2], s1, acc[2]);
        acc[3] = fmaf(d[3], s1, acc[3]);
      }
    }
    // The warps' sums of the tile (lane (g, t): rows g, g + 8 x tokens 2t, 2t + 1), added and stored
    // by warp k % kWarps; red alternates by tile, so the next tile's writes cannot meet this read.
#pragma unroll
    for (int c = 0; c < 4; ++c) red[k & 1][warp][lane][c] = acc[c];
    __syncthreads();
    if (warp != int(k % kWarps)) continue;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      acc[c] = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) acc[c] += red[k & 1][w][lane][c];
    }
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int tok = 2 * t4 + c;
      if (tok >= T) continue;
      int st = 0;
#pragma unroll
      for (int u = 0; u < T; ++u)
        if (u == tok) st = s[u];
      const float back = __uint_as_float(uint32_t(127 + 14 - st) << 23);  // 2^14 (codes) * 2^-s (x)
      float y[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        y[r] = acc[2 * r + c] * back + (bias && rows[r] < N ? __bfloat162float(bias[rows[r]]) : 0.0f);
      store_token<kEpi>(rope, tok, rows, rot_i, y, out, out_f32, accumulate, N);
    }
  }
  dev::cp_async_wait_all();
}

template <int T, InNorm kNorm, Epilogue kEpi>
cudaError_t launch(const GemvParams& p, cudaStream_t s) {
  const size_t smem = mxfp4_gemv_mma_smem_bytes(T, p.Kin, p.norm_weight != nullptr);
  auto kernel = bf16_mxfp4w_gemv_mma<T, kNorm, kEpi>;
  // Dynamic plus static shared memory may pass 48 KB: opt in for what the call needs.
  const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (attr != cudaSuccess) return attr;
  // Persistent blocks: as many as stay resident (x' is staged once per block), at most one per tile.
  int per_sm = 0, dev = 0, sms = 0;
  cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem);
  if (e == cudaSuccess) e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e != cudaSuccess) return e;
  const int64_t tiles = (p.N + kTileRows - 1) / kTileRows;
  const int64_t grid = std::min<int64_t>(tiles, int64_t(std::max(per_sm, 1)) * sms);
  return launch_pdl(kernel, dim3(unsigned(grid)), dim3(kThreads), smem, s, static_cast<const uint4*>(p.x),
                    static_cast<const uint8_t*>(p.w), static_cast<const uint8_t*>(p.w_scales),
                    static_cast<const __nv_bfloat16*>(p.bias), static_cast<const uint4*>(p.norm_weight), p.norm_eps,
                    p.out, p.out_f32, p.accumulate, p.N, p.Kin, p.rope);
}

}  // namespace

size_t mxfp4_gemv_mma_smem_bytes(int64_t T, int64_t Kin, bool norm) {
  return size_t(SmemLayout(int(T), Kin, norm).total) * 16;
}

// Requires Kin % 32 == 0, 16-byte aligned x, w (and norm weight), w_scales set,
// mxfp4_gemv_mma_smem_bytes <= kMxfp4GemvMaxSmem; with rope_cache Dh % 16 == 0 besides the BF16
// GEMV's conditions (checked by the launcher).
cudaError_t run_bf16_mxfp4w_gemv_mma(const GemvParams& p, cudaStream_t s) {
  if (!p.w_scales || p.Kin % 32 != 0 || bad_rope_cache(p, 16)) return cudaErrorInvalidValue;
  return launch_instance<kMxfp4MmaMaxTokens>(
      p, [&]<int T, InNorm kNorm, Epilogue kEpi>() { return launch<T, kNorm, kEpi>(p, s); });
}

}  // namespace mx::cuda::kern
