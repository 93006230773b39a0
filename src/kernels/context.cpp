// ops::Context (context.h): the per-engine state of the ops, the profile table and the route
// recorder. The CUDA half lives in kernels/cuda/backend.cpp.
#include "kernels/context.h"

#include <map>

#include "kernels/ops.h"

#ifdef MXSERVE_HAVE_CUDA
#include "kernels/cuda/backend.h"
#include "kernels/cuda/cuda_ops.h"
#endif

namespace mx::ops {

void Context::BackendDeleter::operator()([[maybe_unused]] cuda::Backend* b) const {
#ifdef MXSERVE_HAVE_CUDA
  delete b;
#endif
}

Context::Context() = default;
Context::~Context() = default;

Result<std::unique_ptr<Context>> Context::create(Device device, const ContextOptions& o) {
  auto cx = std::make_unique<Context>();
  cx->device_ = device;
  cx->set_moe_activation(o.moe_activation);
  if (device == Device::CUDA) {
#ifdef MXSERVE_HAVE_CUDA
    MX_ASSIGN(std::unique_ptr<cuda::Backend> b, cuda::Backend::create());
    cx->cuda_.reset(b.release());
#else
    return MX_ERROR("a CUDA context in a build without CUDA");
#endif
  }
  MX_TRY(cx->reserve_scratch(o.scratch_bytes));
  return cx;
}

Result<cuda::Backend*> Context::cuda_for(const char* what) const {
  MX_CHECK(cuda_ != nullptr, "{}: the tensors are on a CUDA device but the context is the CPU's", what);
  return cuda_.get();
}

Result<std::unique_ptr<Context>> Context::create_on_best_device(const ContextOptions& o) {
  return create(cuda_available() ? Device::CUDA : Device::CPU, o);
}

Status Context::reserve_scratch([[maybe_unused]] size_t bytes) {
#ifdef MXSERVE_HAVE_CUDA
  if (cuda_) return cuda_->reserve(bytes);
#endif
  return ok_status();
}

size_t Context::scratch_reserved() const {
#ifdef MXSERVE_HAVE_CUDA
  if (cuda_) return cuda_->reserved();
#endif
  return 0;
}

size_t Context::scratch_bytes_for([[maybe_unused]] const CallShapes& s) const {
#ifdef MXSERVE_HAVE_CUDA
  if (cuda_) {
    CallShapes t = s;
    t.fp8_moe = t.fp8_moe || moe_activation_ == MoeActivation::FP8;
    return cuda::scratch_bytes_for(*cuda_, t);
  }
#endif
  return 0;
}

std::vector<OpProfile> Context::take_profile() {
#ifdef MXSERVE_HAVE_CUDA
  if (cuda_) (void)cuda::synchronize(*cuda_);
#endif
  std::map<std::string, OpProfile> by_name;
  std::vector<std::string> order;
  for (auto& t : timings_) {
    double us = t.host_us;
#ifdef MXSERVE_HAVE_CUDA
    if (t.start) us = cuda::event_elapsed_us(t.start, t.stop);
#endif
    auto [it, fresh] = by_name.try_emplace(t.name, OpProfile{t.name, 0, 0, 0});
    if (fresh) order.push_back(t.name);
    it->second.calls += 1;
    it->second.microseconds += us;
    it->second.bytes += t.bytes;
  }
  timings_.clear();
  std::vector<OpProfile> out;
  for (const auto& n : order) out.push_back(by_name[n]);
  return out;
}

RouteRecorder::RouteRecorder(Context& cx) : cx_(cx), outer_(cx.routes) { cx.routes = &routes_; }

RouteRecorder::~RouteRecorder() {
  cx_.routes = outer_;
  if (outer_) outer_->insert(outer_->end(), routes_.begin(), routes_.end());
}

}  // namespace mx::ops
