// The continuous-batching engine on the CPU backend with the tiny fixture model: concurrent
// requests (chunked prefill, joining a running batch, a tiny KV pool with preemption) produce the
// same tokens as single-sequence generate(); cancellation frees blocks; limits and stop ids hold;
// guided-decoding masks of a batch equal those of each request alone.
// On CUDA: decode steps as CUDA graphs.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "kernels/ops.h"
#include "model/model.h"
#include "runtime/generate.h"
#include "runtime/scheduler.h"
#include "engine_fixture.h"
#include "test_util.h"

namespace mx {
namespace {

using namespace std::chrono_literals;

using test::make_prompt;
using test::tiny_model;

using test::collect;
using test::Collected;

std::vector<int32_t> reference(const std::vector<int32_t>& prompt, int max_tokens, SamplingParams sp = {}) {
  GenerateOptions opt;
  opt.max_tokens = max_tokens;
  opt.sampling = sp;
  auto r = generate(tiny_model(), prompt, opt);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r->tokens : std::vector<int32_t>{};
}

EngineArgs small_args(int blocks, int block_size = 4, int max_len = 128) {
  return {.max_num_seqs = 8, .max_num_batched_tokens = 24, .max_model_len = max_len, .kv_block_size = block_size,
          .num_kv_blocks = blocks, .stats_interval_seconds = 0};
}

RequestParams greedy(std::vector<int32_t> prompt, int max_tokens) {
  return {.prompt = std::move(prompt), .max_tokens = max_tokens, .ignore_eos = IgnoreEos::Yes};
}

void expect_batched_equals_single(const EngineArgs& args, int n_requests, int stagger_after) {
  auto engine = Engine::create(tiny_model(), args);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::shared_ptr<RequestStream>> streams;
  const int max_tokens = 12;
  for (int i = 0; i < n_requests; ++i) {
    prompts.push_back(make_prompt(3 + 9 * i, i + 1));  // 3..57 tokens: several prefill chunks
    if (i == stagger_after) std::this_thread::sleep_for(20ms);  // later ones join a running batch
    auto s = (*engine)->submit(greedy(prompts.back(), max_tokens));
    ASSERT_TRUE(s.ok()) << s.status().message();
    streams.push_back(*s);
  }
  for (int i = 0; i < n_requests; ++i) {
    const Collected c = collect(*streams[size_t(i)]);
    EXPECT_EQ(c.reason, FinishReason::Length);
    EXPECT_EQ(c.tokens, reference(prompts[size_t(i)], max_tokens)) << "request " << i;
  }
}

// The step budget when none is given: 2048 on the CPU; on CUDA 8192 only for a GPU of >= 70 GiB
// and compute capability >= 9.0.
TEST(Scheduler, DefaultTokenBudgetFollowsTheDevice) {
  EXPECT_EQ(*default_max_num_batched_tokens(Device::CPU), kDefaultBatchedTokens);
  if (!ops::cuda_available()) return;
  const ops::MemoryInfo mi = *ops::memory_info(Device::CUDA);
  const bool large = mi.total_bytes >= (size_t(70) << 30) && ops::compute_capability(Device::CUDA) >= 90;
  EXPECT_EQ(*default_max_num_batched_tokens(Device::CUDA), large ? kLargeGpuBatchedTokens : kDefaultBatchedTokens);
  EXPECT_GE(ops::compute_capability(Device::CUDA), 50);
}

TEST(Scheduler, BatchedGreedyEqualsSingleGenerate) {
  expect_batched_equals_single(small_args(/*blocks=*/256), 6, 3);
}

TEST(Scheduler, TinyKvPoolRequestsWaitAndAllComplete) {
  // 20 blocks of 4 tokens: one 57+12 token request alone needs 18, so the rest wait or are
  // preempted and recomputed; the tokens must not change.
  EngineArgs a = small_args(/*blocks=*/20, 4, 80);
  expect_batched_equals_single(a, 6, 3);
  auto engine = Engine::create(tiny_model(), a);
  ASSERT_TRUE(engine.ok());
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 5; ++i) streams.push_back(*(*engine)->submit(greedy(make_prompt(40, i), 30)));
  std::vector<std::vector<int32_t>> got;
  for (auto& s : streams) got.push_back(collect(*s).tokens);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(got[size_t(i)], reference(make_prompt(40, i), 30)) << "request " << i;
  EXPECT_GT((*engine)->stats().preemptions_total, 0u) << "the pool was meant to force preemption";
}

TEST(Scheduler, SeededSamplingEqualsSingleGenerate) {
  auto engine = Engine::create(tiny_model(), small_args(256));
  ASSERT_TRUE(engine.ok());
  const SamplingParams sp{.temperature = 0.9f, .top_k = 50, .top_p = 0.95f, .min_p = 0.01f, .seed = 7};
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 4; ++i) {
    RequestParams p = greedy(make_prompt(10 + i, i), 10);
    p.sampling = sp;
    p.sampling.seed = uint64_t(i + 1);
    streams.push_back(*(*engine)->submit(p));
  }
  for (int i = 0; i < 4; ++i) {
    SamplingParams ref = sp;
    ref.seed = uint64_t(i + 1);
    EXPECT_EQ(collect(*streams[size_t(i)]).tokens, reference(make_prompt(10 + i, i), 10, ref)) << "request " << i;
  }
}

TEST(Scheduler, CancellationFreesBlocks) {
  // A long request (2000 tokens) that cannot finish before the cancel lands.
  auto engine = Engine::create(tiny_model(), small_args(600, 4, 2048));
  ASSERT_TRUE(engine.ok());
  auto s = *(*engine)->submit(greedy(make_prompt(20, 3), 2000));
  auto other = *(*engine)->submit(greedy(make_prompt(8, 4), 6));
  const auto deadline = Clock::now() + 30s;
  size_t seen = 0;
  while (seen == 0 && Clock::now() < deadline) seen += s->wait(50ms).tokens.size();
  ASSERT_GT(seen, 0u);
  s->cancel();
  const Collected c = collect(*s);
  EXPECT_EQ(c.reason, FinishReason::Cancelled);
  EXPECT_LT(seen + c.tokens.size(), 2000u);
  EXPECT_EQ(collect(*other).tokens, reference(make_prompt(8, 4), 6));
  int used = -1;
  for (auto until = Clock::now() + 10s; Clock::now() < until; std::this_thread::sleep_for(10ms))
    if ((used = (*engine)->stats().kv_blocks_used) == 0) break;
  EXPECT_EQ(used, 0);
}

TEST(Scheduler, StopIdsMinTokensAndLimits) {
  auto engine = Engine::create(tiny_model(), small_args(64, 4, 64));
  ASSERT_TRUE(engine.ok());
  const std::vector<int32_t> prompt = make_prompt(12, 5);
  const std::vector<int32_t> ref = reference(prompt, 8);
  ASSERT_EQ(ref.size(), 8u);
  // The third greedy token as a stop id ends the request there (stop id included).
  RequestParams p = greedy(prompt, 8);
  p.stop_ids = {ref[2]};
  Collected c = collect(**(*engine)->submit(p));
  EXPECT_EQ(c.reason, FinishReason::Stop);
  EXPECT_EQ(c.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + 3));
  // As an eos id it is ignored with ignore_eos, and masked before min_tokens.
  p.stop_ids.clear();
  p.eos_ids = {ref[0]};
  c = collect(**(*engine)->submit(p));
  EXPECT_EQ(c.tokens, ref);
  p.ignore_eos = IgnoreEos::No;
  p.min_tokens = 1;
  c = collect(**(*engine)->submit(p));
  EXPECT_NE(c.tokens.at(0), ref[0]);
  p.min_tokens = 0;
  c = collect(**(*engine)->submit(p));
  EXPECT_EQ(c.reason, FinishReason::Stop);
  EXPECT_EQ(c.tokens.size(), 1u);
  // Over the context, an empty prompt, ids outside the vocabulary: errors, not crashes.
  auto too_long = (*engine)->submit(greedy(make_prompt(60, 1), 10));
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("maximum context length is 64 tokens"), std::string::npos);
  EXPECT_FALSE((*engine)->submit(greedy({}, 4)).ok());
  EXPECT_FALSE((*engine)->submit(greedy({1, 9999}, 4)).ok());
}

TEST(Scheduler, LogprobsAreLogSoftmaxOfGenerateLogits) {
  auto engine = Engine::create(tiny_model(), small_args(64));
  ASSERT_TRUE(engine.ok());
  const std::vector<int32_t> prompt = make_prompt(9, 2);
  RequestParams p = greedy(prompt, 5);
  p.logprobs = 3;
  const Collected c = collect(**(*engine)->submit(p));
  GenerateOptions opt;
  opt.max_tokens = 5;
  opt.keep_logits = true;
  auto ref = generate(tiny_model(), prompt, opt);
  ASSERT_TRUE(ref.ok());
  const size_t V = size_t(tiny_model().config.vocab_size);
  ASSERT_EQ(c.tokens, ref->tokens);
  ASSERT_EQ(c.logprobs.size(), c.tokens.size());
  for (size_t t = 0; t < c.tokens.size(); ++t) {
    std::span<const float> row(ref->logits.data() + t * V, V);
    double z = 0;
    for (float x : row) z += std::exp(double(x));
    // 1e-5 absolute: float log-softmax against a double reference on logits of order 1.
    EXPECT_NEAR(c.logprobs[t].logprob, double(row[size_t(c.tokens[t])]) - std::log(z), 1e-5) << "step " << t;
    ASSERT_EQ(c.logprobs[t].top.size(), 3u);
    EXPECT_EQ(c.logprobs[t].top[0].first, c.tokens[t]) << "greedy picks the top-1";
    EXPECT_GE(c.logprobs[t].top[0].second, c.logprobs[t].top[1].second);
    EXPECT_GE(c.logprobs[t].top[1].second, c.logprobs[t].top[2].second);
  }
  p.logprobs = 21;
  EXPECT_FALSE((*engine)->submit(p).ok());
}

// A mixed workload (seeded sampling, min_tokens, stop ids, logprobs, penalties, logit_bias, a pool
// small enough to preempt) read back from an engine.
std::vector<Collected> mixed_workload(AsyncScheduling async) {
  EngineArgs a = small_args(/*blocks=*/24, 4, 80);
  a.async_scheduling = async;
  auto engine = Engine::create(tiny_model(), a);
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 8; ++i) {
    RequestParams p = greedy(make_prompt(6 + 7 * i, i + 3), 14 + i);
    if (i % 2) p.sampling = {.temperature = 0.8f, .top_k = 40, .top_p = 0.9f, .seed = uint64_t(100 + i)};
    if (i % 3 == 0) p.logprobs = 2;
    if (i == 2) p.min_tokens = 3, p.eos_ids = {7, 8}, p.ignore_eos = IgnoreEos::No, p.stop_ids = {11};
    if (i == 5) p.sampling.frequency_penalty = 0.7f, p.sampling.repetition_penalty = 1.3f;
    if (i == 6) p.sampling.logit_bias = {{17, 3.0f}, {18, -100.0f}};
    streams.push_back(*(*engine)->submit(p));
  }
  std::vector<Collected> out;
  for (auto& s : streams) out.push_back(collect(*s));
  EXPECT_GT((*engine)->stats().preemptions_total, 0u) << "the pool was meant to force preemption";
  return out;
}

// Overlapped scheduling (step N+1 planned while N runs, decode tokens fed on the device) changes
// nothing: the same tokens, finish reasons and logprobs as planning each step after the last is read.
TEST(Scheduler, AsyncSchedulingEqualsSerial) {
  const std::vector<Collected> serial = mixed_workload(AsyncScheduling::Off);
  const std::vector<Collected> async = mixed_workload(AsyncScheduling::On);
  ASSERT_EQ(serial.size(), async.size());
  for (size_t i = 0; i < serial.size(); ++i) {
    EXPECT_EQ(async[i].tokens, serial[i].tokens) << "request " << i;
    EXPECT_EQ(async[i].reason, serial[i].reason) << "request " << i;
    ASSERT_EQ(async[i].logprobs.size(), serial[i].logprobs.size()) << "request " << i;
    for (size_t t = 0; t < async[i].logprobs.size(); ++t)
      EXPECT_EQ(async[i].logprobs[t].logprob, serial[i].logprobs[t].logprob) << "request " << i << " token " << t;
  }
}

// Penalties and logit_bias through the engine's device sampling stage pick the tokens that
// generate()'s host rule picks for the same seed.
TEST(Scheduler, PenaltiesAndLogitBiasEqualGenerate) {
  auto engine = Engine::create(tiny_model(), small_args(256));
  ASSERT_TRUE(engine.ok());
  std::vector<SamplingParams> cases = {
      {.temperature = 0.0f, .repetition_penalty = 1.8f},
      {.temperature = 0.0f, .presence_penalty = 1.5f, .frequency_penalty = 0.5f},
      {.temperature = 0.9f, .seed = 3, .repetition_penalty = 0.7f, .frequency_penalty = -0.4f},
      {.temperature = 0.0f, .logit_bias = {{42, 100.0f}}},
      {.temperature = 1.0f, .top_k = 5, .seed = 9, .presence_penalty = 2.0f, .logit_bias = {{3, 2.0f}, {4, -5.0f}}},
  };
  const std::vector<int32_t> prompt = make_prompt(15, 4);
  for (size_t i = 0; i < cases.size(); ++i) {
    RequestParams p = greedy(prompt, 12);
    p.sampling = cases[i];
    const Collected c = collect(**(*engine)->submit(p));
    EXPECT_EQ(c.tokens, reference(prompt, 12, cases[i])) << "case " << i;
    if (i == 3) {
      EXPECT_EQ(c.tokens, std::vector<int32_t>(12, 42)) << "a +100 bias wins every step";
    }
  }
  // A greedy repetition penalty changes the greedy output (else the test above proves little).
  SamplingParams plain{};
  EXPECT_NE(reference(prompt, 12, cases[0]), reference(prompt, 12, plain));
  RequestParams bad = greedy(prompt, 4);
  bad.sampling.logit_bias = {{100000, 1.0f}};
  EXPECT_FALSE((*engine)->submit(bad).ok()) << "a logit_bias token outside the vocabulary";
}

// Admission leaves a watermark of the pool free while others run: fewer preemptions than admitting
// into a full pool, the same tokens.
TEST(Scheduler, WatermarkAdmissionAvoidsRepeatedPreemption) {
  uint64_t preemptions[2] = {0, 0};
  for (int w = 0; w < 2; ++w) {
    EngineArgs a = small_args(/*blocks=*/40, 4, 80);
    a.watermark = w ? 0.3 : 0.0;
    auto engine = Engine::create(tiny_model(), a);
    ASSERT_TRUE(engine.ok());
    std::vector<RequestParams> reqs;
    for (int i = 0; i < 6; ++i) reqs.push_back(greedy(make_prompt(16 + i, i + 20), 40));
    auto streams = (*engine)->submit_all(reqs);
    ASSERT_TRUE(streams.ok());
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(collect(*(*streams)[size_t(i)]).tokens, reference(reqs[size_t(i)].prompt, 40)) << "request " << i;
    preemptions[w] = (*engine)->stats().preemptions_total;
  }
  EXPECT_GT(preemptions[0], 0u) << "without a watermark the pool was meant to preempt";
  EXPECT_LT(preemptions[1], preemptions[0]);
}

TEST(Scheduler, MaxWaitingRefusesBeyondTheQueue) {
  EngineArgs a = small_args(256);
  a.max_waiting = 2;
  auto engine = Engine::create(tiny_model(), a);
  ASSERT_TRUE(engine.ok());
  auto refused = (*engine)->submit_all({greedy(make_prompt(5, 1), 4), greedy(make_prompt(5, 2), 4), greedy(make_prompt(5, 3), 4)});
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().message().starts_with(kOverloaded)) << refused.status().message();
  auto ok = (*engine)->submit_all({greedy(make_prompt(5, 1), 4), greedy(make_prompt(5, 2), 4)});
  ASSERT_TRUE(ok.ok());
  for (auto& s : *ok) EXPECT_EQ(collect(*s).reason, FinishReason::Length);
}

// Prompts that share their first `shared` tokens.
std::vector<int32_t> shared_prompt(int shared, int own, int seed) {
  std::vector<int32_t> p = make_prompt(shared, 99);
  const std::vector<int32_t> tail = make_prompt(own, seed);
  p.insert(p.end(), tail.begin(), tail.end());
  return p;
}

TEST(Scheduler, PrefixCachingReusesBlocksAndKeepsOutputs) {
  EngineArgs a = small_args(/*blocks=*/64, 4, 80);
  a.prefix_caching = PrefixCaching::On;
  auto engine = Engine::create(tiny_model(), a);
  ASSERT_TRUE(engine.ok());
  // One after the other: the second finds the first's 6 full blocks of the shared 26 tokens.
  const auto p0 = shared_prompt(26, 5, 1), p1 = shared_prompt(26, 7, 2);
  EXPECT_EQ(collect(**(*engine)->submit(greedy(p0, 10))).tokens, reference(p0, 10));
  auto s1 = *(*engine)->submit(greedy(p1, 10));
  EXPECT_EQ(collect(*s1).tokens, reference(p1, 10));
  EXPECT_EQ(s1->timing().cached_prompt_tokens, 24);
  EXPECT_GE((*engine)->stats().prefix_cache_hits, 24u);
  // The same prompt again hits all but the last block's worth, and still matches.
  auto s2 = *(*engine)->submit(greedy(p1, 10));
  EXPECT_EQ(collect(*s2).tokens, reference(p1, 10));
  EXPECT_EQ(s2->timing().cached_prompt_tokens, 32);
  // Concurrent requests on a tiny pool: cached blocks are evicted, preemption recomputes.
  EngineArgs tiny = small_args(/*blocks=*/22, 4, 80);
  tiny.prefix_caching = PrefixCaching::On;
  auto e2 = Engine::create(tiny_model(), tiny);
  ASSERT_TRUE(e2.ok());
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 6; ++i) streams.push_back(*(*e2)->submit(greedy(shared_prompt(30, 4 + i, i), 30)));
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(collect(*streams[size_t(i)]).tokens, reference(shared_prompt(30, 4 + i, i), 30)) << "request " << i;
  int used = -1;
  for (auto until = Clock::now() + 10s; Clock::now() < until; std::this_thread::sleep_for(10ms))
    if ((used = (*e2)->stats().kv_blocks_used) == 0) break;
  EXPECT_EQ(used, 0) << "only unreferenced cached blocks remain";
}

// On CUDA (tiny-gqa8: head_dim 64) decode-only steps replay a CUDA graph per batch size: one
// request's greedy tokens equal generate()'s eager steps (the same kernels, so the same logits);
// then concurrent requests (other batch sizes, prefill steps between, the ops' scratch growing)
// all complete, with graphs captured and replayed; --enforce-eager replays none.
TEST(Scheduler, CudaDecodeStepsReplayGraphs) {
  if (!ops::cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto model = Model::load((test::fixtures_dir() / "models" / "tiny-gqa8").string(), Device::CUDA, ShowProgress::No);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const std::vector<int32_t> prompt = make_prompt(20, 5);
  GenerateOptions opt;
  opt.max_tokens = 40;
  auto want = generate(**model, prompt, opt);
  ASSERT_TRUE(want.ok()) << want.status().message();
  for (const bool eager : {false, true}) {
    EngineArgs args = small_args(/*blocks=*/512, 16, 256);
    args.max_num_batched_tokens = 64;
    args.enforce_eager = eager;
    auto engine = Engine::create(**model, args);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    auto one = (*engine)->submit(greedy(prompt, 40));
    ASSERT_TRUE(one.ok());
    EXPECT_EQ(collect(**one).tokens, want->tokens) << (eager ? "eager" : "graphs");
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int i = 0; i < 5; ++i) {
      auto s = (*engine)->submit(greedy(make_prompt(10 + 30 * i, 7 + i), 16 + 4 * i));
      ASSERT_TRUE(s.ok());
      streams.push_back(*s);
    }
    for (int i = 0; i < 5; ++i) {
      const Collected c = collect(*streams[size_t(i)]);
      EXPECT_EQ(c.reason, FinishReason::Length);
      EXPECT_EQ(c.tokens.size(), size_t(16 + 4 * i));
    }
    const EngineStats st = (*engine)->stats();
    if (eager) {
      EXPECT_EQ(st.graph_replays_total, 0u);
    } else {
      EXPECT_GE(st.graph_captures_total, 1u);
      EXPECT_GE(st.graph_replays_total, 39u) << "the single request's decode steps after the first";
    }
  }
}

// Two engines in one process on one device (each its own ops::Context: stream, scratch, settings),
// their loops running at once, with graphs where CUDA has them: each gives the tokens of
// single-sequence generate(), as a target and its draft (or two models) served side by side would.
TEST(Scheduler, TwoEnginesSideBySideKeepTheirTokens) {
  const Device dev = ops::cuda_available() ? Device::CUDA : Device::CPU;
  auto model = Model::load((test::fixtures_dir() / "models" / "tiny-gqa8").string(), dev, ShowProgress::No);
  ASSERT_TRUE(model.ok()) << model.status().message();
  std::vector<std::vector<int32_t>> prompts, want;
  for (int i = 0; i < 4; ++i) {
    prompts.push_back(make_prompt(12 + 17 * i, 31 + i));
    GenerateOptions opt;
    opt.max_tokens = 24;
    auto r = generate(**model, prompts.back(), opt);
    ASSERT_TRUE(r.ok()) << r.status().message();
    want.push_back(r->tokens);
  }
  EngineArgs args = small_args(/*blocks=*/512, 16, 256);
  args.max_num_batched_tokens = 64;
  auto a = Engine::create(**model, args);
  args.max_num_seqs = 4;  // another shape: other graph buckets and another scratch size
  auto b = Engine::create(**model, args);
  ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.status().message() : a.status().message());
  EXPECT_NE(&(*a)->context(), &(*b)->context());
  std::vector<std::shared_ptr<RequestStream>> sa, sb;
  for (const auto& p : prompts) {
    sa.push_back(*(*a)->submit(greedy(p, 24)));
    sb.push_back(*(*b)->submit(greedy(p, 24)));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(collect(*sa[i]).tokens, want[i]) << "engine a, request " << i;
    EXPECT_EQ(collect(*sb[i]).tokens, want[i]) << "engine b, request " << i;
  }
}

// A guided-decoding rule for tests: draw g (0-based) may take ids first + 7g .. first + 7g + 11,
// so each mask depends on the sequence's own progress.
class SlidingWindow final : public TokenConstraint {
 public:
  SlidingWindow(int32_t first, int32_t vocab) : first_(first), mask_(size_t(vocab + 31) / 32) {}
  bool can_run_ahead(int pending) const override { return pending == 0; }
  const std::vector<uint32_t>& next_mask(int) override {
    std::fill(mask_.begin(), mask_.end(), 0u);
    for (int32_t t = lo(); t < lo() + kWidth; ++t) mask_[size_t(t) / 32] |= 1u << (t % 32);
    return mask_;
  }
  int32_t accept(int32_t token) override {
    if (token < lo() || token >= lo() + kWidth) return -1;
    drawn_++;
    return token;
  }
  std::unique_ptr<TokenConstraint> fresh() const override {
    return std::make_unique<SlidingWindow>(first_, int32_t(mask_.size() * 32));
  }
  static constexpr int kWidth = 12;
  int32_t lo() const { return first_ + 7 * drawn_; }

 private:
  int32_t first_;
  int drawn_ = 0;
  std::vector<uint32_t> mask_;
};

// Eight constrained requests in one batch (their masks computed side by side on the engine's mask
// pool) give the same tokens as each alone (masks on the engine thread), every one in its window.
TEST(Scheduler, ConstrainedDrawsInOneBatchEqualEachAlone) {
  const int32_t vocab = tiny_model().config.vocab_size;
  const int n = 8, max_tokens = 10;
  ASSERT_GT(vocab, 16 * n + 7 * max_tokens + SlidingWindow::kWidth);
  auto params = [&](int i) {
    RequestParams p = greedy(make_prompt(5 + i, i + 1), max_tokens);
    p.constraint = std::make_shared<SlidingWindow>(int32_t(16 * i), vocab);
    return p;
  };
  auto engine = Engine::create(tiny_model(), small_args(128));
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  std::vector<RequestParams> batch;
  for (int i = 0; i < n; ++i) batch.push_back(params(i));
  auto streams = (*engine)->submit_all(std::move(batch));
  ASSERT_TRUE(streams.ok()) << streams.status().message();
  std::vector<Collected> batched;
  for (const auto& s : *streams) batched.push_back(collect(*s));
  for (int i = 0; i < n; ++i) {
    const Collected& together = batched[size_t(i)];
    const Collected alone = collect(**(*engine)->submit(params(i)));
    EXPECT_EQ(together.reason, FinishReason::Length);
    EXPECT_EQ(together.tokens, alone.tokens) << "request " << i;
    for (size_t g = 0; g < together.tokens.size(); ++g) {
      const int32_t lo = int32_t(16 * i + 7 * int(g));
      EXPECT_TRUE(together.tokens[g] >= lo && together.tokens[g] < lo + SlidingWindow::kWidth)
          << "request " << i << " draw " << g << ": " << together.tokens[g];
    }
  }
}

TEST(Scheduler, RejectsAPoolSmallerThanOneRequest) {
  auto engine = Engine::create(tiny_model(), small_args(/*blocks=*/4, 4, 64));
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("cannot hold one request"), std::string::npos);
}

}  // namespace
}  // namespace mx
