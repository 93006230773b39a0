// bf16_bf16w_gemv: out (T, N) (=|+=) x (T, Kin) . W (N, Kin)^T + bias for T <= kGemvMaxTokens
// (decode). A warp owns kRows output rows; each lane streams 16-byte weight chunks, kUnroll chunks
// per row in flight, and reuses every chunk for all T tokens. FP32 accumulation, one rounding.
// Launched as a programmatic dependent: the first weight chunks load during the previous kernel's tail.
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

constexpr int kWarps = 4;   // warps per block
constexpr int kRows = 2;    // output rows per warp
constexpr int kUnroll = 4;  // 16-byte chunks per row in flight per lane

template <int T>
__global__ void __launch_bounds__(kWarps * 32) bf16_bf16w_gemv(const uint4* __restrict__ x, const uint4* __restrict__ w,
                                                              const __nv_bfloat16* __restrict__ bias, void* out,
                                                              bool out_f32, bool accumulate, int64_t N, int64_t kv) {
  const int lane = threadIdx.x % 32;
  const int64_t row0 = (int64_t(blockIdx.x) * kWarps + threadIdx.x / 32) * kRows;
  if (row0 >= N) return;
  const uint4* wr[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) wr[r] = w + (row0 + r < N ? row0 + r : row0) * kv;

  // Weights stream from the start (launched as a programmatic dependent: they do not depend on
  // the previous kernel); x and out only after pdl_wait.
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
  load_w(lane);
  dev::pdl_launch_dependents();
  dev::pdl_wait();
  float acc[T][kRows] = {};
  for (int64_t c0 = lane; c0 < kv; c0 += 32 * kUnroll) {
    uint4 xv[kUnroll][T];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
#pragma unroll
      for (int t = 0; t < T; ++t) xv[u][t] = c < kv ? __ldg(x + t * kv + c) : make_uint4(0, 0, 0, 0);
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
          dev::unpack_bf16x8(wv[u][r], wf);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[t][r] = fmaf(xf[i], wf[i], acc[t][r]);
        }
      }
    if (c0 + 32 * kUnroll < kv) load_w(c0 + 32 * kUnroll);
  }
#pragma unroll
  for (int t = 0; t < T; ++t)
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float v = dev::warp_sum(acc[t][r]);
      const int64_t n = row0 + r;
      if (lane != 0 || n >= N) continue;
      const float y = v + (bias ? __bfloat162float(bias[n]) : 0.0f);
      if (out_f32) {
        float& o = static_cast<float*>(out)[t * N + n];
        o = accumulate ? o + y : y;
      } else {
        __nv_bfloat16& o = static_cast<__nv_bfloat16*>(out)[t * N + n];
        o = __float2bfloat16(accumulate ? __bfloat162float(o) + y : y);
      }
    }
}

template <int T>
cudaError_t launch(const GemvParams& p, cudaStream_t s) {
  const int64_t warps = (p.N + kRows - 1) / kRows;
  return launch_pdl(bf16_bf16w_gemv<T>, dim3(unsigned((warps + kWarps - 1) / kWarps)), dim3(kWarps * 32), 0, s,
                    static_cast<const uint4*>(p.x), static_cast<const uint4*>(p.w),
                    static_cast<const __nv_bfloat16*>(p.bias), p.out, p.out_f32, p.accumulate, p.N, p.Kin / 8);
}

}  // namespace

// Requires Kin % 8 == 0 and 16-byte aligned x, w (checked by the launcher).
cudaError_t run_bf16_bf16w_gemv(const GemvParams& p, cudaStream_t s) {
  static_assert(kGemvMaxTokens == 4, "one instantiation per token count below");
  switch (p.T) {
    case 0: return cudaSuccess;
    case 1: return launch<1>(p, s);
    case 2: return launch<2>(p, s);
    case 3: return launch<3>(p, s);
    case 4: return launch<4>(p, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace mx::cuda::kern
