// Paged KV cache bookkeeping: block reservation and release, and the sliding-layer rings
// (small pools, logical block i -> ring[i mod R], freed with the sequence). --kv-cache-dtype fp8:
// the flag values, one byte per element in every layer, the per-layer scale rows, and the memory
// budget (kv_layout) that sizes the pool from free memory.
#include <gtest/gtest.h>

#include <set>

#include "model/synthetic.h"
#include "runtime/kv_cache.h"
#include "runtime/scheduler.h"
#include "test_context.h"

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

TEST(KvCacheDtype, ParsesAutoAndFp8AndListsThemOnError) {
  EXPECT_EQ(parse_kv_cache_dtype("auto").value(), KvCacheDtype::Auto);
  EXPECT_EQ(parse_kv_cache_dtype("fp8").value(), KvCacheDtype::Fp8);
  for (const char* bad : {"fp16", "FP8", "", "fp8_e5m2", "bf16"}) {
    auto r = parse_kv_cache_dtype(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("unknown value '" + std::string(bad) + "' (use auto or fp8)"),
              std::string::npos)
        << r.status().message();
  }
}

TEST(KvCacheDtype, ParsesOneOrTwoPositiveScales) {
  EXPECT_EQ(parse_kv_scales("0.5").value(), (std::array<float, 2>{0.5f, 0.5f}));
  EXPECT_EQ(parse_kv_scales("0.5,0.25").value(), (std::array<float, 2>{0.5f, 0.25f}));
  EXPECT_EQ(parse_kv_scales("2e-3,7").value(), (std::array<float, 2>{2e-3f, 7.0f}));
  for (const char* bad : {"", "0", "-1", "abc", "1,", ",1", "1,2,3", "inf", "nan", "1e-60", "0.5x", "1, 2"}) {
    auto r = parse_kv_scales(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "' was accepted";
    if (!r.ok()) EXPECT_NE(r.status().message().find("positive finite"), std::string::npos) << r.status().message();
  }
  // Finite but outside ops::kMinKvScale..kMaxKvScale: 1 / scale must stay finite, and the decode
  // kernel's FP16 Q is prescaled by the K scale.
  EXPECT_TRUE(parse_kv_scales("1e-20,100").ok());
  for (const char* bad : {"1e-25", "200", "0.5,1000", "1e-30,1"}) {
    auto r = parse_kv_scales(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "' was accepted";
    if (!r.ok()) EXPECT_NE(r.status().message().find("is outside"), std::string::npos) << r.status().message();
  }
}

// Sliding layers in a window pool of their own, as the engine makes it: both pools are FP8.
Result<KvCache> fp8_cache(const ModelConfig& c, std::optional<std::array<float, 2>> fixed = std::nullopt) {
  return KvCache::create(c, Device::CPU,
                         {.num_blocks = 8, .block_size = 16, .sliding = SlidingLayers::Window, .window_blocks = 4,
                          .pad = PadBlock::Reserved, .dtype = KvCacheDtype::Fp8, .fixed_scales = fixed});
}

TEST(KvCache, Fp8StoresEveryLayerInOneByteWithItsOwnScaleRow) {
  const ModelConfig c = tiny_config();
  auto kv = fp8_cache(c);
  ASSERT_TRUE(kv.ok()) << kv.status().message();
  ASSERT_EQ(kv->layers().size(), size_t(c.num_hidden_layers));
  ASSERT_GT(c.window_of_layer(0), 0);  // layer 0 lives in the window pool
  EXPECT_EQ(kv->layers()[0].k.dim(0), 4 + 1);
  EXPECT_EQ(kv->layers()[1].k.dim(0), 8 + 1);
  for (size_t l = 0; l < kv->layers().size(); ++l) {
    const ops::KvLayer& layer = kv->layers()[l];
    EXPECT_TRUE(layer.fp8()) << l;
    EXPECT_EQ(layer.v.dtype, DType::F8_E4M3) << l;
    EXPECT_EQ(layer.k.nbytes(), size_t(layer.k.numel())) << l;
    ASSERT_EQ(layer.scales.numel(), 2) << l;
    EXPECT_EQ(layer.scales.dtype, DType::F32);
    EXPECT_EQ(layer.scales.ptr<float>(), kv->layers()[0].scales.ptr<float>() + 2 * l) << "row " << l;
  }
  EXPECT_TRUE(kv->scales_pending());
  EXPECT_FALSE(kv->scales_fixed());
  EXPECT_EQ(kv->read_scales().value(), std::vector<float>(4, 1.0f));
  ASSERT_TRUE(kv->set_scales(0.5f, 0.25f).ok());
  EXPECT_EQ(kv->read_scales().value(), (std::vector<float>{0.5f, 0.25f, 0.5f, 0.25f}));
  EXPECT_FALSE(kv->set_scales(0.0f, 1.0f).ok());
  kv->mark_calibrated();
  EXPECT_FALSE(kv->scales_pending());
}

TEST(KvCache, FixedScalesNeedFp8AndAreNotCalibrated) {
  const ModelConfig c = tiny_config();
  auto kv = fp8_cache(c, std::array<float, 2>{0.125f, 2.0f});
  ASSERT_TRUE(kv.ok()) << kv.status().message();
  EXPECT_FALSE(kv->scales_pending());
  EXPECT_TRUE(kv->scales_fixed());
  EXPECT_EQ(kv->read_scales().value(), (std::vector<float>{0.125f, 2.0f, 0.125f, 2.0f}));
  auto wrong = KvCache::create(c, Device::CPU, {.num_blocks = 8, .fixed_scales = std::array<float, 2>{1.0f, 1.0f}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("need --kv-cache-dtype fp8"), std::string::npos) << wrong.status().message();
  auto act = KvCache::create(c, Device::CPU, 8, 16);  // auto: f32 on the CPU, no scales
  ASSERT_TRUE(act.ok());
  EXPECT_EQ(act->layers()[0].k.dtype, DType::F32);
  EXPECT_TRUE(act->layers()[0].scales.empty());
  EXPECT_FALSE(act->scales_pending());
  EXPECT_FALSE(act->read_scales().ok());
}

// bench's random context: finite, non-negative E4M3 codes only (0x7f and 0xff are NaN), scales 1.
TEST(KvCache, Fp8RandomFillWritesFiniteCodesAndUnitScales) {
  auto kv = fp8_cache(tiny_config());
  ASSERT_TRUE(kv.ok());
  ASSERT_TRUE(kv->set_scales(3.0f, 3.0f).ok());
  ASSERT_TRUE(kv->fill_random(test::ctx(), 5).ok());
  std::set<uint8_t> seen;
  for (const ops::KvLayer& layer : kv->layers())
    for (const Tensor& t : {layer.k, layer.v}) {
      const uint8_t* b = t.ptr<const uint8_t>();
      for (int64_t i = 0; i < t.numel(); ++i) {
        ASSERT_LE(b[i], 0x3f) << "byte " << i;
        seen.insert(b[i]);
      }
    }
  EXPECT_EQ(seen.size(), 0x40u);  // the whole range is drawn
  EXPECT_FALSE(kv->scales_pending());
  EXPECT_EQ(kv->read_scales().value(), std::vector<float>(4, 1.0f));
}

// The memory budget of the engine's cache: fp8 is 1 byte per element, so a block costs half the
// bf16 bytes on CUDA (twice the tokens from the same memory) and a quarter of the f32 bytes on the
// CPU. gpt-oss-120b: 36 layers (18 sliding), 8 KV heads of 64, blocks of 16.
TEST(KvLayout, Fp8HalvesBf16AndQuartersF32) {
  const ModelConfig c = synthetic_config("synthetic:120b").value();
  for (const PrefixCaching prefix : {PrefixCaching::Off, PrefixCaching::On}) {
    EngineArgs a{.max_num_seqs = 64, .kv_block_size = 16, .prefix_caching = prefix};
    const KvLayout bf16 = kv_layout(c, a, Device::CUDA), f32 = kv_layout(c, a, Device::CPU);
    a.kv_cache_dtype = KvCacheDtype::Fp8;
    const KvLayout fp8 = kv_layout(c, a, Device::CUDA), fp8_cpu = kv_layout(c, a, Device::CPU);
    const size_t layers = prefix == PrefixCaching::Off ? 18 : 36;  // without prefix caching: full layers only
    EXPECT_EQ(fp8.bytes_per_block, layers * 2 * 16 * 512);
    EXPECT_EQ(bf16.bytes_per_block, 2 * fp8.bytes_per_block);
    EXPECT_EQ(f32.bytes_per_block, 4 * fp8.bytes_per_block);
    EXPECT_EQ(fp8_cpu.bytes_per_block, fp8.bytes_per_block);
    EXPECT_EQ(bf16.window_pool_bytes, 2 * fp8.window_pool_bytes);
    EXPECT_EQ(f32.window_pool_bytes, 4 * fp8.window_pool_bytes);
    EXPECT_EQ(fp8.window_pool_blocks, bf16.window_pool_blocks);
    EXPECT_EQ(fp8.window_pool_bytes > 0, prefix == PrefixCaching::Off);
  }
}

}  // namespace
}  // namespace mx
