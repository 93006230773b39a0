// Writes safetensors files (used by the demo/synthetic model makers and by the loader tests).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace mx {

struct TensorBlob {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // numel · dtype_size bytes
};

// Writes the tensors in the given order, 8-byte aligned header, empty metadata.
Status write_safetensors(const std::filesystem::path& path, const std::vector<TensorBlob>& tensors);

}  // namespace mx
