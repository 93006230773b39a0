// The ops' context of a test binary (kernels/context.h): a CUDA one where a GPU is present, else
// the CPU reference's. A CUDA context runs ops on host tensors too, so one serves a test that
// compares a kernel with the reference. Made on first use; its scratch is reserved once, generously.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "kernels/ops.h"

namespace mx::test {

inline constexpr size_t kTestScratchBytes = size_t(512) << 20;

inline ops::Context& ctx() {
  static const std::unique_ptr<ops::Context> cx = [] {
    auto made = ops::Context::create_on_best_device({.scratch_bytes = kTestScratchBytes});
    if (made.ok()) return std::move(*made);
    ADD_FAILURE() << "test context: " << made.status().message();
    return std::make_unique<ops::Context>();
  }();
  return *cx;
}

}  // namespace mx::test
