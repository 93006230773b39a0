// The ops' context of a test binary (kernels/context.h): a CUDA one where a GPU is present, else the
// CPU reference's. A CUDA context runs ops on host tensors too, so one serves a test that compares
// a kernel with the reference. Made on first use; its scratch is reserved once, generously.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "kernels/ops.h"

namespace mx::test {

inline constexpr size_t kTestScratchBytes = size_t(512) << 20;

inline ops::Context& test_context() {
  static const std::unique_ptr<ops::Context> cx = [] {
    if (!ops::cuda_available()) return std::make_unique<ops::Context>();
    auto made = ops::Context::create(Device::CUDA, {.scratch_bytes = kTestScratchBytes});
    if (!made.ok()) {
      ADD_FAILURE() << "CUDA test context: " << made.status().message();
      return std::make_unique<ops::Context>();
    }
    return std::move(*made);
  }();
  return *cx;
}
inline ops::Context& ctx() { return test_context(); }

}  // namespace mx::test
