// Tensor view helpers and the aligned host allocation.
#include "core/tensor.h"

#include <cstdlib>
#include <new>

#include <fmt/format.h>

namespace mx {

std::string Tensor::shape_str() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + "]";
}

Tensor Tensor::rows(int64_t row0, int64_t n) const {
  Tensor t = *this;
  const size_t row_bytes = nbytes() / size_t(shape[0]);
  t.data = static_cast<char*>(data) + size_t(row0) * row_bytes;
  t.shape[0] = n;
  return t;
}

HostBuffer::HostBuffer(size_t bytes) : size_(bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!p) throw std::bad_alloc();
  ptr_.reset(p);
}

void HostBuffer::Free::operator()(void* p) const { std::free(p); }

}  // namespace mx
