// CUDA qkv_rope_cache, qkv_projection (norm + qkv GEMV + RoPE + cache write; its routes checked)
// and the split-K decode attention kernel (called directly) against the CPU reference over a
// shuffled paged cache: depths 0..32768, the 128 window and windows that are no multiple of the
// 16-key tile, odd head groups, prefill chunks, block tables far longer than the sequences.
// Suites by kernel: CudaBf16AttentionDecode, CudaBf16QkvRopeCache, CudaBf16KvScales, and
// CudaBf16Bf16wGemv for qkv_projection (the GEMVs' RoPE + cache epilogue).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>

#include "cuda_attention_fixture.h"
#ifdef MXSERVE_HAVE_CUDA
#include "kernels/cuda/cuda_ops.h"
#include "test_context.h"
#endif

namespace mx::test {
namespace {

// The split-K decode kernel (cuda::attention_decode) on every shape, whatever dispatch.cpp routes.
#ifdef MXSERVE_HAVE_CUDA
const AttentionFn kDecode = [](const ops::AttentionArgs& a) { return cuda::attention_decode(*test::ctx().cuda(), a); };
#else
const AttentionFn kDecode = [](const ops::AttentionArgs& a) { return ops::attention(test::ctx(), a); };
#endif

std::pair<std::vector<float>, std::vector<float>> run_attention(const Fixture& f, int window, uint64_t seed) {
  return run_attention(f, window, seed, kDecode);
}

TEST(CudaBf16AttentionDecode, DecodeAtDepthsFullAndWindowed) {
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

// Long key ranges per block: a 40-token chunk (40 x 8 kv heads fill the GPU: one split, so each
// warp streams ~47 tiles through its ring), and windows that are no multiple of the 16-key tile
// over several splits.
TEST(CudaBf16AttentionDecode, DecodeLongRangesPerBlock) {
  MX_REQUIRE_CUDA();
  std::vector<int32_t> pos, seq;
  append_run(pos, seq, 0, 3000, 40);
  Fixture chunk({}, 1, 3040 / 16 + 1, pos, seq, 90);
  for (int window : {0, 1000}) {
    const auto [gpu, cpu] = run_attention(chunk, window, 91);
    EXPECT_LT(nmse(gpu, cpu), kAttentionNmse) << "chunk, window " << window;
  }
  Fixture deep({}, 1, 20000 / 16 + 2, {20000}, {0}, 92);
  for (int window : {1000, 4999}) {
    const auto [gpu, cpu] = run_attention(deep, window, 93);
    EXPECT_LT(nmse(gpu, cpu), kAttentionNmse) << "depth 20000, window " << window;
  }
}

// A block table far longer than the sequences (serving sizes it for the longest context): the grid
// has the splits of the table's capacity, a token's range uses only its share of them (one split
// at depth 0: the output with the sink folded in).
TEST(CudaBf16AttentionDecode, DecodeWithRoomyBlockTable) {
  MX_REQUIRE_CUDA();
  for (int depth : {0, 100, 1000, 5000}) {
    Fixture one({}, 1, 8192 / 16, {depth}, {0}, 100 + depth);
    Fixture two({}, 2, 8192 / 16, {depth / 3, depth}, {1, 0}, 101 + depth);
    for (int window : {0, 128}) {
      auto [gpu, cpu] = run_attention(one, window, 102 + depth);
      EXPECT_LT(nmse(gpu, cpu), kAttentionNmse) << "depth " << depth << " window " << window;
      std::tie(gpu, cpu) = run_attention(two, window, 103 + depth);
      EXPECT_LT(nmse(gpu, cpu), kAttentionNmse) << "two sequences, depth " << depth << " window " << window;
    }
  }
}

TEST(CudaBf16AttentionDecode, BatchOfSequencesAndPrefillChunk) {
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

// 6 q / 2 kv heads in blocks of 5 (two sequences, four tokens), windows 0 and 10: the bound holds
// and would catch a corrupted output. `fp8` makes the cache E4M3 with the given K, V scales.
void expect_odd_heads_match(uint64_t seed, std::optional<std::pair<float, float>> fp8 = std::nullopt) {
  Fixture f({.H = 6, .Hkv = 2, .Dh = 64, .B = 5}, 2, 50, {0, 3, 77, 241}, {0, 1, 1, 0}, seed);
  if (fp8) f.to_fp8(fp8->first, fp8->second);
  for (int window : {0, 10}) {
    const auto [gpu, cpu] = run_attention(f, window, seed + 1);
    EXPECT_LT(nmse(gpu, cpu), kAttentionNmse) << (fp8 ? "fp8, " : "") << "window " << window;
    EXPECT_GT(nmse(corrupted(gpu), cpu), kAttentionNmse) << "the check must catch a corrupted output";
  }
}

TEST(CudaBf16AttentionDecode, OddHeadGroupsAndBlockSize) {
  MX_REQUIRE_CUDA();
  expect_odd_heads_match(70);
}

// The tiny-gqa8 fixture's calls (16 q / 2 kv heads, window 8 below the 16-key tile, a two-block
// ring on the sliding layer): its 20-token prompt in one call and in 7-token chunks, then single
// tokens.
TEST(CudaBf16AttentionDecode, TinyGqa8Calls) {
  MX_REQUIRE_CUDA();
  const Layout L{.H = 16, .Hkv = 2, .Dh = 64, .B = 16};
  const int max_blocks = 2;
  for (int chunk : {20, 7, 1}) {
    const int ring = (chunk + 8 - 1 + L.B - 1) / L.B + 1;
    for (int first = chunk == 20 ? 0 : 14; first + chunk <= 30; first += chunk) {
      std::vector<int32_t> pos, seq;
      append_run(pos, seq, 0, first, chunk);
      for (int window : {0, 8}) {
        const Fixture f(L, 1, max_blocks, window ? ring_table(1, max_blocks, ring) : shuffled_table(1, max_blocks, 7),
                        window ? ring : max_blocks + 3, pos, seq, 180 + first);
        const auto [gpu, cpu] = run_attention(f, window, 181 + first);
        EXPECT_LT(nmse(gpu, cpu), kAttentionNmse) << "chunk " << chunk << " at " << first << ", window " << window;
      }
    }
  }
}

// qkv_rope_cache of T random qkv rows into f's cache on both backends (YaRN-like frequencies:
// the high ones divided by 32); returns the rotated rows.
Mirror rope_cache_both(const Fixture& f, int64_t T, uint64_t seed) {
  const Layout& L = f.L;
  std::vector<float> inv(size_t(L.Dh / 2));
  for (int i = 0; i < L.Dh / 2; ++i)
    inv[size_t(i)] = std::pow(150000.0f, -2.0f * float(i) / float(L.Dh)) / (i >= 18 ? 32.0f : 1.0f);
  Mirror inv_freq = raw(inv, DType::F32, {L.Dh / 2});
  Mirror qkv = act(random_floats(size_t(T * L.width()), seed, -2.0f, 2.0f), {T, L.width()});
  for (bool gpu : {true, false}) {
    const Status st = ops::qkv_rope_cache(test::ctx(), 
        {.qkv = gpu ? qkv.gpu : qkv.cpu, .n_heads = L.H, .n_kv_heads = L.Hkv, .head_dim = L.Dh,
         .rope = {.inv_freq = gpu ? inv_freq.gpu : inv_freq.cpu, .concentration = 1.3465736f},
         .batch = f.batch(gpu), .cache = f.cache(gpu)});
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return qkv;
}

TEST(CudaBf16QkvRopeCache, RopeCacheMatchesReference) {
  MX_REQUIRE_CUDA();
  const Layout L;
  const std::vector<int32_t> pos = {0, 1, 4095, 4096, 131071, 17}, seq = {0, 0, 1, 1, 2, 2};
  std::vector<int32_t> table(size_t(3) * (131072 / 16));  // a 61-block pool for huge positions
  for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t(i % 61);
  Fixture f(L, 3, 131072 / 16, table, 61, pos, seq, 80);
  const Mirror qkv = rope_cache_both(f, int64_t(pos.size()), 81);
  // One bf16 rounding of a 2-term FP32 expression (the GPU may fuse it into an fma): 1 bf16 ulp.
  EXPECT_TRUE(all_close(download(qkv.gpu), host_floats(qkv), 1e-3, 8e-3));
  EXPECT_TRUE(all_close(download(f.k.gpu), host_floats(f.k), 1e-3, 8e-3));
  EXPECT_EQ(download(f.v.gpu), host_floats(f.v));
}

// Layouts other than gpt-oss's: a head count that leaves warps of the last block idle, head
// dimensions with several rotation pairs per lane (one partial), the largest supported (256) and
// the smallest (2), and a decode-sized batch of 64 tokens over three sequences.
TEST(CudaBf16QkvRopeCache, RopeCacheOddLayoutsMatchReference) {
  MX_REQUIRE_CUDA();
  const Layout layouts[] = {{.H = 5, .Hkv = 1, .Dh = 160, .B = 16},
                            {.H = 4, .Hkv = 2, .Dh = 256, .B = 8},
                            {.H = 6, .Hkv = 3, .Dh = 2, .B = 16},
                            {}};
  uint64_t seed = 400;
  for (const Layout& L : layouts) {
    std::vector<int32_t> pos, seq;
    append_run(pos, seq, 0, 0, 30);
    append_run(pos, seq, 1, 97, 20);
    append_run(pos, seq, 2, 5000, 14);
    Fixture f(L, 3, 5100 / L.B + 1, pos, seq, seed += 10);
    const Mirror qkv = rope_cache_both(f, int64_t(pos.size()), seed + 1);
    EXPECT_TRUE(all_close(download(qkv.gpu), host_floats(qkv), 1e-3, 8e-3)) << "H=" << L.H << " Dh=" << L.Dh;
    EXPECT_TRUE(all_close(download(f.k.gpu), host_floats(f.k), 1e-3, 8e-3)) << "H=" << L.H << " Dh=" << L.Dh;
    EXPECT_EQ(download(f.v.gpu), host_floats(f.v)) << "H=" << L.H << " Dh=" << L.Dh;
  }
}

// FP8 cache (--kv-cache-dtype fp8): the decode kernel widens the E4M3 codes to BF16 exactly and
// applies the scales; the CPU reference reads code · scale. Same bound as BF16: the products are
// the same up to where the scale multiplies (scales far from 1 so that a kernel ignoring them fails).
TEST(CudaBf16AttentionDecode, DecodeOverFp8Cache) {
  MX_REQUIRE_CUDA();
  for (int depth : {0, 127, 1000, 32768}) {
    Fixture f({}, 1, depth / 16 + 2, {depth}, {0}, 240 + depth);
    f.to_fp8(2.0f / 300.0f, 2.0f / 200.0f);
    for (int window : {0, 128}) {
      const auto [gpu, cpu] = run_attention(f, window, 250 + depth);
      EXPECT_LT(nmse(gpu, cpu), kAttentionNmse) << "depth " << depth << " window " << window;
    }
  }
  Fixture batch({}, 3, 40, {5, 300, 629}, {2, 0, 1}, 260);
  batch.to_fp8(0.01f, 0.02f);
  const auto [gpu, cpu] = run_attention(batch, 0, 261);
  EXPECT_LT(nmse(gpu, cpu), kAttentionNmse) << "batch";
  expect_odd_heads_match(262, std::pair{0.03f, 0.005f});
}

// qkv_rope_cache into an FP8 cache: v codes identical (v is not rotated: the same bf16 values on
// both sides), k codes equal or one step apart (the GPU quantizes the BF16-rounded rotation).
TEST(CudaBf16QkvRopeCache, RopeCacheWritesFp8Codes) {
  MX_REQUIRE_CUDA();
  const std::vector<int32_t> pos = {0, 1, 4095, 4096, 70000, 17}, seq = {0, 0, 1, 1, 2, 2};
  Fixture f({}, 3, 70016 / 16, pooled_table(3, 70016 / 16, 61), 61, pos, seq, 270);
  f.to_fp8(2.0f / 250.0f, 2.0f / 350.0f);
  rope_cache_both(f, int64_t(pos.size()), 271);
  EXPECT_EQ(fp8_codes(f.v, true), fp8_codes(f.v, false));
  EXPECT_TRUE(fp8_codes_close(fp8_codes(f.k, true), fp8_codes(f.k, false)));
}

// kv_scales from a call's unrotated qkv: the same arithmetic on both backends over the same bf16
// values (up to the sum of two squares' contraction: 1e-6 relative).
TEST(CudaBf16KvScales, KvScalesMatchReference) {
  MX_REQUIRE_CUDA();
  for (const auto& [L, T] : {std::pair{Layout{}, int64_t(2048)}, std::pair{Layout{.H = 6, .Hkv = 2, .Dh = 10}, int64_t(3)}}) {
    Mirror qkv = act(random_floats(size_t(T * L.width()), 280 + T, -3.0f, 2.0f), {T, L.width()});
    Mirror scales = raw(std::vector<float>{0.0f, 0.0f}, DType::F32, {2});
    for (bool gpu : {true, false})
      ASSERT_TRUE(ops::kv_scales(test::ctx(), {.qkv = gpu ? qkv.gpu : qkv.cpu, .n_heads = L.H, .n_kv_heads = L.Hkv,
                                  .head_dim = L.Dh, .concentration = 1.25f, .scales = gpu ? scales.gpu : scales.cpu})
                      .ok());
    const std::vector<float> g = download(scales.gpu), c = host_floats(scales);
    EXPECT_TRUE(all_close(g, c, 1e-6, 0.0)) << g[0] << " " << c[0] << " " << g[1] << " " << c[1];
    EXPECT_GT(c[0], 1.25f * 2.0f * 2.0f / 448.0f) << "k: the pair norm's bound exceeds |x| <= 3 (times 1.25, 2x headroom)";
    EXPECT_LE(c[1], 2.0f * 3.0f / 448.0f);
  }
}

// qkv_projection: attention norm + qkv linear + RoPE + cache write; one GEMV kernel up to
// heuristics.h's GEMV bounds, linear -> qkv_rope_cache above (the routes checked,
// projection_routes). Checked three ways: the qkv row against the CPU reference
// (NMSE), the k and v the CPU wrote to the cache slots of the batch (NMSE), and the whole GPU
// cache against the unfused GPU ops on an identical cache (elementwise: a write to a wrong slot
// or head shows as a random value).
struct ProjCase {
  Layout L;
  int64_t D;
  std::vector<int32_t> pos, seq;
  bool norm;
  bool mxfp4 = false;  // the qkv weight in MXFP4 (--mxfp4-layers qkv): the MXFP4 GEMVs' epilogues
  bool fp8 = false;    // an FP8 cache (--kv-cache-dtype fp8)
};

struct ProjRun {
  std::vector<std::string> routes;  // the GPU qkv_projection's CUDA routes
  std::vector<float> qkv_gpu, qkv_cpu, qkv_unfused;
  std::vector<float> cache_gpu, cache_unfused;  // k then v, whole caches
  std::vector<float> slots_gpu, slots_cpu;      // k then v of the batch's slots
  std::vector<uint8_t> codes_gpu, codes_cpu, codes_unfused;  // FP8: k then v, whole caches
};

ProjRun run_projection(const ProjCase& c, uint64_t seed) {
  const Layout& L = c.L;
  const int S = *std::max_element(c.seq.begin(), c.seq.end()) + 1;
  const int max_blocks = *std::max_element(c.pos.begin(), c.pos.end()) / L.B + 1;
  Fixture f(L, S, max_blocks, pooled_table(S, max_blocks, 97), 97, c.pos, c.seq, seed);
  Fixture g(L, S, max_blocks, pooled_table(S, max_blocks, 97), 97, c.pos, c.seq, seed);  // same cache, unfused ops
  if (c.fp8) f.to_fp8(0.01f, 0.004f), g.to_fp8(0.01f, 0.004f);
  const int64_t T = int64_t(c.pos.size()), N = L.width(), D = c.D;
  std::vector<float> inv(size_t(L.Dh / 2));
  for (int i = 0; i < L.Dh / 2; ++i) inv[size_t(i)] = std::pow(150000.0f, -2.0f * float(i) / float(L.Dh));
  Mirror inv_freq = raw(inv, DType::F32, {L.Dh / 2});
  Mirror x = act(random_floats(size_t(T * D), seed + 1, -2.0f, 2.0f), {T, D});
  Mirror nw = bf16_weights(random_floats(size_t(D), seed + 2, 0.5f, 2.0f), {D});
  const std::vector<float> wv = random_floats(size_t(N * D), seed + 3, -0.05f, 0.05f);
  Mirror w = bf16_weights(wv, {N, D});
  const Mxfp4Mirror wq = c.mxfp4 ? mxfp4_weights(wv, N, D) : Mxfp4Mirror{};
  const Tensor& w_gpu = c.mxfp4 ? wq.blocks.gpu : w.gpu;
  const Tensor& w_cpu = c.mxfp4 ? wq.blocks.cpu : w.cpu;
  const Tensor& s_gpu = c.mxfp4 ? wq.scales.gpu : Tensor();
  const Tensor& s_cpu = c.mxfp4 ? wq.scales.cpu : Tensor();
  Mirror b = bf16_weights(random_floats(size_t(N), seed + 4), {N});
  Mirror qkv = act(std::vector<float>(size_t(T * N)), {T, N});
  Mirror qkv_u = act(std::vector<float>(size_t(T * N)), {T, N});
  const Tensor none;
  ops::RouteRecorder rec(test::ctx());
  for (const bool gpu : {true, false}) {
    const ops::QkvProjectionArgs a{.x = gpu ? x.gpu : x.cpu,
                                   .norm = {.weight = c.norm ? (gpu ? nw.gpu : nw.cpu) : none},
                                   .w = gpu ? w_gpu : w_cpu,
                                   .w_scales = gpu ? s_gpu : s_cpu,
                                   .bias = gpu ? b.gpu : b.cpu,
                                   .qkv = gpu ? qkv.gpu : qkv.cpu,
                                   .n_heads = L.H,
                                   .n_kv_heads = L.Hkv,
                                   .head_dim = L.Dh,
                                   .rope = {.inv_freq = gpu ? inv_freq.gpu : inv_freq.cpu,
                                            .concentration = 1.3465736f},
                                   .batch = f.batch(gpu),
                                   .cache = f.cache(gpu)};
    const Status st = ops::qkv_projection(test::ctx(), a);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  const std::vector<std::string> routes = cuda_routes(rec);
  // The unfused GPU ops on cache g.
  const ops::InputNorm norm_u{.weight = c.norm ? nw.gpu : none};
  EXPECT_TRUE(ops::linear(test::ctx(), {.x = x.gpu, .w = w_gpu, .bias = b.gpu, .out = qkv_u.gpu, .norm = norm_u, .w_scales = s_gpu}).ok());
  EXPECT_TRUE(ops::qkv_rope_cache(test::ctx(), {.qkv = qkv_u.gpu, .n_heads = L.H, .n_kv_heads = L.Hkv, .head_dim = L.Dh,
                                   .rope = {.inv_freq = inv_freq.gpu, .concentration = 1.3465736f},
                                   .batch = g.batch(true), .cache = g.cache(true)})
                  .ok());
  ProjRun r{.routes = routes, .qkv_gpu = download(qkv.gpu), .qkv_cpu = host_floats(qkv), .qkv_unfused = download(qkv_u.gpu)};
  if (c.fp8) {
    for (auto [out, fx, gpu] : {std::tuple{&r.codes_gpu, &f, true}, std::tuple{&r.codes_cpu, &f, false},
                                std::tuple{&r.codes_unfused, &g, true}})
      for (const Mirror* m : {&fx->k, &fx->v}) {
        const std::vector<uint8_t> codes = fp8_codes(*m, gpu);
        out->insert(out->end(), codes.begin(), codes.end());
      }
    return r;
  }
  const std::vector<float> kg = download(f.k.gpu), vg = download(f.v.gpu);
  const std::vector<float> kc = host_floats(f.k), vc = host_floats(f.v);
  r.cache_gpu = kg;
  r.cache_gpu.insert(r.cache_gpu.end(), vg.begin(), vg.end());
  r.cache_unfused = download(g.k.gpu);
  const std::vector<float> vu = download(g.v.gpu);
  r.cache_unfused.insert(r.cache_unfused.end(), vu.begin(), vu.end());
  const int32_t* table = reinterpret_cast<const int32_t*>(f.tables.host.data());
  for (const auto* pair : {&kg, &vg}) {
    const std::vector<float>& cpu_side = pair == &kg ? kc : vc;
    for (int64_t t = 0; t < T; ++t) {
      const int pos = c.pos[size_t(t)];
      const int64_t block = table[int64_t(c.seq[size_t(t)]) * max_blocks + pos / L.B];
      const int64_t off = (block * L.B + pos % L.B) * L.Hkv * L.Dh;
      r.slots_gpu.insert(r.slots_gpu.end(), pair->begin() + off, pair->begin() + off + L.Hkv * L.Dh);
      r.slots_cpu.insert(r.slots_cpu.end(), cpu_side.begin() + off, cpu_side.begin() + off + L.Hkv * L.Dh);
    }
  }
  return r;
}

// The routes qkv_projection takes on CUDA: one kernel (the GEMV with the RoPE and cache-write
// epilogue) where linear would take the GEMV and, on the MXFP4 tensor-core GEMV (T >= 2), the
// rotation tiles fit (Dh % 16 == 0); else linear -> qkv_rope_cache.
std::vector<std::string> projection_routes(const ProjCase& c) {
  const LinearShape lin{.T = int64_t(c.pos.size()), .Kin = c.D, .mxfp4 = c.mxfp4, .norm = c.norm};
  const bool mxfp4_mma = c.mxfp4 && lin.T >= 2;
  if (linear_takes_gemv(lin) && (!mxfp4_mma || c.L.Dh % 16 == 0))
    return {std::string("qkv_projection:") +
            (!c.mxfp4 ? "bf16_bf16w_gemv" : lin.T == 1 ? "bf16_mxfp4w_gemv" : "bf16_mxfp4w_gemv_mma")};
  return {linear_route(lin), "qkv_rope_cache:bf16_qkv_rope_cache"};
}

// qkv and cache values: three bf16 roundings in a row on the GPU (x', the linear output, the
// rotation), ~2^-9 relative each: NMSE up to ~1.1e-5 measured (H100, T = 3); 3e-5 still catches a
// wrong row, head or rotation (the corrupted output below: ~1e-3).
constexpr double kProjectionNmse = 3e-5;

TEST(CudaBf16Bf16wGemv, QkvProjectionMatchesReference) {
  MX_REQUIRE_CUDA();
  const Layout odd{.H = 6, .Hkv = 2, .Dh = 10, .B = 16};
  const ProjCase cases[] = {
      {{}, 2880, {4097}, {0}, true},             // gpt-oss decode: fused GEMV
      {{}, 2880, {0, 131071}, {0, 1}, true},     // two sequences, far position: fused at T = 2
      {{}, 2880, {5, 6, 7}, {0, 0, 0}, true},    // T = 3: fused (a speculative round of 2 drafts)
      {{}, 2880, {5, 6, 7, 8, 9}, {0, 0, 0, 0, 1}, true},  // T = 5: linear (rmsnorm + cuBLASLt) -> qkv_rope_cache
      {{}, 2880, {300}, {0}, false},             // no input norm
      {odd, 72, {17, 3}, {0, 1}, true},          // odd heads: fused
      {odd, 72, {1, 2, 3, 4, 5}, {0, 0, 1, 1, 1}, true},  // odd heads, unfused
      {{}, 2880, {4097}, {0}, true, true},                  // MXFP4 qkv: fused bf16_mxfp4w_gemv
      {{}, 2880, {5, 6, 7, 9}, {0, 0, 0, 1}, true, true},   // MXFP4 fused bf16_mxfp4w_gemv_mma
      {{}, 2880, {5, 6, 7, 9, 12}, {0, 0, 0, 1, 1}, false, true},  // MXFP4 fused, no norm
      {{}, 2880, {1, 2, 3, 4, 5, 6, 7, 8, 9}, {0, 0, 0, 0, 1, 1, 1, 1, 1}, true, true},  // decoded + cuBLASLt
      {odd, 96, {17}, {0}, true, true},                     // MXFP4, odd heads, fused at T = 1
      {odd, 96, {17, 3}, {0, 1}, true, true},               // MXFP4, Dh % 16 != 0: GEMV, then qkv_rope_cache
      {{}, 2880, {4097}, {0}, true, false, true},           // FP8 cache: fused bf16_bf16w_gemv epilogue
      {{}, 2880, {5, 6, 7}, {0, 0, 0}, true, false, true},  // FP8 cache: fused at T = 3
      {{}, 2880, {5, 6, 7, 8, 9}, {0, 0, 0, 0, 1}, true, false, true},  // FP8 cache: linear -> qkv_rope_cache
      {{}, 2880, {5, 6, 7, 9}, {0, 0, 0, 1}, true, true, true},  // FP8 cache: bf16_mxfp4w_gemv_mma epilogue
      {{}, 2880, {300}, {0}, false, true, true},            // FP8 cache: bf16_mxfp4w_gemv epilogue
  };
  uint64_t seed = 700;
  for (const ProjCase& c : cases) {
    const ProjRun r = run_projection(c, seed += 10);
    const std::string where = "T=" + std::to_string(c.pos.size()) + " H=" + std::to_string(c.L.H) +
                              (c.norm ? " norm" : " no norm") + (c.mxfp4 ? " mxfp4" : "") + (c.fp8 ? " fp8" : "");
    EXPECT_EQ(r.routes, projection_routes(c)) << where;
    if (c.fp8) {  // the cache's codes: GPU against the CPU, fused against the unfused GPU ops
      EXPECT_LT(nmse(r.qkv_gpu, r.qkv_cpu), kProjectionNmse) << where;
      EXPECT_TRUE(fp8_codes_close(r.codes_gpu, r.codes_cpu)) << where;
      EXPECT_TRUE(fp8_codes_close(r.codes_gpu, r.codes_unfused)) << where;
      continue;
    }
    EXPECT_LT(nmse(r.qkv_gpu, r.qkv_cpu), kProjectionNmse) << where;
    EXPECT_LT(nmse(r.slots_gpu, r.slots_cpu), kProjectionNmse) << where;
    // Fused vs unfused on the GPU: the same bf16 values up to an FP32 sum of squares' last bit
    // and the fma contraction of the rotation (1 bf16 ulp).
    EXPECT_TRUE(all_close(r.qkv_gpu, r.qkv_unfused, 1e-3, 8e-3)) << where;
    EXPECT_TRUE(all_close(r.cache_gpu, r.cache_unfused, 1e-3, 8e-3)) << where;
  }
}

TEST(CudaBf16Bf16wGemv, QkvProjectionComparisonCatchesCorruptedOutput) {
  MX_REQUIRE_CUDA();
  ProjRun r = run_projection({{}, 2880, {4097}, {0}, true}, 901);
  EXPECT_LT(nmse(r.qkv_gpu, r.qkv_cpu), kProjectionNmse);
  EXPECT_GT(nmse(corrupted(r.qkv_gpu), r.qkv_cpu), kProjectionNmse);
  EXPECT_GT(nmse(corrupted(r.slots_gpu), r.slots_cpu), kProjectionNmse);
  // One k head written one slot off: the whole-cache comparison must see it.
  std::vector<float> shifted = r.cache_gpu;
  const size_t head = 64;
  for (size_t i = 0; i < head; ++i) std::swap(shifted[i], shifted[i + 8 * head]);
  EXPECT_FALSE(all_close(shifted, r.cache_unfused, 1e-3, 8e-3));
}

}  // namespace
}  // namespace mx::test
