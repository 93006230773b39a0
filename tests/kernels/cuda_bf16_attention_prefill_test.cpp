// The tiled prefill attention kernels (cuda::attention_prefill: mma.sync and wgmma, called directly)
// against the CPU reference: gpt-oss sizes at T = 2048 from depth 0 and on top of a prefix, odd T,
// several sequences (and a decode token) in one call, sliding-window chunks over ring block tables,
// the tiny fixtures' head groups, tokens of one sequence split apart; and ops::attention on both
// sides of the dispatch threshold, checking the kernel it routed to. Suites:
// CudaBf16AttentionPrefill (instances mma_sync: bf16_attention_prefill, wgmma:
// sm90_bf16_attention_prefill), CudaBf16AttentionPrefillDispatch.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_attention_fixture.h"
#ifdef MXSERVE_HAVE_CUDA
#include "kernels/cuda/cuda_ops.h"
#include "test_context.h"
#endif

namespace mx::test {
namespace {

// Each test runs both prefill kernels: mma.sync (every target) and wgmma (sm_90a builds on Hopper;
// skipped visibly elsewhere).
enum class Kernel { kMmaSync, kWgmma };

class CudaBf16AttentionPrefill : public ::testing::TestWithParam<Kernel> {
 protected:
  void SetUp() override {
    MX_REQUIRE_CUDA();
#ifdef MXSERVE_HAVE_CUDA
    if (GetParam() == Kernel::kWgmma && !cuda::attention_prefill_wgmma_available())
      GTEST_SKIP() << "no sm_90a code for this device: the wgmma prefill kernel is not built for it";
#endif
  }
  AttentionFn prefill() const {
#ifdef MXSERVE_HAVE_CUDA
    const auto k = GetParam() == Kernel::kWgmma ? cuda::PrefillKernel::kWgmma : cuda::PrefillKernel::kMmaSync;
    return [k](const ops::AttentionArgs& a) { return cuda::attention_prefill(*test::ctx().cuda(), a, k); };
#else
    return [](const ops::AttentionArgs& a) { return ops::attention(test::ctx(), a); };
#endif
  }
  void expect_match(const Fixture& f, int window, uint64_t seed, const char* what) const {
    const auto [gpu, cpu] = run_attention(f, window, seed, prefill());
    EXPECT_LT(nmse(gpu, cpu), kAttentionNmse) << what << ", window " << window;
  }
};

INSTANTIATE_TEST_SUITE_P(CudaKernels, CudaBf16AttentionPrefill, ::testing::Values(Kernel::kMmaSync, Kernel::kWgmma),
                         [](const auto& info) { return info.param == Kernel::kWgmma ? "wgmma" : "mma_sync"; });

// One sequence, tokens first..first+T-1, shuffled distinct blocks.
Fixture chunk_fixture(Layout L, int first, int T, uint64_t seed) {
  std::vector<int32_t> pos, seq;
  append_run(pos, seq, 0, first, T);
  return Fixture(L, 1, (first + T) / L.B + 1, pos, seq, seed);
}

TEST_P(CudaBf16AttentionPrefill, GptOss2048FromDepth0) {
  const Fixture f = chunk_fixture({}, 0, 2048, 100);
  for (int window : {0, 128}) expect_match(f, window, 101, "T=2048 at depth 0");
}

TEST_P(CudaBf16AttentionPrefill, GptOss2048OnAPrefix) {
  const Fixture f = chunk_fixture({}, 3000, 2048, 110);
  for (int window : {0, 128}) expect_match(f, window, 111, "T=2048 at depth 3000");
}

TEST_P(CudaBf16AttentionPrefill, OddTokenCounts) {
  for (int T : {1, 37, 129})
    for (int first : {0, 61, 500}) {
      const Fixture f = chunk_fixture({}, first, T, 120 + T + first);
      for (int window : {0, 128}) expect_match(f, window, 121 + T, "odd T");
    }
}

// A 129-token chunk at 1000, a decode token at 77, a 37-token prompt from 0 and a 16-token chunk
// at 300, in one call (sequence rows not in call order); full layers (shuffled blocks) and
// sliding layers (rings sized like runtime/kv_cache.cpp: window + 129 tokens + 1 block).
TEST_P(CudaBf16AttentionPrefill, SeveralSequencesInOneCall) {
  const Layout L;
  std::vector<int32_t> pos, seq;
  append_run(pos, seq, 2, 1000, 129);
  append_run(pos, seq, 0, 77, 1);
  append_run(pos, seq, 3, 0, 37);
  append_run(pos, seq, 1, 300, 16);
  const int max_blocks = 1129 / L.B + 1, ring = (129 + 128 - 1 + L.B - 1) / L.B + 1;
  expect_match(Fixture(L, 4, max_blocks, pos, seq, 130), 0, 131, "four sequences, full");
  const Fixture rings(L, 4, max_blocks, ring_table(4, max_blocks, ring), 4 * ring, pos, seq, 132);
  expect_match(rings, 128, 133, "four sequences, rings");
}

// Chunked prefill on a sliding layer: consecutive chunks of one sequence (each chunk's window
// reaches into the previous chunks) over a ring, the block size not dividing the window.
TEST_P(CudaBf16AttentionPrefill, WindowChunksOverRing) {
  const Layout L{.H = 64, .Hkv = 8, .Dh = 64, .B = 16};
  const int chunk = 100, ring = (chunk + 128 - 1 + L.B - 1) / L.B + 1, max_blocks = 1000 / L.B + 1;
  for (int first = 0; first + chunk <= 1000; first += chunk) {
    std::vector<int32_t> pos, seq;
    append_run(pos, seq, 0, first, chunk);
    const Fixture f(L, 1, max_blocks, ring_table(1, max_blocks, ring), ring, pos, seq, 140 + first);
    expect_match(f, 128, 141 + first, "ring chunk");
  }
}

// The tiny fixtures' head counts (tests/fixtures/models: 16/2, 6/3, 4/2) and one kv head per q
// head, with head_dim 64, an odd block size and their small windows.
TEST_P(CudaBf16AttentionPrefill, TinyHeadGroups) {
  for (auto [H, Hkv] : {std::pair{16, 2}, {6, 3}, {4, 2}, {5, 5}}) {
    const Layout L{.H = H, .Hkv = Hkv, .Dh = 64, .B = 5};
    std::vector<int32_t> pos, seq;
    append_run(pos, seq, 1, 0, 20);
    append_run(pos, seq, 0, 33, 150);
    const Fixture f(L, 2, 200 / L.B, pos, seq, 150 + H);
    for (int window : {0, 8}) {
      const auto [gpu, cpu] = run_attention(f, window, 151 + H, prefill());
      EXPECT_LT(nmse(gpu, cpu), kAttentionNmse) << "H=" << H << " Hkv=" << Hkv << " window " << window;
      EXPECT_GT(nmse(corrupted(gpu), cpu), kAttentionNmse) << "the check must catch a corrupted output";
    }
  }
}

// Cache blocks of 128 keys (two tiles per block) and of 64.
TEST_P(CudaBf16AttentionPrefill, LargeCacheBlocks) {
  for (int B : {64, 128}) {
    const Layout L{.H = 64, .Hkv = 8, .Dh = 64, .B = B};
    std::vector<int32_t> pos, seq;
    append_run(pos, seq, 0, 300, 200);
    const Fixture f(L, 1, 500 / B + 1, pos, seq, 180 + B);
    for (int window : {0, 128}) expect_match(f, window, 181 + B, "large blocks");
  }
}

// An FP8 cache (--kv-cache-dtype fp8): the K/V codes widened to BF16 in shared memory, the scales
// applied to the scores and the output. A 2048-token chunk on a prefix (aligned blocks), odd T on
// an odd block size (unaligned loads), several sequences.
TEST_P(CudaBf16AttentionPrefill, Fp8Cache) {
  Fixture big = chunk_fixture({}, 3000, 2048, 190);
  big.to_fp8(2.0f / 300.0f, 2.0f / 150.0f);
  for (int window : {0, 128}) expect_match(big, window, 191, "fp8, T=2048 at depth 3000");
  const Layout L{.H = 16, .Hkv = 2, .Dh = 64, .B = 5};
  std::vector<int32_t> pos, seq;
  append_run(pos, seq, 1, 0, 37);
  append_run(pos, seq, 0, 61, 129);
  Fixture odd(L, 2, 200 / L.B, pos, seq, 192);
  odd.to_fp8(0.02f, 0.003f);
  for (int window : {0, 8}) {
    const auto [gpu, cpu] = run_attention(odd, window, 193, prefill());
    EXPECT_LT(nmse(gpu, cpu), kAttentionNmse) << "fp8, odd blocks, window " << window;
    EXPECT_GT(nmse(corrupted(gpu), cpu), kAttentionNmse) << "the check must catch a corrupted output";
  }
}

// Tokens of two sequences interleaved: every token is its own query tile, more tiles than the
// launcher's grid (which assumes each sequence's tokens are contiguous), so blocks loop.
TEST_P(CudaBf16AttentionPrefill, InterleavedSequences) {
  std::vector<int32_t> pos, seq;
  for (int i = 0; i < 60; ++i) pos.push_back(200 + i / 2), seq.push_back(i % 2);
  const Fixture f({}, 2, 260 / 16 + 1, pos, seq, 160);
  for (int window : {0, 128}) expect_match(f, window, 161, "interleaved");
}

// ops::attention routes by tokens per sequence (heuristics::kAttentionPrefillMinTokensPerSeq): the
// decode kernel below the bound, the prefill kernel from it; both sides match, each on its route.
TEST(CudaBf16AttentionPrefillDispatch, BothSides) {
  MX_REQUIRE_CUDA();
  constexpr int kMin = int(heuristics::kAttentionPrefillMinTokensPerSeq);
  bool wgmma = false;
#ifdef MXSERVE_HAVE_CUDA
  wgmma = cuda::attention_prefill_wgmma_available();
#endif
  const char* const kPrefillRoute = wgmma ? "attention:sm90_bf16_attention_prefill" : "attention:bf16_attention_prefill";
  std::vector<std::string> routes;  // of the last GPU call
  const AttentionFn dispatch = [&routes](const ops::AttentionArgs& a) {
    ops::RouteRecorder rec(test::ctx());
    const Status st = ops::attention(test::ctx(), a);
    routes = cuda_routes(rec);
    return st;
  };
  const auto expect_on = [&](const Fixture& f, int window, uint64_t seed, const char* route, const std::string& what) {
    const auto [gpu, cpu] = run_attention(f, window, seed, dispatch);
    EXPECT_EQ(routes, std::vector<std::string>{route}) << what << ", window " << window;
    EXPECT_LT(nmse(gpu, cpu), kAttentionNmse) << what << ", window " << window;
  };
  for (int T : {kMin - 1, kMin, kMin + 1, 300}) {
    const Fixture f = chunk_fixture({}, 250, T, 170 + T);
    const char* route = T >= kMin ? kPrefillRoute : "attention:bf16_attention_decode";
    for (int window : {0, 128}) expect_on(f, window, 171 + T, route, "ops::attention T=" + std::to_string(T));
  }
  // Four sequences of kMin - 1 tokens: more than kMin in the call, fewer per sequence: decode.
  std::vector<int32_t> pos, seq;
  for (int s = 0; s < 4; ++s) append_run(pos, seq, s, 100 * s, kMin - 1);
  const Fixture four({}, 4, (300 + kMin) / 16 + 1, pos, seq, 175);
  for (int window : {0, 128}) expect_on(four, window, 176, "attention:bf16_attention_decode", "four sequences");
}

}  // namespace
}  // namespace mx::test
