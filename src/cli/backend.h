// Shared CLI helpers: the --backend flag (auto|cpu|cuda) and the device it selects.
#pragma once

#include <string>

#include "core/tensor.h"

namespace mx::cli {

// "auto" picks CUDA when a device is present, else the CPU reference.
Device select_device(const std::string& backend);

}  // namespace mx::cli
