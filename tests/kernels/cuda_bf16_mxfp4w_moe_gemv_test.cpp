// CUDA router_topk (ids bitwise) and the MXFP4 MoE GEMVs against the CPU reference: gpt-oss
// sizes (D = F = 2880, E = 32 / 128, K = 4), odd small ones, idle experts, all tokens on one expert;
// every ops::moe call checks the routes it took (the GEMVs up to heuristics::kMoeGemvMaxTokens).
// Suites by kernel: CudaBf16Mxfp4wMoeGemv (gate_up and down), CudaBf16RouterTopk.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "cuda_test_util.h"
#include "kernels/heuristics.h"
#include "test_context.h"

namespace mx::test {
namespace {

// The residual is bf16 (one rounding, NMSE ~1e-6 at the residual's scale); the MXFP4 decode and the
// FP16 activations of the GEMV path are exact, its act intermediate is FP16 (11 significant bits,
// NMSE ~1e-8) and the summation order differs.
constexpr double kMoeNmse = 1e-5;

TEST(CudaBf16RouterTopk, RouterTopkIdsBitwise) {
  MX_REQUIRE_CUDA();
  for (int E : {32, 128, 5}) {
    const int64_t T = 37;
    const int K = std::min(4, E);
    // Logits on a coarse grid so that ties occur: the lower expert index must win them.
    std::vector<float> v = random_floats(size_t(T * E), 90 + E, -4.0f, 4.0f);
    for (float& x : v) x = std::round(x * 2.0f) / 2.0f;
    for (bool f32 : {false, true}) {
      Mirror logits = f32 ? raw(v, DType::F32, {T, E}) : act(v, {T, E});
      Mirror ids = raw(std::vector<int32_t>(size_t(T * K), -1), DType::I32, {T, K});
      Mirror w = raw(std::vector<float>(size_t(T * K), -1.0f), DType::F32, {T, K});
      ASSERT_TRUE(ops::router_topk(test::ctx(), {.logits = logits.gpu, .ids = ids.gpu, .weights = w.gpu}).ok());
      ASSERT_TRUE(ops::router_topk(test::ctx(), {.logits = logits.cpu, .ids = ids.cpu, .weights = w.cpu}).ok());
      std::vector<int32_t> got(size_t(T * K));
      ASSERT_TRUE(ops::copy(Tensor(got.data(), DType::I32, {T * K}), ids.gpu).ok());
      const std::vector<int32_t> ref(reinterpret_cast<const int32_t*>(ids.host.data()),
                                     reinterpret_cast<const int32_t*>(ids.host.data()) + T * K);
      EXPECT_EQ(got, ref) << "E=" << E;
      EXPECT_TRUE(all_close(download(w.gpu), host_floats(w), 0, 1e-6)) << "E=" << E;  // same double math
    }
  }
}

struct MoeCase {
  int64_t T;
  int D, F, E, K;
};

// The experts' outputs and the route each side used (read, or selected from the logits).
struct MoeRun {
  std::vector<float> gpu, cpu;  // residual
  std::vector<int32_t> ids_gpu, ids_cpu;
  std::vector<float> w_gpu, w_cpu;
  std::vector<std::string> routes;  // the GPU call's CUDA routes
};

// The GEMV path's route: bf16_mxfp4w_moe_gemv from the ids, or selecting from the logits itself.
const std::vector<std::string> kGemvRoute = {"moe:bf16_mxfp4w_moe_gemv"};

// Random MXFP4 experts with scales 2^-9..2^-5 (gate/up values reach the +-7 clamps), routed by the
// given top-k ids or, when `logits` is not empty, by ops::moe's own selection from those logits.
MoeRun run_moe_routed(const MoeCase& c, const std::vector<int32_t>& ids_v, const std::vector<float>& logits,
                      bool logits_f32, uint64_t seed) {
  auto bytes = [&](size_t n, uint64_t s, int lo, int hi) {
    std::vector<uint8_t> b(n);
    std::mt19937_64 rng(s);
    std::uniform_int_distribution<int> dist(lo, hi);
    for (auto& x : b) x = uint8_t(dist(rng));
    return b;
  };
  const int64_t E = c.E, D = c.D, F = c.F, T = c.T, K = c.K;
  Mirror gu_b = raw(bytes(size_t(E * 2 * F * D / 2), seed, 0, 255), DType::U8, {E, 2 * F, D / 32, 16});
  Mirror gu_s = raw(bytes(size_t(E * 2 * F * D / 32), seed + 1, 118, 122), DType::U8, {E, 2 * F, D / 32});
  Mirror gu_bias = bf16_weights(random_floats(size_t(E * 2 * F), seed + 2), {E, 2 * F});
  Mirror dn_b = raw(bytes(size_t(E * D * F / 2), seed + 3, 0, 255), DType::U8, {E, D, F / 32, 16});
  Mirror dn_s = raw(bytes(size_t(E * D * F / 32), seed + 4, 116, 120), DType::U8, {E, D, F / 32});
  Mirror dn_bias = bf16_weights(random_floats(size_t(E * D), seed + 5), {E, D});
  Mirror x = act(random_floats(size_t(T * D), seed + 6, -2.0f, 2.0f), {T, D});
  Mirror ids = raw(ids_v, DType::I32, {T, K});
  std::vector<float> wv = random_floats(size_t(T * K), seed + 7, 0.05f, 1.0f);
  Mirror w = raw(wv, DType::F32, {T, K});
  Mirror res = act(random_floats(size_t(T * D), seed + 8, -0.5f, 0.5f), {T, D});
  Mirror lg;
  if (!logits.empty()) lg = logits_f32 ? raw(logits, DType::F32, {T, E}) : act(logits, {T, E});
  ops::RouteRecorder rec(test::ctx());
  for (bool gpu : {true, false}) {
    auto pick = [&](const Mirror& m) { return gpu ? m.gpu : m.cpu; };
    const Status st = ops::moe(test::ctx(), {.x = pick(x),
                                .routing = logits.empty() ? ops::MoeRouting::FromIds : ops::MoeRouting::FromLogits,
                                .ids = pick(ids), .weights = pick(w),
                                .logits = logits.empty() ? Tensor() : pick(lg),
                                .w = {.gate_up_blocks = pick(gu_b), .gate_up_scales = pick(gu_s),
                                      .gate_up_bias = pick(gu_bias), .down_blocks = pick(dn_b),
                                      .down_scales = pick(dn_s), .down_bias = pick(dn_bias)},
                                .residual = pick(res)});
    EXPECT_TRUE(st.ok()) << st.message();
  }
  MoeRun r{.gpu = download(res.gpu), .cpu = host_floats(res), .routes = cuda_routes(rec)};
  r.ids_gpu.resize(size_t(T * K));
  EXPECT_TRUE(ops::copy(Tensor(r.ids_gpu.data(), DType::I32, {T, K}), ids.gpu).ok());
  const auto* ic = reinterpret_cast<const int32_t*>(ids.host.data());
  r.ids_cpu.assign(ic, ic + T * K);
  r.w_gpu = download(w.gpu);
  r.w_cpu = host_floats(w);
  return r;
}

// ops::moe from the ids; every case is meant for the GEMVs (T <= heuristics::kMoeGemvMaxTokens).
std::pair<std::vector<float>, std::vector<float>> run_moe(const MoeCase& c, const std::vector<int32_t>& ids_v,
                                                          uint64_t seed) {
  MoeRun r = run_moe_routed(c, ids_v, {}, false, seed);
  EXPECT_EQ(r.routes, kGemvRoute) << "T=" << c.T << ": the GEMV path must run";
  return {std::move(r.gpu), std::move(r.cpu)};
}

// Distinct top-k ids per token from a seeded shuffle of the first `experts_used` experts.
std::vector<int32_t> random_ids(int64_t T, int K, int experts_used, uint64_t seed) {
  std::vector<int32_t> ids;
  std::mt19937_64 rng(seed);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> e(static_cast<size_t>(experts_used));
    std::iota(e.begin(), e.end(), 0);
    std::shuffle(e.begin(), e.end(), rng);
    ids.insert(ids.end(), e.begin(), e.begin() + K);
  }
  return ids;
}

TEST(CudaBf16Mxfp4wMoeGemv, GptOssSizesDecodeAndSmallBatch) {
  MX_REQUIRE_CUDA();
  for (const MoeCase& c : {MoeCase{1, 2880, 2880, 32, 4}, MoeCase{3, 2880, 2880, 32, 4}}) {
    // Experts 0..15 only: 16..31 receive no tokens.
    const auto [gpu, cpu] = run_moe(c, random_ids(c.T, c.K, 16, 200 + c.T), 300 + c.T);
    EXPECT_LT(nmse(gpu, cpu), kMoeNmse) << "T=" << c.T;
    EXPECT_GT(nmse(corrupted(gpu), cpu), kMoeNmse) << "the check must catch a corrupted output";
  }
}

TEST(CudaBf16Mxfp4wMoeGemv, AllTokensOnOneExpert) {
  MX_REQUIRE_CUDA();
  const MoeCase c{9, 2880, 2880, 128, 4};
  std::vector<int32_t> ids = random_ids(c.T, c.K, 40, 400);
  for (int64_t t = 0; t < c.T; ++t) {  // expert 77 in every token's set, at varying slots
    ids[size_t(t * c.K + t % c.K)] = 77;
  }
  const auto [gpu, cpu] = run_moe(c, ids, 401);
  EXPECT_LT(nmse(gpu, cpu), kMoeNmse);
}

// The many-token case at the GEMVs' last T (the grouped path's test covers the T above).
TEST(CudaBf16Mxfp4wMoeGemv, OddSmallSizesAndManyTokens) {
  MX_REQUIRE_CUDA();
  for (const MoeCase& c : {MoeCase{7, 64, 96, 5, 2}, MoeCase{1, 32, 32, 3, 3},
                           MoeCase{heuristics::kMoeGemvMaxTokens, 160, 64, 8, 4}}) {
    const auto [gpu, cpu] = run_moe(c, random_ids(c.T, c.K, c.E, 500 + c.D), 600 + c.D);
    EXPECT_LT(nmse(gpu, cpu), kMoeNmse) << "T=" << c.T << " D=" << c.D << " F=" << c.F;
  }
}

TEST(CudaBf16Mxfp4wMoeGemv, BatchEightTopEightAndChunkedRows) {
  MX_REQUIRE_CUDA();
  // T = 8 at 120b sizes; K = 8 (the largest act staging); D, F over one 96-block stage chunk with a
  // 1-block tail (F = 3104: 97 blocks per down row) and scale rows that start unaligned.
  for (const MoeCase& c : {MoeCase{8, 2880, 2880, 32, 4}, MoeCase{3, 2880, 2880, 16, 8}, MoeCase{2, 4096, 3104, 6, 4},
                           MoeCase{12, 2880, 2880, 8, 4}, MoeCase{20, 2880, 2880, 8, 4}, MoeCase{23, 2880, 1440, 8, 4}}) {
    const auto [gpu, cpu] = run_moe(c, random_ids(c.T, c.K, c.E, 700 + c.K + c.D), 800 + c.T);
    EXPECT_LT(nmse(gpu, cpu), kMoeNmse) << "T=" << c.T << " D=" << c.D << " F=" << c.F << " K=" << c.K;
  }
}

// ops::moe with the router logits: on CUDA the GEMV kernels select each token's top-K themselves
// (T <= heuristics::kMoeGemvMaxTokens, E within their 256), beyond that router_topk runs before the
// grouped path. ids bitwise and weights as the CPU's router_topk, ties on a coarse logit grid included.
TEST(CudaBf16Mxfp4wMoeGemv, SelectsExpertsFromRouterLogits) {
  MX_REQUIRE_CUDA();
  const MoeCase cases[] = {{1, 2880, 2880, 128, 4}, {5, 2880, 2880, 32, 4}, {3, 64, 96, 5, 2}, {130, 256, 128, 16, 4}};
  for (const MoeCase& c : cases) {
    std::vector<float> logits = random_floats(size_t(c.T * c.E), 900 + c.T, -4.0f, 4.0f);
    for (float& v : logits) v = std::round(v * 2.0f) / 2.0f;
    const std::vector<std::string> want = c.T <= heuristics::kMoeGemvMaxTokens
                                              ? kGemvRoute
                                              : std::vector<std::string>{"router_topk:bf16_router_topk",
                                                                         "moe:" + grouped_kernel(c.T, c.K, c.E)};
    for (bool f32 : {false, true}) {
      const std::vector<int32_t> stale(size_t(c.T * c.K), -1);  // overwritten by the op
      const MoeRun r = run_moe_routed(c, stale, logits, f32, 950 + c.T);
      EXPECT_EQ(r.routes, want) << "T=" << c.T << " E=" << c.E;
      EXPECT_EQ(r.ids_gpu, r.ids_cpu) << "T=" << c.T << " E=" << c.E << " f32=" << f32;
      EXPECT_TRUE(all_close(r.w_gpu, r.w_cpu, 0, 1e-6)) << "T=" << c.T << " E=" << c.E;
      EXPECT_LT(nmse(r.gpu, r.cpu), kMoeNmse) << "T=" << c.T << " E=" << c.E << " f32=" << f32;
    }
  }
}

}  // namespace
}  // namespace mx::test
