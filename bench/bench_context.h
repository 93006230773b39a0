// The ops' context of a benchmark binary (kernels/context.h): a CUDA one where a GPU is present,
// else the CPU reference's, with kBenchScratchBytes of scratch reserved once. Made on first use.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "kernels/ops.h"

namespace mx::bench {

inline constexpr size_t kBenchScratchBytes = size_t(2) << 30;

inline ops::Context& ctx() {
  static const std::unique_ptr<ops::Context> cx = [] {
    auto made = ops::Context::create_on_best_device({.scratch_bytes = kBenchScratchBytes});
    if (made.ok()) return std::move(*made);
    std::fprintf(stderr, "bench context: %s\n", made.status().message().c_str());
    std::exit(1);
  }();
  return *cx;
}

}  // namespace mx::bench
