// ops::Buffer and ops::copy: host allocations here, device ones through kernels/cuda.
#include <cstdlib>
#include <cstring>
#include <utility>

#include <unistd.h>

#include "kernels/ops.h"
#ifdef MXSERVE_HAVE_CUDA
#include "kernels/cuda/backend.h"
#include "kernels/cuda/cuda_ops.h"
#endif

namespace mx::ops {

Result<Buffer> Buffer::allocate(Device device, size_t bytes) {
  Buffer b;
  b.size_ = bytes;
  b.device_ = device;
  if (device == Device::CPU) {
    b.data_ = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    MX_CHECK(b.data_ != nullptr, "out of host memory allocating {} bytes", bytes);
    return b;
  }
#ifdef MXSERVE_HAVE_CUDA
  MX_ASSIGN(b.data_, cuda::device_malloc(bytes));
  return b;
#else
  return MX_ERROR("cannot allocate on a CUDA device: mxserve was built without CUDA");
#endif
}

Result<Buffer> Buffer::allocate_pinned(size_t bytes) {
#ifdef MXSERVE_HAVE_CUDA
  if (cuda_available()) {
    Buffer b;
    b.size_ = bytes;
    b.pinned_ = true;
    MX_ASSIGN(b.data_, cuda::host_malloc_pinned(bytes));
    return b;
  }
#endif
  return allocate(Device::CPU, bytes);
}

Buffer::Buffer(Buffer&& o) noexcept { *this = std::move(o); }

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  std::swap(data_, o.data_);
  std::swap(size_, o.size_);
  std::swap(device_, o.device_);
  std::swap(pinned_, o.pinned_);
  return *this;
}

Buffer::~Buffer() {
  if (!data_) return;
#ifdef MXSERVE_HAVE_CUDA
  if (pinned_) {
    cuda::host_free_pinned(data_);
    return;
  }
  if (device_ == Device::CUDA) {
    cuda::device_free(data_);
    return;
  }
#endif
  std::free(data_);
}

Tensor Buffer::view(DType dtype, std::initializer_list<int64_t> shape) const {
  Tensor t(data_, dtype, shape, device_);
  return t;
}

Status copy(const Tensor& dst, const Tensor& src) {
  MX_CHECK(dst.nbytes() == src.nbytes(), "copy: {} bytes into {} bytes", src.nbytes(), dst.nbytes());
  if (src.nbytes() == 0) return ok_status();  // empty tensors may hold null pointers (memcpy's UB)
  if (dst.device == Device::CPU && src.device == Device::CPU) {
    std::memcpy(dst.data, src.data, src.nbytes());
    return ok_status();
  }
#ifdef MXSERVE_HAVE_CUDA
  return cuda::memcpy_any(dst.data, src.data, src.nbytes());
#else
  return MX_ERROR("copy: CUDA tensors in a build without CUDA");
#endif
}

Status copy_2d(void* dst, size_t dpitch, Device dst_device, const void* src, size_t spitch, Device src_device,
               size_t width, size_t height) {
  MX_CHECK(width <= dpitch && width <= spitch, "copy_2d: rows of {} bytes with pitches {} and {}", width, dpitch, spitch);
  if (width == 0 || height == 0) return ok_status();
  if (dst_device == Device::CPU && src_device == Device::CPU) {
    for (size_t r = 0; r < height; ++r)
      std::memcpy(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
    return ok_status();
  }
#ifdef MXSERVE_HAVE_CUDA
  if (height == 1) return cuda::memcpy_any(dst, src, width);
  return cuda::memcpy_2d(dst, dpitch, src, spitch, width, height);
#else
  return MX_ERROR("copy_2d: CUDA memory in a build without CUDA");
#endif
}

Status copy_async(Context& cx, const Tensor& dst, const Tensor& src) {
  MX_CHECK(dst.nbytes() == src.nbytes(), "copy_async: {} bytes into {} bytes", src.nbytes(), dst.nbytes());
  if (src.nbytes() == 0) return ok_status();
  if (dst.device == Device::CPU && src.device == Device::CPU) {
    std::memcpy(dst.data, src.data, src.nbytes());
    return ok_status();
  }
#ifdef MXSERVE_HAVE_CUDA
  MX_ASSIGN(cuda::Backend* const b, cx.cuda_for("copy_async"));
  return cuda::memcpy_async(*b, dst.data, src.data, src.nbytes());
#else
  return MX_ERROR("copy_async: CUDA tensors in a build without CUDA");
#endif
}

Status copy_columns_async(Context& cx, const Tensor& dst, int64_t col0, const Tensor& src) {
  MX_CHECK(dst.ndim == 2 && src.ndim == 2 && dst.dtype == src.dtype && dst.device == src.device &&
               dst.dim(0) == src.dim(0) && col0 >= 0 && col0 + src.dim(1) <= dst.dim(1),
           "copy_columns_async: {} into columns {}.. of {}", src.shape_str(), col0, dst.shape_str());
  const size_t es = dtype_size(dst.dtype), width = size_t(src.dim(1)) * es, rows = size_t(src.dim(0));
  char* d = static_cast<char*>(dst.data) + size_t(col0) * es;
  const size_t dpitch = size_t(dst.dim(1)) * es;
  if (width == 0 || rows == 0) return ok_status();
  if (dst.device == Device::CPU) {
    for (size_t r = 0; r < rows; ++r) std::memcpy(d + r * dpitch, static_cast<const char*>(src.data) + r * width, width);
    return ok_status();
  }
#ifdef MXSERVE_HAVE_CUDA
  MX_ASSIGN(cuda::Backend* const b, cx.cuda_for("copy_columns_async"));
  return cuda::memcpy_2d_async(*b, d, dpitch, src.data, width, width, rows);
#else
  return MX_ERROR("copy_columns_async: CUDA tensors in a build without CUDA");
#endif
}

Result<Event> Event::create(Device device) {
  Event e;
  e.device_ = device;
  if (device == Device::CPU) return e;
#ifdef MXSERVE_HAVE_CUDA
  MX_ASSIGN(e.event_, cuda::event_create());
  return e;
#else
  return MX_ERROR("Event: built without CUDA");
#endif
}

Status Event::record([[maybe_unused]] Context& cx) {
#ifdef MXSERVE_HAVE_CUDA
  if (event_) {
    MX_ASSIGN(cuda::Backend* const b, cx.cuda_for("Event::record"));
    return cuda::event_record_on_stream(*b, event_);
  }
#endif
  return ok_status();
}

Status Event::wait() {
#ifdef MXSERVE_HAVE_CUDA
  if (event_) return cuda::event_synchronize(event_);
#endif
  return ok_status();
}

Event::Event(Event&& o) noexcept { *this = std::move(o); }
Event& Event::operator=(Event&& o) noexcept {
  std::swap(device_, o.device_);
  std::swap(event_, o.event_);
  return *this;
}
Event::~Event() {
#ifdef MXSERVE_HAVE_CUDA
  if (event_) cuda::event_destroy(event_);
#endif
}

Status synchronize([[maybe_unused]] Context& cx) {
#ifdef MXSERVE_HAVE_CUDA
  if (cx.cuda()) return cuda::synchronize(*cx.cuda());
#endif
  return ok_status();
}

Result<MemoryInfo> memory_info(Device device) {
  MemoryInfo m;
  if (device == Device::CPU) {
    const long pages = sysconf(_SC_AVPHYS_PAGES), total = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    m.free_bytes = size_t(pages) * size_t(page);
    m.total_bytes = size_t(total) * size_t(page);
    return m;
  }
#ifdef MXSERVE_HAVE_CUDA
  MX_TRY(cuda::mem_info(&m.free_bytes, &m.total_bytes));
  return m;
#else
  return MX_ERROR("memory_info: built without CUDA");
#endif
}

int compute_capability(Device device) {
#ifdef MXSERVE_HAVE_CUDA
  if (device == Device::CUDA) return cuda::device_compute_capability();
#endif
  (void)device;
  return 0;
}

Result<StepGraph> StepGraph::capture(Context& cx, std::function<Status()> step) {
  StepGraph g;
  g.cx_ = &cx;
  if (cx.device() == Device::CPU) {
    g.step_ = std::move(step);
    return g;
  }
#ifdef MXSERVE_HAVE_CUDA
  MX_ASSIGN(cuda::Backend* const b, cx.cuda_for("StepGraph"));
  MX_ASSIGN(g.graph_exec_, cuda::graph_capture(*b, step));
  return g;
#else
  return MX_ERROR("StepGraph: built without CUDA");
#endif
}

Status StepGraph::replay() {
  MX_CHECK(cx_ != nullptr, "StepGraph: replay of an empty graph");
  if (!graph_exec_) return step_();
#ifdef MXSERVE_HAVE_CUDA
  return cuda::graph_replay(*cx_->cuda(), graph_exec_);
#else
  return MX_ERROR("StepGraph: built without CUDA");
#endif
}

StepGraph::StepGraph(StepGraph&& o) noexcept { *this = std::move(o); }

StepGraph& StepGraph::operator=(StepGraph&& o) noexcept {
  std::swap(cx_, o.cx_);
  std::swap(step_, o.step_);
  std::swap(graph_exec_, o.graph_exec_);
  return *this;
}

StepGraph::~StepGraph() {
#ifdef MXSERVE_HAVE_CUDA
  if (graph_exec_) cuda::graph_destroy(graph_exec_);
#endif
}

bool cuda_available() {
#ifdef MXSERVE_HAVE_CUDA
  return cuda::device_count() > 0;
#else
  return false;
#endif
}

}  // namespace mx::ops
