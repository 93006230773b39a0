// The CPU reference engine against Hugging Face transformers (fp32) on the committed tiny
// fixtures (tests/fixtures/models, made by tools/make_fixtures.py): logits at every prompt
// position and along the greedy continuation within 1e-4 relative, greedy tokens identical.
#include <gtest/gtest.h>

#include <span>

#include "model/model.h"
#include "model/safetensors.h"
#include "runtime/generate.h"
#include "test_util.h"

namespace mx {
namespace {

// 1e-4 relative (max abs error / max abs ref): fp32 everywhere, only summation order differs.
constexpr double kLogitTolerance = 1e-4;

struct Reference {
  std::vector<int32_t> prompt, greedy;
  std::vector<float> prompt_logits, greedy_logits;
};

template <typename T>
std::vector<T> read_tensor(const SafetensorsFile& f, const char* name) {
  const TensorInfo* info = f.find(name);
  EXPECT_NE(info, nullptr) << name;
  if (!info) return {};
  const Tensor t = f.view(*info);
  return std::vector<T>(t.ptr<const T>(), t.ptr<const T>() + t.numel());
}

Reference load_reference(const std::filesystem::path& dir) {
  auto f = SafetensorsFile::open(dir / "reference.safetensors");
  EXPECT_TRUE(f.ok()) << f.status().message();
  Reference r;
  r.prompt = read_tensor<int32_t>(**f, "prompt_ids");
  r.greedy = read_tensor<int32_t>(**f, "greedy_ids");
  r.prompt_logits = read_tensor<float>(**f, "prompt_logits");
  r.greedy_logits = read_tensor<float>(**f, "greedy_logits");
  return r;
}

class FixtureTest : public ::testing::TestWithParam<const char*> {};

TEST_P(FixtureTest, CpuMatchesTransformers) {
  const auto dir = test::fixtures_dir() / "models" / GetParam();
  const Reference ref = load_reference(dir);
  auto model = Model::load(dir.string(), Device::CPU, ShowProgress::No);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const size_t V = size_t((*model)->config.vocab_size);
  ASSERT_EQ(ref.prompt_logits.size(), ref.prompt.size() * V);
  ASSERT_EQ(ref.greedy_logits.size(), ref.greedy.size() * V);

  GenerateOptions opt;
  opt.max_tokens = int(ref.greedy.size());
  opt.keep_logits = true;
  opt.prompt_logits = PromptLogits::All;
  auto r = generate(**model, ref.prompt, opt);
  ASSERT_TRUE(r.ok()) << r.status().message();

  for (size_t p = 0; p < ref.prompt.size(); ++p) {
    std::span<const float> got(r->all_prompt_logits.data() + p * V, V), want(ref.prompt_logits.data() + p * V, V);
    EXPECT_LE(test::max_rel_error(got, want), kLogitTolerance) << "prompt position " << p;
  }
  EXPECT_EQ(r->tokens, ref.greedy);
  for (size_t s = 0; s < std::min(r->tokens.size(), ref.greedy.size()); ++s) {
    std::span<const float> got(r->logits.data() + s * V, V), want(ref.greedy_logits.data() + s * V, V);
    EXPECT_LE(test::max_rel_error(got, want), kLogitTolerance) << "greedy step " << s;
  }
}

// Prefill in small chunks (crossing the sliding window) must give the same logits as one chunk.
TEST_P(FixtureTest, ChunkedPrefillMatchesTransformers) {
  const auto dir = test::fixtures_dir() / "models" / GetParam();
  const Reference ref = load_reference(dir);
  auto model = Model::load(dir.string(), Device::CPU, ShowProgress::No);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const size_t V = size_t((*model)->config.vocab_size);
  GenerateOptions opt;
  opt.max_tokens = int(ref.greedy.size());
  opt.keep_logits = true;
  opt.prefill_chunk = 5;
  opt.kv_block_size = 4;
  auto r = generate(**model, ref.prompt, opt);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->tokens, ref.greedy);
  std::span<const float> got(r->logits.data(), V), want(ref.greedy_logits.data(), V);
  EXPECT_LE(test::max_rel_error(got, want), kLogitTolerance);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureTest, ::testing::Values("tiny", "tiny-odd", "tiny-sharded", "tiny-gqa8"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& ch : n) if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace mx
