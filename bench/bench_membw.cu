// bench_membw: what read bandwidth the MoE decode's access patterns can reach, without arithmetic.
// Each call reads the gate_up matrices of 4 experts of a 120b layer (4 x 5760 rows x 1440 bytes,
// 33.2 MB; expert sets rotate past L2), of 6 (49.8 MB: about a layer's MoE decode bytes, gate_up
// and down, 52.9 MB, in one kernel) and of 16 experts (132.7 MB: the steady state without the
// ramp-up and tail of a short kernel), with 16 warps per SM, in one of these patterns:
//   linear      the grid strides over each matrix, 16 bytes per lane, 8 loads in flight per lane
//   segments    each warp reads its own contiguous share, 512 bytes per load instruction
//   row-pairs   each warp streams (2 rows) x 128 bytes per step, a whole pair (24 loads) in flight
//               (the checkpoint-layout GEMV up to 2026-11-25)
//   tiles64     each warp streams 16 rows x 64 bytes per step (8 rows per load instruction)
// and the last two with the L2::256B fill hint on every load; then, with the hint, row pairs with
// the warps' pair orders interleaved (warp w: pairs w, w + W, ...), in the checkpoint layout and
// in a step-major one ([step][pair][2 x 128 bytes]).
// Usage: bench_membw. Prints µs per call and GB/s.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "bench_util.h"

namespace {

constexpr int kE = 128, kMaxK = 16, kRows = 5760, kRowBytes = 1440, kSets = 32;
constexpr size_t kExpertBytes = size_t(kRows) * kRowBytes;

struct Set {
  const uint8_t* m[kMaxK];
  int k;  // matrices per call
};

template <bool kHint>
__device__ __forceinline__ uint32_t ld32(const uint32_t* p) {
  if constexpr (!kHint) return __ldg(p);
  uint32_t v;
  asm("ld.global.nc.L2::256B.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
template <bool kHint>
__device__ __forceinline__ uint4 ld128(const uint4* p) {
  if constexpr (!kHint) return __ldg(p);
  uint4 v;
  asm("ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

__device__ __forceinline__ uint32_t fold(const uint4& v) { return v.x ^ v.y ^ v.z ^ v.w; }
__device__ __forceinline__ void sink(uint32_t acc, uint32_t* out) {
  if (acc == 0x9e3779b9u) out[threadIdx.x] = acc;  // practically never: keeps the loads alive
}

__global__ void linear(Set s, uint32_t* out) {
  const size_t n = kExpertBytes / 16, stride = size_t(gridDim.x) * blockDim.x;
  uint32_t acc = 0;
  for (int k = 0; k < s.k; ++k) {
    const uint4* p = reinterpret_cast<const uint4*>(s.m[k]);
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += 8 * stride) {
      uint4 v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = i + u * stride < n ? __ldg(p + i + u * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int u = 0; u < 8; ++u) acc ^= fold(v[u]);
    }
  }
  sink(acc, out);
}

__global__ void segments(Set s, uint32_t* out) {
  const int warps = gridDim.x * blockDim.x / 32, w = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const size_t total = s.k * kExpertBytes / 16, per = (total + warps - 1) / warps;
  uint32_t acc = 0;
  const size_t lo = w * per, hi = lo + per < total ? lo + per : total;
  for (size_t i = lo + threadIdx.x % 32; i < hi; i += 8 * 32) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const size_t j = i + 32 * u;
      const size_t k = j / (kExpertBytes / 16), o = j % (kExpertBytes / 16);
      v[u] = j < hi ? __ldg(reinterpret_cast<const uint4*>(s.m[k]) + o) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= fold(v[u]);
  }
  sink(acc, out);
}

// Row pairs (2i, 2i+1) of the call's matrices as one list; warp w takes pairs [w*P, +P).
template <bool kHint>
__global__ void row_pairs(Set s, uint32_t* out, int P) {
  const int w = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  const int pairs = s.k * kRows / 2;
  uint32_t acc = 0, r0[12], r1[12];
  auto load = [&](int q) {
    const int k = q / (kRows / 2), i = q % (kRows / 2);
    const uint8_t* p = s.m[k] + size_t(2 * i) * kRowBytes + 4 * lane;
#pragma unroll
    for (int st = 0; st < 12; ++st) {
      const bool ok = 128 * st + 4 * lane < kRowBytes;
      r0[st] = ok ? ld32<kHint>(reinterpret_cast<const uint32_t*>(p + 128 * st)) : 0u;
      r1[st] = ok ? ld32<kHint>(reinterpret_cast<const uint32_t*>(p + kRowBytes + 128 * st)) : 0u;
    }
  };
  const int q0 = w * P, q1 = min(q0 + P, pairs);
  if (q0 < q1) load(q0);
  for (int q = q0; q < q1; ++q) {
    uint32_t a = 0;
#pragma unroll
    for (int st = 0; st < 12; ++st) a ^= r0[st] ^ r1[st];
    acc ^= a;
    if (q + 1 < q1) load(q + 1);
  }
  sink(acc, out);
}

// Row pairs with the pair order of the warps interleaved: warp w takes pairs w, w + W, w + 2W, ...
// (W warps), so the warps read neighbouring pairs at the same time. kStepMajor: each matrix laid out
// step-major ([step][pair][2 rows x 128 bytes]), so the warps' loads of one step are adjacent.
template <bool kStepMajor>
__global__ void row_pairs_strided(Set s, uint32_t* out) {
  const int W = gridDim.x * blockDim.x / 32;
  const int w = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  const int per = kRows / 2, pairs = s.k * per;
  uint32_t acc = 0, r0[12], r1[12];
  auto load = [&](int q) {
    const int k = q / per, i = q % per;
#pragma unroll
    for (int st = 0; st < 12; ++st) {
      const bool ok = 128 * st + 4 * lane < kRowBytes;
      const uint8_t* a = kStepMajor ? s.m[k] + (size_t(st) * per + i) * 256 + 4 * lane
                                    : s.m[k] + size_t(2 * i) * kRowBytes + 128 * st + 4 * lane;
      const uint8_t* b = kStepMajor ? a + 128 : a + kRowBytes;
      r0[st] = ok ? ld32<true>(reinterpret_cast<const uint32_t*>(a)) : 0u;
      r1[st] = ok ? ld32<true>(reinterpret_cast<const uint32_t*>(b)) : 0u;
    }
  };
  if (w < pairs) load(w);
  for (int q = w; q < pairs; q += W) {
    uint32_t a = 0;
#pragma unroll
    for (int st = 0; st < 12; ++st) a ^= r0[st] ^ r1[st];
    acc ^= a;
    load(q + W < pairs ? q + W : q);
  }
  sink(acc, out);
}

// Tiles of 16 rows of the call's matrices as one list; warp w takes tiles [w*P, +P); a step is
// 16 rows x 128 bytes as two 64-byte halves, 3 steps in flight.
template <bool kHint>
__global__ void tiles64(Set s, uint32_t* out, int P) {
  const int w = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int tiles = s.k * kRows / 16, steps = (kRowBytes + 127) / 128;
  const int q0 = w * P, q1 = min(q0 + P, tiles);
  uint32_t acc = 0;
  for (int q = q0; q < q1; ++q) {
    const int k = q / (kRows / 16), i = q % (kRows / 16);
    const uint8_t* pa = s.m[k] + size_t(16 * i + g) * kRowBytes + 16 * t;
    const uint8_t* pb = pa + 8 * kRowBytes;
    for (int st = 0; st < steps; st += 3) {
      uint4 v[12];
#pragma unroll
      for (int u = 0; u < 3; ++u) {
        const int o = 128 * (st + u);
        const bool ok0 = st + u < steps && o + 16 * t < kRowBytes, ok1 = st + u < steps && o + 64 + 16 * t < kRowBytes;
        const uint4 z = make_uint4(0, 0, 0, 0);
        v[4 * u] = ok0 ? ld128<kHint>(reinterpret_cast<const uint4*>(pa + o)) : z;
        v[4 * u + 1] = ok0 ? ld128<kHint>(reinterpret_cast<const uint4*>(pb + o)) : z;
        v[4 * u + 2] = ok1 ? ld128<kHint>(reinterpret_cast<const uint4*>(pa + o + 64)) : z;
        v[4 * u + 3] = ok1 ? ld128<kHint>(reinterpret_cast<const uint4*>(pb + o + 64)) : z;
      }
#pragma unroll
      for (int u = 0; u < 12; ++u) acc ^= fold(v[u]);
    }
  }
  sink(acc, out);
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("bench_membw: no CUDA device\n");
    return 0;
  }
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  uint8_t* w;
  CK(cudaMalloc(&w, kE * kExpertBytes));
  CK(cudaMemset(w, 0x5a, kE * kExpertBytes));
  uint32_t* out;
  CK(cudaMalloc(&out, 4096));
  const int threads = 128, blocks = sms * 4, warps = blocks * threads / 32;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const char* names[] = {"linear", "segments", "row-pairs", "tiles64", "row-pairs L2::256B", "tiles64 L2::256B",
                         "row-pairs interleaved", "row-pairs interleaved step-major"};
  std::printf("| pattern (16 warps/SM, %d SMs) | matrices | MB/call | us/call | GB/s |\n|---|--:|--:|--:|--:|\n", sms);
  for (int K : {4, 6, 16}) {
    Set sets[kSets];
    for (int i = 0; i < kSets; ++i) {
      sets[i].k = K;
      for (int k = 0; k < K; ++k) sets[i].m[k] = w + size_t((i * K + k) * 37 % kE) * kExpertBytes;
    }
    const int pair_p = (K * kRows / 2 + warps - 1) / warps, tile_p = (K * kRows / 16 + warps - 1) / warps;
    for (int pat = 0; pat < 8; ++pat) {
      auto launch = [&](int i) {
        const Set& s = sets[i % kSets];
        if (pat == 0) linear<<<blocks, threads>>>(s, out);
        if (pat == 1) segments<<<blocks, threads>>>(s, out);
        if (pat == 2) row_pairs<false><<<blocks, threads>>>(s, out, pair_p);
        if (pat == 3) tiles64<false><<<blocks, threads>>>(s, out, tile_p);
        if (pat == 4) row_pairs<true><<<blocks, threads>>>(s, out, pair_p);
        if (pat == 5) tiles64<true><<<blocks, threads>>>(s, out, tile_p);
        if (pat == 6) row_pairs_strided<false><<<blocks, threads>>>(s, out);
        if (pat == 7) row_pairs_strided<true><<<blocks, threads>>>(s, out);
      };
      for (int i = 0; i < kSets; ++i) launch(i);
      CK(cudaDeviceSynchronize());
      const int reps = 20 * kSets;
      CK(cudaEventRecord(e0));
      for (int i = 0; i < reps; ++i) launch(i);
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      const double us = 1000.0 * ms / reps, bytes = double(K) * kExpertBytes;
      std::printf("| %s | %d | %.1f | %.1f | %.0f |\n", names[pat], K, bytes / 1e6, us, bytes / (us * 1e3));
    }
  }
  return 0;
}
