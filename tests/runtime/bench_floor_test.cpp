// The decode floor of `mxserve bench`: bytes read per step for gpt-oss-120b / 20b at batch 1
// against DESIGN.md's memory budget (120b: 1.90 GB experts + 1.91 GB attention + 1.16 GB lm_head).
#include <gtest/gtest.h>

#include "model/synthetic.h"
#include "runtime/bench.h"

namespace mx {
namespace {

TEST(BenchFloor, DecodeBytesMatchTheDesignBudget) {
  auto c120 = synthetic_config("synthetic:120b");
  ASSERT_TRUE(c120.ok()) << c120.status().message();
  EXPECT_NEAR(decode_step_bytes(*c120, 1, 0) / 1e9, 4.97, 0.05);
  // KV: 18 full layers read every position, 18 sliding layers at most 128; 2 KB per position.
  const double kv = decode_step_bytes(*c120, 1, 32767) - decode_step_bytes(*c120, 1, 0);
  EXPECT_NEAR(kv, (18.0 * 32767 + 18.0 * 127) * 2048, 1.0);
  auto c20 = synthetic_config("synthetic:20b");
  ASSERT_TRUE(c20.ok());
  EXPECT_NEAR(decode_step_bytes(*c20, 1, 0) / 1e9, 3.6, 0.15);
  // --mxfp4-layers all: the dense weights at 17/32 bytes per element (DESIGN.md: ~2.7 GB for 120b).
  const Mxfp4Layers all{.qkv = true, .o = true, .router = true, .lm_head = true, .embed = true};
  EXPECT_NEAR(decode_step_bytes(*c120, 1, 0, all) / 1e9, 1.90 + (1.91 + 1.16) * 17.0 / 64.0, 0.05);
  const Mxfp4Layers qkv_only{.qkv = true};
  EXPECT_NEAR(decode_step_bytes(*c120, 1, 0) - decode_step_bytes(*c120, 1, 0, qkv_only),
              36.0 * 5120 * 2880 * (2.0 - 17.0 / 32.0), 1.0);
  // A large batch reads (nearly) every expert once.
  const double all_experts = decode_step_bytes(*c20, 1000, 0);
  EXPECT_GT(all_experts, decode_step_bytes(*c20, 8, 0));
}

// --kv-cache-dtype fp8: the KV part of a step is read at 1 byte per element instead of 2; the
// weights are unchanged.
TEST(BenchFloor, Fp8KvCacheHalvesTheKvBytes) {
  const ModelConfig c = synthetic_config("synthetic:120b").value();
  const Mxfp4Layers none;
  auto kv_bytes = [&](KvCacheDtype kv, int batch) {
    return decode_step_bytes(c, batch, 32767, none, kv) - decode_step_bytes(c, batch, 0, none, kv);
  };
  EXPECT_NEAR(kv_bytes(KvCacheDtype::Fp8, 1), (18.0 * 32767 + 18.0 * 127) * 1024, 1.0);
  EXPECT_NEAR(kv_bytes(KvCacheDtype::Fp8, 1), kv_bytes(KvCacheDtype::Auto, 1) / 2, 1.0);
  EXPECT_NEAR(kv_bytes(KvCacheDtype::Fp8, 8), kv_bytes(KvCacheDtype::Auto, 8) / 2, 8.0);
  // At depth 0 each of the 36 layers reads one position: 36 · 1024 bytes fewer, nothing else.
  EXPECT_NEAR(decode_step_bytes(c, 1, 0) - decode_step_bytes(c, 1, 0, none, KvCacheDtype::Fp8), 36.0 * 1024, 1.0);
}

}  // namespace
}  // namespace mx
