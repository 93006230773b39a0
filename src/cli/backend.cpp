// --backend resolution.
#include "cli/backend.h"

#include "cli/commands.h"
#include "kernels/ops.h"

namespace mx::cli {

Device select_device(const std::string& backend) {
  if (backend == "cpu") return Device::CPU;
  if (backend == "cuda") {
    if (!ops::cuda_available())
      exit_on_error(Status::error("--backend cuda: no CUDA device is available (or mxserve was built without CUDA)"));
    return Device::CUDA;
  }
  return ops::cuda_available() ? Device::CUDA : Device::CPU;
}

}  // namespace mx::cli
