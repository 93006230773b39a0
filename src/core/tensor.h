// Tensor: a non-owning view (pointer, dtype, device, up to 4 dims, row-major contiguous),
// and HostBuffer: an owning, 64-byte-aligned host allocation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "core/dtype.h"

namespace mx {

enum class Device : uint8_t { CPU, CUDA };

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  Device device = Device::CPU;
  int ndim = 0;
  std::array<int64_t, 4> shape{};

  Tensor() = default;
  Tensor(void* d, DType t, std::initializer_list<int64_t> dims, Device dev = Device::CPU)
      : data(d), dtype(t), device(dev) {
    for (int64_t s : dims) shape[ndim++] = s;
  }

  bool empty() const { return data == nullptr; }
  int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype); }
  template <typename T>
  T* ptr() const { return static_cast<T*>(data); }
  std::string shape_str() const;  // "[5760, 90, 16]"
  // Rows [row0, row0 + rows) of the leading dimension, as a view.
  Tensor rows(int64_t row0, int64_t rows) const;
};

class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(size_t bytes);
  void* data() const { return ptr_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> ptr_;
  size_t size_ = 0;
};

}  // namespace mx
