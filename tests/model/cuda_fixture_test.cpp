// The CUDA forward (BF16 activations, FP32 accumulation) against the Hugging Face fp32 fixtures:
// greedy tokens identical, logits NMSE <= 1e-3 at every prompt position and greedy step. Runs on
// the fixtures whose attention shape the CUDA kernels support (head_dim 64); skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <span>
#include <vector>

#include "kernels/ops.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "runtime/generate.h"
#include "fixture_layers.h"
#include "test_context.h"
#include "test_util.h"

namespace mx {
namespace {

// BF16 activations against an fp32 reference: the bar.
constexpr double kLogitNmse = 1e-3;

std::vector<float> read_f32(const SafetensorsFile& f, const char* name) {
  const Tensor t = f.view(*f.find(name));
  return {t.ptr<const float>(), t.ptr<const float>() + t.numel()};
}

std::vector<int32_t> read_i32(const SafetensorsFile& f, const char* name) {
  const Tensor t = f.view(*f.find(name));
  return {t.ptr<const int32_t>(), t.ptr<const int32_t>() + t.numel()};
}

TEST(CudaFixture, Gqa8MatchesTransformers) {
  if (!ops::cuda_available()) GTEST_SKIP() << "no CUDA device";
  const auto dir = test::fixtures_dir() / "models" / "tiny-gqa8";
  auto ref = SafetensorsFile::open(dir / "reference.safetensors");
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  const auto prompt = read_i32(**ref, "prompt_ids"), greedy = read_i32(**ref, "greedy_ids");
  const auto prompt_logits = read_f32(**ref, "prompt_logits"), greedy_logits = read_f32(**ref, "greedy_logits");
  auto model = Model::load(dir.string(), Device::CUDA, ShowProgress::No);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const size_t V = size_t((*model)->config.vocab_size);
  for (int chunk : {int(prompt.size()), 7}) {  // one prefill call, and chunks crossing the window
    GenerateOptions opt;
    opt.max_tokens = int(greedy.size());
    opt.keep_logits = true;
    opt.prefill_chunk = chunk;
    opt.prompt_logits = chunk == int(prompt.size()) ? PromptLogits::All : PromptLogits::LastOnly;
    auto r = generate(**model, prompt, opt);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->tokens, greedy) << "prefill chunk " << chunk;
    for (size_t p = 0; p < r->all_prompt_logits.size() / V; ++p) {
      std::span<const float> got(r->all_prompt_logits.data() + p * V, V), want(prompt_logits.data() + p * V, V);
      EXPECT_LE(test::nmse(got, want), kLogitNmse) << "prompt position " << p;
    }
    for (size_t s = 0; s < std::min(r->tokens.size(), greedy.size()); ++s) {
      std::span<const float> got(r->logits.data() + s * V, V), want(greedy_logits.data() + s * V, V);
      EXPECT_LE(test::nmse(got, want), kLogitNmse) << "greedy step " << s << ", prefill chunk " << chunk;
    }
  }
}

// The CUDA forward's residual stream after every layer of tiny-gqa8's prompt against transformers'
// (prompt_hidden): the first boundary off names the layer to look at. BF16 activations: NMSE, the
// logits' bar, at each boundary.
TEST(CudaFixture, Gqa8LayersMatchTransformers) {
  if (!ops::cuda_available()) GTEST_SKIP() << "no CUDA device";
  const auto dir = test::fixtures_dir() / "models" / "tiny-gqa8";
  auto ref = SafetensorsFile::open(dir / "reference.safetensors");
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  const auto prompt = read_i32(**ref, "prompt_ids");
  const auto hidden = read_f32(**ref, "prompt_hidden");
  auto model = Model::load(dir.string(), Device::CUDA, ShowProgress::No);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const ModelConfig& c = (*model)->config;
  const size_t T = prompt.size(), D = size_t(c.hidden_size);
  ASSERT_EQ(hidden.size(), size_t(c.num_hidden_layers + 1) * T * D);
  const std::vector<float> got = test::prompt_residuals(**model, prompt);
  ASSERT_EQ(got.size(), hidden.size());
  const test::LayerErrors e = test::compare_residuals(got, hidden, T, D, test::nmse, kLogitNmse, "NMSE");
  for (size_t j = 0; j < e.error.size(); ++j)
    std::printf("tiny-gqa8 on CUDA: %s output NMSE %.2e\n", test::boundary_name(int(j)).c_str(), e.error[j]);
  EXPECT_EQ(e.first_bad, -1) << "first wrong: " << test::boundary_name(e.first_bad) << "'s output, " << e.detail;
}

// The tiny-gqa8 model on both devices and a 160-token prompt (longer than the fixtures' prompts).
struct LongPrompt {
  std::unique_ptr<Model> gpu, cpu;
  size_t V = 0;
  std::vector<int32_t> prompt;
};
LongPrompt long_prompt() {
  const auto dir = test::fixtures_dir() / "models" / "tiny-gqa8";
  auto gpu = Model::load(dir.string(), Device::CUDA, ShowProgress::No);
  auto cpu = Model::load(dir.string(), Device::CPU, ShowProgress::No);
  EXPECT_TRUE(gpu.ok() && cpu.ok());
  if (!gpu.ok() || !cpu.ok()) return {};
  LongPrompt lp{.gpu = std::move(*gpu), .cpu = std::move(*cpu)};
  lp.V = size_t(lp.cpu->config.vocab_size);
  lp.prompt.resize(160);
  for (size_t i = 0; i < lp.prompt.size(); ++i) lp.prompt[i] = int32_t((i * 7919 + 13) % lp.V);
  return lp;
}

// Prompts longer than the fixtures' (which stay below the prefill-attention threshold): the CUDA
// forward against the CPU forward (itself checked against transformers above) on a 160-token
// prompt, so the whole model runs the tiled prefill attention (one 160-token call), and in 64-token
// chunks (prefill at depth, the window's rings crossing chunk boundaries). With random weights a
// few positions have near-tied router logits whose top-4 flips under BF16 activations (measured:
// 6 of 160 positions above 1e-3, at most 0.046); a wrong attention kernel moves every position.
TEST(CudaFixture, LongPromptMatchesCpuForward) {
  if (!ops::cuda_available()) GTEST_SKIP() << "no CUDA device";
  const LongPrompt lp = long_prompt();
  ASSERT_TRUE(lp.gpu && lp.cpu);
  const size_t V = lp.V;
  const std::vector<int32_t>& prompt = lp.prompt;
  GenerateOptions opt;
  opt.max_tokens = 4;
  opt.keep_logits = true;
  opt.prompt_logits = PromptLogits::All;  // one prefill call of all 160 tokens
  auto want = generate(*lp.cpu, prompt, opt);
  auto got = generate(*lp.gpu, prompt, opt);
  ASSERT_TRUE(want.ok() && got.ok());
  ASSERT_EQ(got->all_prompt_logits.size(), want->all_prompt_logits.size());
  int off = 0;
  double worst = 0;
  for (size_t p = 0; p < prompt.size(); ++p) {
    const double e = test::nmse(std::span<const float>(got->all_prompt_logits.data() + p * V, V),
                                std::span<const float>(want->all_prompt_logits.data() + p * V, V));
    off += e > kLogitNmse;
    worst = std::max(worst, e);
  }
  EXPECT_LE(off, int(prompt.size()) / 16) << "positions with logits NMSE above " << kLogitNmse;
  EXPECT_LT(worst, 0.2) << "worst position";
  // 64-token chunks: the logits of the last prompt position (the first step) and the first token.
  opt.prompt_logits = PromptLogits::LastOnly;
  opt.prefill_chunk = 64;
  auto chunked = generate(*lp.gpu, prompt, opt);
  ASSERT_TRUE(chunked.ok());
  EXPECT_LE(test::nmse(std::span<const float>(chunked->logits.data(), V), std::span<const float>(want->logits.data(), V)),
            kLogitNmse);
  EXPECT_EQ(chunked->tokens.front(), want->tokens.front());
}

// The FP8 activation mode of the prefill MoE (--moe-activation fp8) on the same 160-token prompt
// against the CPU fp32 forward, next to the BF16 mode: the accuracy docs/KERNELS.md states.
// Bounded loosely (a broken FP8 kernel reads NMSE ~1 at every position).
TEST(CudaFixture, LongPromptFp8MoeAccuracy) {
  if (!ops::cuda_available()) GTEST_SKIP() << "no CUDA device";
  const LongPrompt lp = long_prompt();
  ASSERT_TRUE(lp.gpu && lp.cpu);
  const size_t V = lp.V;
  const std::vector<int32_t>& prompt = lp.prompt;
  GenerateOptions opt;
  opt.max_tokens = 1;
  opt.keep_logits = true;
  opt.prompt_logits = PromptLogits::All;
  auto want = generate(*lp.cpu, prompt, opt);
  ASSERT_TRUE(want.ok());
  for (const auto mode : {ops::MoeActivation::BF16, ops::MoeActivation::FP8}) {
    opt.moe_activation = mode;
    auto got = generate(*lp.gpu, prompt, opt);
    ASSERT_TRUE(got.ok());
    std::vector<double> e(prompt.size());
    for (size_t p = 0; p < prompt.size(); ++p)
      e[p] = test::nmse(std::span<const float>(got->all_prompt_logits.data() + p * V, V),
                        std::span<const float>(want->all_prompt_logits.data() + p * V, V));
    std::sort(e.begin(), e.end());
    const auto above = std::count_if(e.begin(), e.end(), [](double v) { return v > kLogitNmse; });
    std::printf("%s MoE activations, 160 prompt positions: logits NMSE median %.3g, p90 %.3g, max %.3g, %d above %g\n",
                mode == ops::MoeActivation::FP8 ? "fp8" : "bf16", e[e.size() / 2], e[e.size() * 9 / 10], e.back(),
                int(above), kLogitNmse);
    EXPECT_LT(e[e.size() / 2], 1e-2);
  }
}

}  // namespace
}  // namespace mx
