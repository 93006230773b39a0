// Paged KV cache bookkeeping: block reservation and release, and the sliding-layer rings
// (small pools, logical block i -> ring[i mod R], freed with the sequence).
#include <gtest/gtest.h>

#include <set>

#include "model/synthetic.h"
#include "runtime/kv_cache.h"

namespace mx {
namespace {

ModelConfig tiny_config() { return synthetic_config("synthetic:tiny").value(); }  // window 128, 2 layers

TEST(KvCache, ReservesAndReleasesBlocks) {
  auto kv = KvCache::create(tiny_config(), Device::CPU, 10, 16);
  ASSERT_TRUE(kv.ok());
  std::vector<int32_t> a, b;
  ASSERT_TRUE(kv->reserve(a, 33).ok());  // 3 blocks
  EXPECT_EQ(a.size(), 3u);
  ASSERT_TRUE(kv->reserve(a, 48).ok());  // still 3
  EXPECT_EQ(a.size(), 3u);
  EXPECT_FALSE(kv->reserve(b, 16 * 8).ok());  // 8 more do not fit in the 7 left
  EXPECT_TRUE(b.empty());                      // and a failed reserve changes nothing
  kv->release(a);
  EXPECT_EQ(kv->free_blocks(), 10);
  EXPECT_EQ(kv->sliding_table(b), b);  // no rings: the same table
}

TEST(KvCache, SlidingLayersUseRings) {
  const ModelConfig c = tiny_config();
  auto kv = KvCache::create(c, Device::CPU,
                            {.num_blocks = 64, .block_size = 16, .sliding = SlidingLayers::Ring, .max_seqs = 2,
                             .max_call_tokens = 1});
  ASSERT_TRUE(kv.ok()) << kv.status().message();
  // Ring: 1 token + 127 earlier in the window = 128 positions -> 8 blocks, +1 for alignment.
  EXPECT_EQ(kv->layers()[0].k.dim(0), 2 * 9);  // layer 0 is sliding: 2 rings of 9 blocks
  EXPECT_EQ(kv->layers()[1].k.dim(0), 64);     // layer 1 is full
  std::vector<int32_t> a, b, c3;
  ASSERT_TRUE(kv->reserve(a, 16 * 20).ok());
  ASSERT_TRUE(kv->reserve(b, 16).ok());
  EXPECT_FALSE(kv->reserve(c3, 16).ok());  // no third ring
  const auto sa = kv->sliding_table(a), sb = kv->sliding_table(b);
  ASSERT_EQ(sa.size(), a.size());
  for (size_t i = 0; i < sa.size(); ++i) EXPECT_EQ(sa[i], sa[i % 9]) << i;
  std::set<int32_t> ring_a(sa.begin(), sa.end()), ring_b(sb.begin(), sb.end());
  EXPECT_EQ(ring_a.size(), 9u);
  for (int32_t x : ring_b) EXPECT_FALSE(ring_a.count(x)) << "rings overlap at block " << x;
  kv->release(b);
  EXPECT_TRUE(kv->reserve(c3, 16).ok());  // b's ring was returned
}

}  // namespace
}  // namespace mx
