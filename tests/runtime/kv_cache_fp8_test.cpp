// --kv-cache-dtype fp8 through the Engine on the CPU with the tiny fixture model (window 8, so the
// sliding layer's window pool is FP8 too): a greedy request gives logits close to the auto (f32)
// cache's, the first prefill calibrates the scales once, fixed scales (--kv-scale) are kept, and
// with fixed scales batching, chunking, preemption and the prefix cache change no token.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "model/model.h"
#include "runtime/scheduler.h"
#include "engine_fixture.h"
#include "test_util.h"

namespace mx {
namespace {


// The bound on the logits' NMSE against the f32 cache: E4M3 keeps 3 mantissa bits (relative error
// up to 1/16 per element), far below this; a cache of zeros or garbage is far above it (checked in
// WrongScalesExceedTheBound).
constexpr double kMaxNmse = 0.05;

using test::make_prompt;
using test::tiny_model;

// Prefill in chunks of 16 (later chunks attend to the cached ones), blocks of 4.
EngineArgs engine_args(KvCacheDtype dtype, std::optional<std::array<float, 2>> scales = std::nullopt) {
  return {.max_num_seqs = 4, .max_num_batched_tokens = 16, .max_model_len = 96, .kv_block_size = 4,
          .num_kv_blocks = 64, .stats_interval_seconds = 0, .kv_cache_dtype = dtype, .kv_scales = scales};
}

using Output = test::Collected;  // with the kept (tokens, V) logits

// Reads a stream to its end, which must be its length.
Output read_all(RequestStream& s) {
  Output o = test::collect(s);
  EXPECT_EQ(o.reason, FinishReason::Length) << "request " << s.id();
  return o;
}

RequestParams greedy(std::vector<int32_t> prompt, int max_tokens) {
  return {.prompt = std::move(prompt), .max_tokens = max_tokens, .ignore_eos = IgnoreEos::Yes, .keep_logits = true};
}

Output run_one(Engine& e, const std::vector<int32_t>& prompt, int max_tokens) {
  auto s = e.submit(greedy(prompt, max_tokens));
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? read_all(**s) : Output{};
}

// NMSE of the logits over the steps whose context the two runs share: every step up to and
// including the first one where the greedy tokens differ.
struct Comparison {
  double nmse = 0;
  size_t same_tokens = 0, steps = 0;
};
Comparison compare(const Output& got, const Output& ref) {
  const size_t V = size_t(tiny_model().config.vocab_size);
  Comparison c;
  while (c.same_tokens < std::min(got.tokens.size(), ref.tokens.size()) &&
         got.tokens[c.same_tokens] == ref.tokens[c.same_tokens])
    c.same_tokens++;
  c.steps = std::min({c.same_tokens + 1, got.tokens.size(), ref.tokens.size()});
  EXPECT_GE(got.logits.size(), c.steps * V);
  EXPECT_GE(ref.logits.size(), c.steps * V);
  c.nmse = test::nmse(std::span(got.logits.data(), c.steps * V), std::span(ref.logits.data(), c.steps * V));
  return c;
}

const std::vector<int32_t> kPrompt = make_prompt(40, 3);
constexpr int kNew = 24;

Output auto_output() {
  static const Output o = [] {
    auto e = Engine::create(tiny_model(), engine_args(KvCacheDtype::Auto));
    EXPECT_TRUE(e.ok()) << e.status().message();
    return e.ok() ? run_one(**e, kPrompt, kNew) : Output{};
  }();
  return o;
}

std::array<float, 2> largest(const std::vector<float>& scales) {  // (L, 2) -> the largest K and V scale
  std::array<float, 2> m{0, 0};
  for (size_t i = 0; i < scales.size(); ++i) m[i % 2] = std::max(m[i % 2], scales[i]);
  return m;
}

TEST(KvCacheFp8, CalibratesFromTheFirstPrefillAndMatchesTheF32Cache) {
  auto e = Engine::create(tiny_model(), engine_args(KvCacheDtype::Fp8));
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_TRUE((*e)->kv_cache().scales_pending());
  EXPECT_NE((*e)->kv_summary().find("fp8 e4m3"), std::string::npos) << (*e)->kv_summary();
  const Output fp8 = run_one(**e, kPrompt, kNew);
  const Comparison c = compare(fp8, auto_output());
  std::printf("fp8 cache, calibrated: logits NMSE %.3g over %zu steps; first %zu of %d greedy tokens equal\n", c.nmse,
              c.steps, c.same_tokens, kNew);
  EXPECT_LT(c.nmse, kMaxNmse);
  ASSERT_EQ(fp8.tokens.size(), size_t(kNew));

  const KvCache& kv = (*e)->kv_cache();
  EXPECT_FALSE(kv.scales_pending());
  EXPECT_FALSE(kv.scales_fixed());
  const std::vector<float> scales = kv.read_scales().value();
  ASSERT_EQ(scales.size(), 2 * size_t(tiny_model().config.num_hidden_layers));
  for (size_t i = 0; i < scales.size(); ++i) {
    EXPECT_TRUE(std::isfinite(scales[i]) && scales[i] > 0) << "scale " << i << " = " << scales[i];
    EXPECT_NE(scales[i], 1.0f) << "scale " << i << " was not calibrated";
  }
  // A second request keeps the scales: they are global per layer and set once.
  run_one(**e, make_prompt(30, 9), 4);
  EXPECT_EQ(kv.read_scales().value(), scales);
}

TEST(KvCacheFp8, FixedScalesAreUsedAndNeverRecalibrated) {
  auto calibrated = Engine::create(tiny_model(), engine_args(KvCacheDtype::Fp8));
  ASSERT_TRUE(calibrated.ok());
  run_one(**calibrated, kPrompt, 1);
  const std::array<float, 2> fixed = largest((*calibrated)->kv_cache().read_scales().value());

  auto e = Engine::create(tiny_model(), engine_args(KvCacheDtype::Fp8, fixed));
  ASSERT_TRUE(e.ok()) << e.status().message();
  const KvCache& kv = (*e)->kv_cache();
  EXPECT_FALSE(kv.scales_pending());
  EXPECT_TRUE(kv.scales_fixed());
  EXPECT_NE((*e)->kv_summary().find("fixed by --kv-scale"), std::string::npos) << (*e)->kv_summary();
  const Comparison c = compare(run_one(**e, kPrompt, kNew), auto_output());
  std::printf("fp8 cache, fixed scales K %g V %g: logits NMSE %.3g over %zu steps; first %zu of %d greedy tokens "
              "equal\n",
              fixed[0], fixed[1], c.nmse, c.steps, c.same_tokens, kNew);
  EXPECT_LT(c.nmse, kMaxNmse);
  const std::vector<float> scales = kv.read_scales().value();
  for (size_t i = 0; i < scales.size(); ++i) EXPECT_EQ(scales[i], fixed[i % 2]) << "scale " << i;
}

// Checks the checker: scales so small that every K and V saturates at ±448 · 1e-20 (all but zero)
// change the logits by more than kMaxNmse, so the bound above can fail.
TEST(KvCacheFp8, WrongScalesExceedTheBound) {
  auto e = Engine::create(tiny_model(), engine_args(KvCacheDtype::Fp8, std::array<float, 2>{1e-20f, 1e-20f}));
  ASSERT_TRUE(e.ok()) << e.status().message();
  const Comparison c = compare(run_one(**e, kPrompt, kNew), auto_output());
  std::printf("fp8 cache, scales 1e-20 (K and V ~0): logits NMSE %.3g over %zu steps\n", c.nmse, c.steps);
  EXPECT_GT(c.nmse, kMaxNmse);
}

// With fixed scales an element's code depends on its value only, so requests that reuse a finished
// one's prefix blocks and run together on a pool small enough to preempt give each request's tokens
// alone (calibrated scales instead depend on which tokens the first prefill step held).
TEST(KvCacheFp8, FixedScalesKeepBatchedEqualToSingleWithPreemptionAndPrefixCache) {
  const std::array<float, 2> fixed{0.05f, 0.05f};
  EngineArgs tight = engine_args(KvCacheDtype::Fp8, fixed);
  tight.num_kv_blocks = 28;
  tight.max_model_len = 64;
  tight.prefix_caching = PrefixCaching::On;
  auto batched = Engine::create(tiny_model(), tight);
  ASSERT_TRUE(batched.ok()) << batched.status().message();
  std::vector<std::vector<int32_t>> prompts;
  std::vector<Output> outs;
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 5; ++i) {
    std::vector<int32_t> p = make_prompt(20, 5);  // a shared prefix of 5 blocks
    const std::vector<int32_t> tail = make_prompt(3 + 5 * i, 11 + i);
    p.insert(p.end(), tail.begin(), tail.end());
    prompts.push_back(p);
    RequestParams r = greedy(p, 16);
    r.keep_logits = false;  // keeps the steps overlapped
    streams.push_back(*(*batched)->submit(r));
    if (i == 0) outs.push_back(read_all(*streams[0]));  // its blocks are cached before the others come
  }
  for (size_t i = 1; i < streams.size(); ++i) outs.push_back(read_all(*streams[i]));
  EXPECT_GT((*batched)->stats().preemptions_total, 0u) << "the pool was meant to force preemption";
  EXPECT_GT((*batched)->stats().prefix_cache_hits, 0u);
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto alone = Engine::create(tiny_model(), engine_args(KvCacheDtype::Fp8, fixed));
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ(outs[i].tokens, run_one(**alone, prompts[i], 16).tokens) << "request " << i;
  }
}

}  // namespace
}  // namespace mx
