// make_collectives and use_gpu: the CPU group (kernels/cpu) or the CUDA one (kernels/cuda).
#include "kernels/collective.h"

#include "kernels/cpu/cpu_collective.h"
#include "kernels/ops.h"
#ifdef MXSERVE_HAVE_CUDA
#include "kernels/cuda/cuda_collective.h"
#include "kernels/cuda/cuda_ops.h"
#endif

namespace mx::ops {

Result<std::vector<std::shared_ptr<Collective>>> make_collectives(Device device, int size, const CollectiveShape& shape) {
  MX_CHECK(size >= 1 && size <= 8, "tensor parallelism: {} ranks (1 to 8 supported)", size);
  MX_CHECK(int(shape.vocab_starts.size()) == size + 1 && shape.width > 0 && shape.max_tokens > 0 && shape.max_rows > 0,
           "tensor parallelism: bad collective shape");
  if (device == Device::CPU) return cpu::make_collectives(size, shape);
#ifdef MXSERVE_HAVE_CUDA
  return cuda::make_collectives(size, shape);
#else
  return MX_ERROR("tensor parallelism on CUDA: mxserve was built without CUDA");
#endif
}

std::string describe_collectives(Device device, int size) {
  if (size <= 1) return "none (one rank)";
  if (device == Device::CPU)
    return fmt::format("{} threads of this process meeting at a barrier (the CPU stand-in)", size);
  return fmt::format("{} GPUs, one thread each; one-shot all-reduce, logits gather and id broadcast as kernels "
                     "over peer memory, synchronised by flags on the GPUs",
                     size);
}

Status use_gpu(Device device, int index) {
  if (device != Device::CUDA) return ok_status();
#ifdef MXSERVE_HAVE_CUDA
  return cuda::use_gpu(index);
#else
  (void)index;
  return MX_ERROR("selecting GPU {}: mxserve was built without CUDA", index);
#endif
}

int gpu_count() {
#ifdef MXSERVE_HAVE_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

}  // namespace mx::ops
