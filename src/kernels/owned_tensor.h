// A tensor that owns its memory through a list of buffers: workspaces, caches and weights made on a
// device (the allocation every one of them spelled out: a probe for the size, a Buffer, a view).
#pragma once

#include <initializer_list>
#include <vector>

#include "kernels/ops.h"

namespace mx::ops {

// A new tensor of `shape` on `device`; its Buffer is appended to `storage`.
inline Result<Tensor> allocate_tensor(std::vector<Buffer>& storage, Device device, DType dtype,
                                      std::initializer_list<int64_t> shape) {
  const Tensor probe(nullptr, dtype, shape, device);
  MX_ASSIGN(Buffer b, Buffer::allocate(device, probe.nbytes()));
  Tensor t = b.view(dtype, shape);
  storage.push_back(std::move(b));
  return t;
}

// A copy of `host` (any tensor the copy op can read) on `device`; its Buffer is appended to `storage`.
inline Result<Tensor> upload_tensor(std::vector<Buffer>& storage, Device device, const Tensor& host) {
  MX_ASSIGN(Buffer b, Buffer::allocate(device, host.nbytes()));
  Tensor t = host;
  t.data = b.data();
  t.device = device;
  MX_TRY(copy(t, host));
  storage.push_back(std::move(b));
  return t;
}

}  // namespace mx::ops
