// The CPU backend's tensor-parallel group: every rank is a thread of this process, the buffers are
// host memory, and a collective is a barrier, the work, and a second barrier (after which no rank
// reads another's buffers, so each may write its own again). The reference the CUDA group is
// tested against, and CI's stand-in for several GPUs.
#include <barrier>
#include <cstring>

#include "kernels/cpu/cpu_collective.h"
#include "kernels/ops.h"

namespace mx::cpu {
namespace {

struct Group {
  Group(int n, const ops::CollectiveShape& s) : size(n), shape(s), meet(n), bound(size_t(n), nullptr) {}
  int size;
  ops::CollectiveShape shape;
  std::barrier<> meet;
  std::vector<ops::Buffer> partial[2], logits;  // per rank
  std::vector<int32_t*> bound;
};

class CpuCollective final : public ops::Collective {
 public:
  CpuCollective(std::shared_ptr<Group> g, int rank) : g_(std::move(g)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_->size; }

  Result<Tensor> partial(ops::Context&, ops::PartialSlot s, int64_t T) override {
    MX_CHECK(T >= 0 && T <= g_->shape.max_tokens, "collective: {} tokens, buffers hold {}", T, g_->shape.max_tokens);
    const ops::Buffer& b = g_->partial[int(s)][size_t(rank_)];
    // No rank reads this buffer between collectives, so the experts' slot is cleared here.
    if (s == ops::PartialSlot::Experts) std::memset(b.data(), 0, size_t(T * g_->shape.width) * sizeof(float));
    return b.view(DType::F32, {T, g_->shape.width});
  }

  Status all_reduce_add(ops::Context&, ops::PartialSlot s, const Tensor& x) override {
    MX_CHECK(x.dtype == DType::F32 && x.ndim == 2 && x.dim(1) == g_->shape.width && x.dim(0) <= g_->shape.max_tokens,
             "all_reduce_add: x {} {} for width {}", dtype_name(x.dtype), x.shape_str(), g_->shape.width);
    g_->meet.arrive_and_wait();
    float* out = x.ptr<float>();
    const int64_t n = x.numel();
    for (int r = 0; r < g_->size; ++r) {
      const float* p = static_cast<const float*>(g_->partial[int(s)][size_t(r)].data());
      for (int64_t i = 0; i < n; ++i) out[i] += p[i];
    }
    g_->meet.arrive_and_wait();
    return ok_status();
  }

  Result<Tensor> local_logits(int64_t R) override {
    MX_CHECK(R >= 0 && R <= g_->shape.max_rows, "collective: {} logit rows, buffers hold {}", R, g_->shape.max_rows);
    return g_->logits[size_t(rank_)].view(DType::F32, {R, g_->shape.cols(rank_)});
  }

  Status gather_logits(ops::Context&, const Tensor& full, int64_t R) override {
    const int64_t V = g_->shape.vocab_starts.back();
    MX_CHECK(rank_ != 0 || (full.dtype == DType::F32 && full.ndim == 2 && full.dim(0) == R && full.dim(1) == V),
             "gather_logits: rank 0 needs ({}, {}) f32 logits, got {}", R, V, full.shape_str());
    g_->meet.arrive_and_wait();
    if (rank_ == 0) {
      for (int r = 0; r < g_->size; ++r) {
        const float* src = static_cast<const float*>(g_->logits[size_t(r)].data());
        const int64_t c = g_->shape.cols(r), at = g_->shape.vocab_starts[size_t(r)];
        for (int64_t i = 0; i < R; ++i) std::memcpy(full.ptr<float>() + i * V + at, src + i * c, size_t(c) * 4);
      }
    }
    g_->meet.arrive_and_wait();
    return ok_status();
  }

  Status bind_broadcast(const Tensor& buf) override {
    MX_CHECK(buf.dtype == DType::I32, "bind_broadcast: i32 buffer expected");
    g_->bound[size_t(rank_)] = buf.ptr<int32_t>();
    return ok_status();
  }

  Status broadcast(ops::Context&, int64_t n) override {
    g_->meet.arrive_and_wait();
    if (rank_ != 0) std::memcpy(g_->bound[size_t(rank_)], g_->bound[0], size_t(n) * 4);
    g_->meet.arrive_and_wait();
    return ok_status();
  }

 private:
  std::shared_ptr<Group> g_;
  int rank_;
};

}  // namespace

Result<std::vector<std::shared_ptr<ops::Collective>>> make_collectives(int size, const ops::CollectiveShape& s) {
  auto g = std::make_shared<Group>(size, s);
  for (int r = 0; r < size; ++r) {
    for (auto& slot : g->partial) {
      MX_ASSIGN(ops::Buffer b, ops::Buffer::allocate(Device::CPU, size_t(s.max_tokens * s.width) * 4));
      std::memset(b.data(), 0, b.size());
      slot.push_back(std::move(b));
    }
    MX_ASSIGN(ops::Buffer l, ops::Buffer::allocate(Device::CPU, size_t(s.max_rows * s.max_cols()) * 4));
    g->logits.push_back(std::move(l));
  }
  std::vector<std::shared_ptr<ops::Collective>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_shared<CpuCollective>(g, r));
  return out;
}

}  // namespace mx::cpu
