// What the engine tests share (scheduler_test.cpp, kv_cache_fp8_test.cpp): the tiny fixture model
// on the CPU, loaded once, and deterministic prompts.
#pragma once

#include <memory>
#include <vector>

#include "model/model.h"
#include "test_util.h"

namespace mx::test {

inline const Model& tiny_model() {
  static std::unique_ptr<Model> m = [] {
    auto r = Model::load((fixtures_dir() / "models" / "tiny").string(), Device::CPU, ShowProgress::No);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? std::move(r).value() : nullptr;
  }();
  return *m;
}

// n token ids below 300, a different sequence for each seed.
inline std::vector<int32_t> make_prompt(int n, int seed) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(int32_t((seed * 37 + i * 11) % 300));
  return p;
}

}  // namespace mx::test
