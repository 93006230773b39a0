// The CUDA tensor-parallel group (kernels/collective.h): peer access between the GPUs, each rank's
// buffers on its GPU (partial sums, local logits, barrier counters and flags), and the launchers
// of the one-shot kernels (bf16_all_reduce.cu) on the calling thread's stream.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/all_reduce.h"
#include "kernels/cuda/cuda_collective.h"
#include "kernels/cuda/launch_util.h"

namespace mx::cuda {
namespace {

Status cuda_ok(cudaError_t err, const std::string& what) {
  MX_CHECK(err == cudaSuccess, "{}: {}", what, cudaGetErrorString(err));
  return ok_status();
}

struct RankBuffers {
  void* partial[2] = {nullptr, nullptr};  // (max_tokens, width) bf16: Attention, Experts
  void* logits = nullptr;                  // (max_rows, its columns) f32
  uint32_t* counters = nullptr;            // (kTpMaxBlocks)
  uint32_t* flags = nullptr;               // (kTpMaxBlocks, kTpMaxRanks)
  int32_t* bound = nullptr;
};

struct Group {
  int size = 0;
  ops::CollectiveShape shape;
  std::vector<RankBuffers> ranks;
  ~Group() {
    int current = 0;
    cudaGetDevice(&current);
    for (size_t r = 0; r < ranks.size(); ++r) {
      cudaSetDevice(int(r));
      for (void* p : {ranks[r].partial[0], ranks[r].partial[1], ranks[r].logits, static_cast<void*>(ranks[r].counters),
                      static_cast<void*>(ranks[r].flags)})
        if (p) cudaFree(p);
    }
    cudaSetDevice(current);
  }
};

// Allocates `bytes` zeroed bytes on the current GPU.
Result<void*> zeroed(size_t bytes) {
  void* p = nullptr;
  MX_TRY(cuda_ok(cudaMalloc(&p, std::max<size_t>(bytes, 16)), fmt::format("cudaMalloc of {} bytes", bytes)));
  MX_TRY(cuda_ok(cudaMemset(p, 0, std::max<size_t>(bytes, 16)), "cudaMemset"));
  return p;
}

// The stream of this rank's context (a CUDA one: the collective's tensors are on the GPU).
cudaStream_t stream(ops::Context& cx) { return cx.cuda() ? cx.cuda()->stream() : nullptr; }

class CudaCollective final : public ops::Collective {
 public:
  CudaCollective(std::shared_ptr<Group> g, int rank) : g_(std::move(g)), rank_(rank), clean_rows_(g_->shape.max_tokens) {}
  int rank() const override { return rank_; }
  int size() const override { return g_->size; }

  Result<Tensor> partial(ops::Context& cx, ops::PartialSlot s, int64_t T) override {
    MX_CHECK(T >= 0 && T <= g_->shape.max_tokens, "collective: {} tokens, buffers hold {}", T, g_->shape.max_tokens);
    void* p = mine().partial[int(s)];
    if (s == ops::PartialSlot::Experts) {
      // Cleared by this layer's Attention all-reduce; a caller outside that order gets a memset.
      if (T > clean_rows_)
        MX_TRY(cuda_ok(cudaMemsetAsync(p, 0, size_t(T * g_->shape.width) * 2, stream(cx)), "cudaMemsetAsync"));
      clean_rows_ = 0;  // the experts write it now
    }
    return Tensor(p, DType::BF16, {T, g_->shape.width}, Device::CUDA);
  }

  Status all_reduce_add(ops::Context& cx, ops::PartialSlot s, const Tensor& x) override {
    const int64_t W = g_->shape.width;
    MX_CHECK(x.dtype == DType::BF16 && x.ndim == 2 && x.dim(1) == W && x.dim(0) <= g_->shape.max_tokens &&
                 x.device == Device::CUDA && aligned16(x.data),
             "bf16_all_reduce_add: x {} {} for width {} (16-byte aligned bf16 on the GPU)", dtype_name(x.dtype),
             x.shape_str(), W);
    kern::TpAllReduceParams p{};
    p.x = x.data;
    for (int r = 0; r < g_->size; ++r) p.partials[r] = g_->ranks[size_t(r)].partial[int(s)];
    p.n = x.numel();
    if (s == ops::PartialSlot::Attention) {
      p.clear = mine().partial[int(ops::PartialSlot::Experts)];
      p.clear_n = x.numel();
      clean_rows_ = x.dim(0);
    }
    p.barrier = barrier();
    return kernel_status("bf16_all_reduce_add", kern::run_bf16_all_reduce_add(p, stream(cx)));
  }

  Result<Tensor> local_logits(int64_t R) override {
    MX_CHECK(R >= 0 && R <= g_->shape.max_rows, "collective: {} logit rows, buffers hold {}", R, g_->shape.max_rows);
    return Tensor(mine().logits, DType::F32, {R, g_->shape.cols(rank_)}, Device::CUDA);
  }

  Status gather_logits(ops::Context& cx, const Tensor& full, int64_t R) override {
    const int64_t V = g_->shape.vocab_starts.back();
    MX_CHECK(rank_ != 0 || (full.dtype == DType::F32 && full.ndim == 2 && full.dim(0) == R && full.dim(1) == V),
             "f32_gather_logits: rank 0 needs ({}, {}) f32 logits, got {}", R, V, full.shape_str());
    MX_CHECK(R <= g_->shape.max_rows, "f32_gather_logits: {} rows, buffers hold {}", R, g_->shape.max_rows);
    kern::TpGatherParams p{};
    p.full = rank_ == 0 ? full.ptr<float>() : nullptr;
    for (int r = 0; r < g_->size; ++r) p.locals[r] = g_->ranks[size_t(r)].logits;
    for (int r = 0; r <= g_->size; ++r) p.starts[r] = g_->shape.vocab_starts[size_t(r)];
    p.R = R;
    p.barrier = barrier();
    return kernel_status("f32_gather_logits", kern::run_f32_gather_logits(p, stream(cx)));
  }

  Status bind_broadcast(const Tensor& buf) override {
    MX_CHECK(buf.dtype == DType::I32 && buf.device == Device::CUDA, "bind_broadcast: i32 buffer on the GPU expected");
    mine().bound = buf.ptr<int32_t>();
    return ok_status();
  }

  Status broadcast(ops::Context& cx, int64_t n) override {
    MX_CHECK(mine().bound && g_->ranks[0].bound, "i32_broadcast: rank {} or rank 0 has no bound buffer", rank_);
    kern::TpBroadcastParams p{.dst = mine().bound, .src = g_->ranks[0].bound, .n = n, .barrier = barrier()};
    return kernel_status("i32_broadcast", kern::run_i32_broadcast(p, stream(cx)));
  }

 private:
  RankBuffers& mine() { return g_->ranks[size_t(rank_)]; }
  kern::TpBarrier barrier() {
    kern::TpBarrier b{};
    b.counters = mine().counters;
    for (int r = 0; r < g_->size; ++r) b.flags[r] = g_->ranks[size_t(r)].flags;
    b.rank = rank_;
    b.ranks = g_->size;
    return b;
  }

  std::shared_ptr<Group> g_;
  int rank_;
  int64_t clean_rows_;  // leading rows of the Experts buffer known to be zero
};

}  // namespace

Status use_gpu(int index) {
  return cuda_ok(cudaSetDevice(index), fmt::format("selecting GPU {}", index));
}

Result<std::vector<std::shared_ptr<ops::Collective>>> make_collectives(int size, const ops::CollectiveShape& s) {
  MX_CHECK(size <= kern::kTpMaxRanks, "tensor parallelism: at most {} GPUs", kern::kTpMaxRanks);
  const int have = device_count();
  MX_CHECK(have >= size, "tensor parallelism over {} GPUs, but {} visible (CUDA_VISIBLE_DEVICES selects them)", size,
           have);
  int current = 0;
  cudaGetDevice(&current);
  auto g = std::make_shared<Group>();
  g->size = size;
  g->shape = s;
  g->ranks.resize(size_t(size));
  Status st = ok_status();
  for (int r = 0; r < size && st.ok(); ++r) {
    st = [&]() -> Status {
      MX_TRY(use_gpu(r));
      for (int q = 0; q < size; ++q) {
        if (q == r) continue;
        int ok = 0;
        MX_TRY(cuda_ok(cudaDeviceCanAccessPeer(&ok, r, q), "cudaDeviceCanAccessPeer"));
        MX_CHECK(ok, "GPUs {} and {} cannot access each other's memory (no NVLink or PCIe peer access): tensor "
                 "parallelism needs it", r, q);
        const cudaError_t e = cudaDeviceEnablePeerAccess(q, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
        else MX_TRY(cuda_ok(e, fmt::format("enabling peer access from GPU {} to GPU {}", r, q)));
      }
      RankBuffers& b = g->ranks[size_t(r)];
      for (auto& p : b.partial) {
        MX_ASSIGN(p, zeroed(size_t(s.max_tokens * s.width) * 2));
      }
      MX_ASSIGN(b.logits, zeroed(size_t(s.max_rows * s.max_cols()) * 4));
      void* c;
      MX_ASSIGN(c, zeroed(size_t(kern::kTpMaxBlocks) * 4));
      b.counters = static_cast<uint32_t*>(c);
      MX_ASSIGN(c, zeroed(size_t(kern::kTpMaxBlocks) * kern::kTpMaxRanks * 4));
      b.flags = static_cast<uint32_t*>(c);
      return ok_status();
    }();
  }
  cudaSetDevice(current);
  MX_TRY(st);
  std::vector<std::shared_ptr<ops::Collective>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_shared<CudaCollective>(g, r));
  return out;
}

}  // namespace mx::cuda
