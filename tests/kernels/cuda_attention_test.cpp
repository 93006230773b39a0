// CUDA qkv_rope_cache and the split-K decode attention kernel against the CPU reference over a
// shuffled paged cache: depths 0..32768, the 128 window, odd head groups, a prefill chunk.
#include <gtest/gtest.h>

#include <cmath>

#include "cuda_attention_fixture.h"
#ifdef MXSERVE_HAVE_CUDA
#include "kernels/cuda/cuda_ops.h"
#endif

namespace mx::test {
namespace {

// The split-K decode kernel (cuda::attention_decode) on every shape, whatever dispatch.cpp routes.
#ifdef MXSERVE_HAVE_CUDA
const AttentionFn kDecode = [](const ops::AttentionArgs& a) { return cuda::attention_decode(a); };
#else
const AttentionFn kDecode = [](const ops::AttentionArgs& a) { return ops::attention(a); };
#endif

std::pair<std::vector<float>, std::vector<float>> run_attention(const Fixture& f, int window, uint64_t seed) {
  return run_attention(f, window, seed, kDecode);
}

TEST(CudaAttention, DecodeAtDepthsFullAndWindowed) {
  MX_REQUIRE_CUDA();
  for (int depth : {0, 1, 127, 128, 1000, 4096, 32768}) {
    const int max_blocks = depth / 16 + 2;
    Fixture f({}, 1, max_blocks, {depth}, {0}, 40 + depth);
    for (int window : {0, 128}) {
      const auto [gpu, cpu] = run_attention(f, window, 50 + depth);
      EXPECT_LT(nmse(gpu, cpu), kAttentionNmse) << "depth " << depth << " window " << window;
    }
  }
}

TEST(CudaAttention, BatchOfSequencesAndPrefillChunk) {
  MX_REQUIRE_CUDA();
  // Three sequences decoding at their own positions, then a 40-token chunk of sequence 1 at 200..239.
  Fixture decode({}, 3, 40, {5, 300, 629}, {2, 0, 1}, 60);
  for (int window : {0, 128}) {
    const auto [gpu, cpu] = run_attention(decode, window, 61);
    EXPECT_LT(nmse(gpu, cpu), kAttentionNmse) << "batch, window " << window;
  }
  std::vector<int32_t> pos(40), seq(40, 1);
  std::iota(pos.begin(), pos.end(), 200);
  Fixture prefill({}, 2, 20, pos, seq, 62);
  for (int window : {0, 128}) {
    const auto [gpu, cpu] = run_attention(prefill, window, 63);
    EXPECT_LT(nmse(gpu, cpu), kAttentionNmse) << "prefill, window " << window;
  }
}

TEST(CudaAttention, OddHeadGroupsAndBlockSize) {
  MX_REQUIRE_CUDA();
  Fixture f({.H = 6, .Hkv = 2, .Dh = 64, .B = 5}, 2, 50, {0, 3, 77, 241}, {0, 1, 1, 0}, 70);
  for (int window : {0, 10}) {
    const auto [gpu, cpu] = run_attention(f, window, 71);
    EXPECT_LT(nmse(gpu, cpu), kAttentionNmse) << "window " << window;
    EXPECT_GT(nmse(corrupted(gpu), cpu), kAttentionNmse) << "the check must catch a corrupted output";
  }
}

TEST(CudaAttention, RopeCacheMatchesReference) {
  MX_REQUIRE_CUDA();
  const Layout L;
  const std::vector<int32_t> pos = {0, 1, 4095, 4096, 131071, 17}, seq = {0, 0, 1, 1, 2, 2};
  std::vector<int32_t> table(size_t(3) * (131072 / 16));  // a 61-block pool for huge positions
  for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t(i % 61);
  Fixture f(L, 3, 131072 / 16, table, 61, pos, seq, 80);
  std::vector<float> inv(size_t(L.Dh / 2));
  for (int i = 0; i < L.Dh / 2; ++i)
    inv[size_t(i)] = std::pow(150000.0f, -2.0f * float(i) / float(L.Dh)) / (i >= 18 ? 32.0f : 1.0f);
  Mirror inv_freq = raw(inv, DType::F32, {L.Dh / 2});
  const int64_t T = int64_t(pos.size());
  Mirror qkv = act(random_floats(size_t(T * L.width()), 81, -2.0f, 2.0f), {T, L.width()});
  for (bool gpu : {true, false}) {
    const Status st = ops::qkv_rope_cache(
        {.qkv = gpu ? qkv.gpu : qkv.cpu, .n_heads = L.H, .n_kv_heads = L.Hkv, .head_dim = L.Dh,
         .rope = {.inv_freq = gpu ? inv_freq.gpu : inv_freq.cpu, .concentration = 1.3465736f},
         .batch = f.batch(gpu), .cache = f.cache(gpu)});
    ASSERT_TRUE(st.ok()) << st.message();
  }
  // One bf16 rounding of a 2-term FP32 expression (the GPU may fuse it into an fma): 1 bf16 ulp.
  EXPECT_TRUE(all_close(download(qkv.gpu), host_floats(qkv), 1e-3, 8e-3));
  EXPECT_TRUE(all_close(download(f.k.gpu), host_floats(f.k), 1e-3, 8e-3));
  EXPECT_EQ(download(f.v.gpu), host_floats(f.v));
}

}  // namespace
}  // namespace mx::test
