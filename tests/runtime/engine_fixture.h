// What the engine tests share (scheduler_test.cpp, kv_cache_fp8_test.cpp, speculative_test.cpp):
// the tiny fixture model on the CPU, loaded once, deterministic prompts, and reading a stream.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "model/model.h"
#include "runtime/request.h"
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

struct Collected {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;
  std::vector<float> logits;  // (tokens, V) when the request kept them
  FinishReason reason = FinishReason::None;
};

// Reads a stream to its end (bounded: fails after 60 s).
inline Collected collect(RequestStream& s) {
  using namespace std::chrono_literals;
  Collected c;
  const auto deadline = Clock::now() + 60s;
  while (c.reason == FinishReason::None && Clock::now() < deadline) {
    StreamUpdate u = s.wait(100ms);
    c.tokens.insert(c.tokens.end(), u.tokens.begin(), u.tokens.end());
    c.logprobs.insert(c.logprobs.end(), u.logprobs.begin(), u.logprobs.end());
    c.logits.insert(c.logits.end(), u.logits.begin(), u.logits.end());
    c.reason = u.reason;
  }
  EXPECT_NE(c.reason, FinishReason::None) << "request " << s.id() << " did not finish in 60 s";
  return c;
}

}  // namespace mx::test
