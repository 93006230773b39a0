// bf16_bf16w_gemv: out (T, N) (=|+=) x' (T, Kin) . W (N, Kin)^T + bias for T <= kGemvMaxTokens
// (decode), x' = x or, with a norm weight, rmsnorm(x) rounded to BF16 (the RMSNorm fused: every
// block normalises x while staging it in shared memory); with the qkv epilogue, the q and k rows
// are RoPE-rotated and k, v written to the paged cache (qkv_rope_cache fused). A warp owns kRows
// output rows; each lane streams 16-byte weight chunks, kUnroll chunks per row in flight (where
// kAhead, the next group's chunks load while the current group's are multiplied), and reuses every
// chunk for all T tokens. FP32 accumulation, one rounding. Launched as a programmatic
// dependent: the first weight chunks (and the norm weight) load during the previous kernel's tail.
#include "kernels/cuda/gemv_common.cuh"

namespace mx::cuda::kern {
namespace {

using namespace gemv;

constexpr int kUnroll = 4;  // 16-byte chunks per row in flight per lane

// kAhead: the next group's weight loads are issued before the current group's products (two
// register sets) instead of after them, where every group waited a full memory round trip.
template <int T, InNorm kNorm, Epilogue kEpi, bool kAhead>
__global__ void __launch_bounds__(kThreads) bf16_bf16w_gemv(const uint4* __restrict__ x, const uint4* __restrict__ w,
                                                            const __nv_bfloat16* __restrict__ bias,
                                                            const uint4* __restrict__ norm_w, float eps, void* out,
                                                            bool out_f32, bool accumulate, int64_t N, int64_t kv,
                                                            const RopeCacheParams rope) {
  extern __shared__ uint4 smem[];  // with kNorm: x' (T, kv), then the norm weight (kv)
  const int lane = threadIdx.x % 32;
  const int64_t pair = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  int64_t rows[kRows];
  const int rot_i = rows_of_pair<kEpi>(pair, rope, rows);
  const bool active = rows[0] < N;  // with kNorm every warp takes part in staging
  if (kNorm == InNorm::No && !active) return;
  const uint4* wr[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) wr[r] = w + (rows[r] < N ? rows[r] : (active ? rows[0] : 0)) * kv;

  // Weights stream from the start (launched as a programmatic dependent: they do not depend on
  // the previous kernel); x, out and the token batch only after pdl_wait. The next kernel is
  // released after the wait, not before: released early, its blocks sat resident through this
  // kernel's predecessor (the later release was faster on both models: docs/lab/RUNS_01-10.md,
  // run 6).
  uint4 wv[kUnroll][kRows];
  auto load_w = [&](int64_t c0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int64_t c = c0 + 32 * u;
        wv[u][r] = c < kv ? __ldcs(wr[r] + c) : make_uint4(0, 0, 0, 0);
      }
  };
  if (active) load_w(lane);
  const uint4* xsrc = input_after_wait<T, kNorm>(x, norm_w, smem, kv, eps);
  if (!active) return;
  float acc[T][kRows] = {};
  for (int64_t c0 = lane; c0 < kv; c0 += 32 * kUnroll) {
    const bool more = c0 + 32 * kUnroll < kv;
    uint4 cur[kUnroll][kRows];  // kAhead: this group's weights while the next group's load
    if constexpr (kAhead) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int r = 0; r < kRows; ++r) cur[u][r] = wv[u][r];
      if (more) load_w(c0 + 32 * kUnroll);
    }
    const uint4(&wc)[kUnroll][kRows] = kAhead ? cur : wv;
    uint4 xv[kUnroll][T];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
#pragma unroll
      for (int t = 0; t < T; ++t) {
        if constexpr (kNorm == InNorm::RmsNorm)
          xv[u][t] = c < kv ? xsrc[t * kv + c] : make_uint4(0, 0, 0, 0);
        else
          xv[u][t] = c < kv ? __ldg(xsrc + t * kv + c) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int t = 0; t < T; ++t) {
        float xf[8];
        dev::unpack_bf16x8(xv[u][t], xf);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float wf[8];
          dev::unpack_bf16x8(wc[u][r], wf);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[t][r] = fmaf(xf[i], wf[i], acc[t][r]);
        }
      }
    if (!kAhead && more) load_w(c0 + 32 * kUnroll);
  }
#pragma unroll
  for (int t = 0; t < T; ++t) {
    float y[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      y[r] = dev::warp_sum(acc[t][r]) + (bias && rows[r] < N ? __bfloat162float(bias[rows[r]]) : 0.0f);
    if (lane == 0) store_token<kEpi>(rope, t, rows, rot_i, y, out, out_f32, accumulate, N);
  }
}

template <int T, InNorm kNorm, Epilogue kEpi>
cudaError_t launch(const GemvParams& p, cudaStream_t s) {
  // Weight loads one group ahead: at T = 1 everywhere; above it only without the input norm, whose
  // T >= 2 instances would need 122+ registers (qkv's 640 blocks then take two waves). On the H100
  // it pays for o, qkv and lm_head at T = 1 and for o alone at T = 2 (docs/lab/RUNS_11-20.md,
  // run 14, changes 1, 5 and 5b).
  constexpr bool kAhead = T == 1 || kNorm == InNorm::No;
  const int64_t warps = (p.N + kRows - 1) / kRows;
  const size_t smem = gemv_smem_bytes(p.T, p.Kin, p.norm_weight != nullptr);
  return launch_pdl(bf16_bf16w_gemv<T, kNorm, kEpi, kAhead>, dim3(unsigned((warps + kWarps - 1) / kWarps)),
                    dim3(kThreads), smem, s, static_cast<const uint4*>(p.x), static_cast<const uint4*>(p.w),
                    static_cast<const __nv_bfloat16*>(p.bias), static_cast<const uint4*>(p.norm_weight), p.norm_eps,
                    p.out, p.out_f32, p.accumulate, p.N, p.Kin / 8, p.rope);
}

}  // namespace

size_t gemv_smem_bytes(int64_t T, int64_t Kin, bool norm) { return norm ? size_t(T + 1) * size_t(Kin) * 2 : 0; }

// Requires Kin % 8 == 0, 16-byte aligned x, w (and norm weight), gemv_smem_bytes <= kGemvMaxSmem;
// with rope_cache a bf16 out (the qkv row), no accumulate, N = (H + 2 Hkv) Dh, Dh even (checked by
// the launcher).
cudaError_t run_bf16_bf16w_gemv(const GemvParams& p, cudaStream_t s) {
  if (bad_rope_cache(p, 2)) return cudaErrorInvalidValue;
  return launch_instance<kGemvMaxTokens>(
      p, [&]<int T, InNorm kNorm, Epilogue kEpi>() { return launch<T, kNorm, kEpi>(p, s); });
}

}  // namespace mx::cuda::kern
