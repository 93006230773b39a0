// Writes a float32 NumPy .npy file (version 1.0, little-endian, C order).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "core/status.h"

namespace mx {

Status write_npy_f32(const std::filesystem::path& path, std::span<const float> data, const std::vector<int64_t>& shape);

}  // namespace mx
