// The CUDA tensor-parallel group (kernels/collective.h): rank r on GPU r, buffers in device memory
// that every rank reads over peer access, collectives as one-shot kernels (bf16_all_reduce.cu).
// Host-side declarations only.
#pragma once

#include <memory>
#include <vector>

#include "kernels/collective.h"

namespace mx::cuda {

Result<std::vector<std::shared_ptr<ops::Collective>>> make_collectives(int size, const ops::CollectiveShape& shape);
Status use_gpu(int index);

}  // namespace mx::cuda
