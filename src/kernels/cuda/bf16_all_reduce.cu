// bf16_all_reduce: the tensor-parallel collectives as one-shot kernels over peer memory
// (kernels/collective.h, cuda/collective.cpp). Every rank runs the same kernel with the same grid;
// block b of each rank first meets block b of every other rank at a flag barrier:
//   - each rank keeps, in its own memory, a counter per block (bumped by that block only) and a
//     flag per (block, source rank) that the source writes remotely with st.release.sys;
//   - block b bumps its counter to epoch e, writes e into flag (b, me) of every rank, and waits
//     until its own flags (b, r) reach e for every r.
// The ranks run identical sequences of collectives, so the counters agree. Passing the barrier of
// block b means every rank has started this kernel, hence finished everything before it in its
// stream: the partial sums are complete and the previous collective's reads of them are over, so
// one barrier per collective suffices (docs/lab/RUNS_21-30.md, run 25). Epochs compare by signed
// difference, which survives the 32-bit wrap. The kernels are launched with PDL, so that they are
// resident when the kernel ahead of them ends, but wait for it (griddepcontrol.wait: done and its
// writes visible) before they signal; the kernel after them may launch early and waits likewise.
#include "kernels/cuda/all_reduce.h"
#include "kernels/cuda/cuda_common.cuh"

namespace mx::cuda::kern {
namespace {

__device__ __forceinline__ void st_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// A 16-byte load that bypasses L1 (another GPU wrote the line since this block last read it).
__device__ __forceinline__ uint4 ld_peer_v4(const void* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ float ld_peer_f32(const float* p) {
  float v;
  asm volatile("ld.volatile.global.f32 %0, [%1];\n" : "=f"(v) : "l"(p));
  return v;
}

// Block blockIdx.x's barrier with the same block of every rank (wait = false: signal only).
__device__ __forceinline__ void block_barrier(const TpBarrier& b, bool wait) {
  dev::pdl_wait();  // everything before this collective in the stream is done
  dev::pdl_launch_dependents();
  __shared__ uint32_t epoch;
  if (threadIdx.x == 0) {
    epoch = b.counters[blockIdx.x] + 1;
    b.counters[blockIdx.x] = epoch;
  }
  __syncthreads();
  const uint32_t e = epoch;
  if (int(threadIdx.x) < b.ranks) {
    __threadfence_system();
    st_release_sys(b.flags[threadIdx.x] + blockIdx.x * kTpMaxRanks + b.rank, e);
    if (wait) {
      const uint32_t* mine = b.flags[b.rank] + blockIdx.x * kTpMaxRanks + threadIdx.x;
      while (int32_t(ld_acquire_sys(mine) - e) < 0) {
      }
    }
  }
  __syncthreads();
}

constexpr int kThreads = 512;

// x += Σ_r partial_r (rank order), 8 BF16 per thread and step; then this rank's `clear` rows zeroed.
__global__ void __launch_bounds__(kThreads) bf16_all_reduce_add(TpAllReduceParams p) {
  block_barrier(p.barrier, true);
  const int64_t nv = p.n / 8;
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  uint4* x = static_cast<uint4*>(p.x);
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < nv; i += stride) {
    float acc[8], f[8];
    dev::unpack_bf16x8(x[i], acc);
    for (int r = 0; r < p.barrier.ranks; ++r) {
      dev::unpack_bf16x8(ld_peer_v4(static_cast<const uint4*>(p.partials[r]) + i), f);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] += f[j];
    }
    x[i] = dev::pack_bf16x8(acc);
  }
  if (blockIdx.x == 0) {  // a tail of n % 8 elements
    for (int64_t i = nv * 8 + threadIdx.x; i < p.n; i += kThreads) {
      __nv_bfloat16* xs = static_cast<__nv_bfloat16*>(p.x);
      float acc = __bfloat162float(xs[i]);
      for (int r = 0; r < p.barrier.ranks; ++r) {
        const uint16_t bits = *static_cast<const volatile uint16_t*>(static_cast<const uint16_t*>(p.partials[r]) + i);
        acc += __uint_as_float(uint32_t(bits) << 16);
      }
      xs[i] = __float2bfloat16(acc);
    }
  }
  // Every rank has passed this barrier's block, so it finished the previous collective that read
  // this rank's `clear` buffer: it may be zeroed now.
  if (p.clear) {
    uint4* z = static_cast<uint4*>(p.clear);
    for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < p.clear_n / 8; i += stride) z[i] = make_uint4(0, 0, 0, 0);
    if (blockIdx.x == 0)
      for (int64_t i = p.clear_n / 8 * 8 + threadIdx.x; i < p.clear_n; i += kThreads)
        static_cast<uint16_t*>(p.clear)[i] = 0;
  }
}

// Rank 0: full[i][starts[r] + j] = local_r[i][j]; other ranks signal only.
__global__ void __launch_bounds__(kThreads) f32_gather_logits(TpGatherParams p) {
  const bool root = p.barrier.rank == 0;
  block_barrier(p.barrier, root);
  if (!root) return;
  const int64_t V = p.starts[p.barrier.ranks];
  const int64_t total = p.R * V, stride = int64_t(gridDim.x) * kThreads;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += stride) {
    const int64_t row = i / V, col = i % V;
    int r = 0;
    while (col >= p.starts[r + 1]) ++r;
    const int64_t cols = p.starts[r + 1] - p.starts[r];
    p.full[i] = ld_peer_f32(static_cast<const float*>(p.locals[r]) + row * cols + (col - p.starts[r]));
  }
}

// Every rank but 0: dst[0..n) = rank 0's bound buffer; rank 0 signals only.
__global__ void __launch_bounds__(kThreads) i32_broadcast(TpBroadcastParams p) {
  const bool root = p.barrier.rank == 0;
  block_barrier(p.barrier, !root);
  if (root) return;
  const volatile int32_t* src = p.src;
  for (int64_t i = threadIdx.x; i < p.n; i += kThreads) p.dst[i] = src[i];
}

int grid_for(int64_t work) { return int(std::min<int64_t>(kTpMaxBlocks, std::max<int64_t>(1, (work + kThreads - 1) / kThreads))); }

}  // namespace

cudaError_t run_bf16_all_reduce_add(const TpAllReduceParams& p, cudaStream_t s) {
  return launch_pdl(bf16_all_reduce_add, dim3(grid_for(p.n / 8)), dim3(kThreads), 0, s, p);
}

cudaError_t run_f32_gather_logits(const TpGatherParams& p, cudaStream_t s) {
  return launch_pdl(f32_gather_logits, dim3(grid_for(p.R * p.starts[p.barrier.ranks] / 4)), dim3(kThreads), 0, s, p);
}

cudaError_t run_i32_broadcast(const TpBroadcastParams& p, cudaStream_t s) {
  return launch_pdl(i32_broadcast, dim3(1), dim3(kThreads), 0, s, p);
}

}  // namespace mx::cuda::kern
