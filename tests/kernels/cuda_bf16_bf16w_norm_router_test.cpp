// CUDA moe_router (rmsnorm -> router GEMV [-> top-k + softmax]; the norm and GEMV as one kernel,
// bf16_bf16w_norm_router, up to heuristics::kMoeRouterFusedMaxTokens, two ops above; router_topk
// after either when asked for) against the CPU reference on fresh seeded inputs, each case checking
// the routes it took: gpt-oss sizes (D 2880, E 128 / 32, K 4) and odd ones, forced ties, bf16 and
// f32 logits, back-to-back calls, a corrupted-output check.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "test_context.h"

namespace mx::test {
namespace {

// xn and logits are bf16 on the GPU (one rounding each, ~2^-9 relative: NMSE ~1e-6) and the GPU's
// xn feeds its logits; 1e-5 still catches one wrong row, lane or token (corrupted case: ~1e-3).
constexpr double kRouterNmse = 1e-5;

struct RouterCase {
  int64_t T;
  int D, E, K;
  bool bias, f32_logits;
  bool topk = true;  // false: no ids/weights, the op stops at the logits
  bool mxfp4 = false;  // the router weight in MXFP4 (--mxfp4-layers router), D % 32 == 0
};

struct RouterRun {
  std::vector<float> xn_gpu, xn_cpu, logits_gpu, logits_cpu, w_gpu, w_ref;
  std::vector<int32_t> ids_gpu, ids_ref;  // ref: the CPU router_topk over the GPU's stored logits
  std::vector<std::string> routes;        // the GPU call's CUDA routes
};

// The routes moe_router takes on CUDA: the fused kernel up to heuristics.h's bound where its
// contract holds (D % 8 == 0 and D <= 4096: every case here but D = 36), else rmsnorm -> linear;
// router_topk after either when the call asks for the ids.
std::vector<std::string> router_routes(const RouterCase& c) {
  std::vector<std::string> r;
  if (c.T <= heuristics::kMoeRouterFusedMaxTokens && c.D % 8 == 0)
    r = {"moe_router:bf16_bf16w_norm_router"};
  else
    r = {"rmsnorm:bf16_bf16w_rmsnorm", linear_route({.T = c.T, .Kin = c.D, .mxfp4 = c.mxfp4})};
  if (c.topk) r.push_back("router_topk:bf16_router_topk");
  return r;
}

std::vector<int32_t> download_i32(const Tensor& t) {
  std::vector<int32_t> v(size_t(t.numel()));
  EXPECT_TRUE(ops::copy(Tensor(v.data(), DType::I32, {t.numel()}), t).ok());
  return v;
}

// Router rows 1 and 2 are equal with an equal bias of 50 (E >= 3; the other logits are ~N(0, 4²)),
// so they tie at the top for every token: the lower index must come first. Rows E-2 and E-1 are
// equal too (E >= 5). The rows' dots are summed in the same order, so the tie is exact.
RouterRun run_router(const RouterCase& c, uint64_t seed) {
  const int64_t T = c.T, D = c.D, E = c.E, K = c.K;
  Mirror x = act(random_floats(size_t(T * D), seed, -3.0f, 3.0f), {T, D});
  Mirror nw = bf16_weights(random_floats(size_t(D), seed + 1, 0.5f, 2.0f), {D});
  std::vector<float> wv = random_floats(size_t(E * D), seed + 2, -0.1f, 0.1f);
  std::vector<float> bv = random_floats(size_t(E), seed + 3);
  auto copy_row = [&](int64_t dst, int64_t src) {
    std::copy(wv.begin() + src * D, wv.begin() + (src + 1) * D, wv.begin() + dst * D);
    bv[size_t(dst)] = bv[size_t(src)];
  };
  if (E >= 3) {
    bv[1] = 50.0f;
    copy_row(2, 1);
  }
  if (E >= 5) copy_row(E - 1, E - 2);
  Mirror w = bf16_weights(wv, {E, D});
  const Mxfp4Mirror wq = c.mxfp4 ? mxfp4_weights(wv, E, D) : Mxfp4Mirror{};
  Mirror b = bf16_weights(bv, {E});
  const std::vector<float> init(size_t(T * E), -7.0f);
  Mirror logits = c.f32_logits ? raw(init, DType::F32, {T, E}) : act(init, {T, E});
  Mirror xn = act(std::vector<float>(size_t(T * D)), {T, D});
  Mirror ids = raw(std::vector<int32_t>(size_t(T * K), -1), DType::I32, {T, K});
  Mirror weights = raw(std::vector<float>(size_t(T * K), -1.0f), DType::F32, {T, K});
  const Tensor no_bias;
  ops::RouteRecorder rec(test::ctx());
  for (const bool gpu : {true, false}) {
    auto pick = [&](const Mirror& m) { return gpu ? m.gpu : m.cpu; };
    EXPECT_TRUE(ops::moe_router(test::ctx(), {.x = pick(x),
                                 .norm_weight = pick(nw),
                                 .w = c.mxfp4 ? pick(wq.blocks) : pick(w),
                                 .w_scales = c.mxfp4 ? pick(wq.scales) : Tensor(),
                                 .bias = c.bias ? pick(b) : no_bias,
                                 .xn = pick(xn),
                                 .logits = pick(logits),
                                 .ids = c.topk ? pick(ids) : Tensor(),
                                 .weights = c.topk ? pick(weights) : Tensor()})
                    .ok());
  }
  RouterRun r{.xn_gpu = download(xn.gpu), .xn_cpu = host_floats(xn), .logits_gpu = download(logits.gpu),
              .logits_cpu = host_floats(logits), .w_gpu = download(weights.gpu), .ids_gpu = download_i32(ids.gpu),
              .routes = cuda_routes(rec)};
  r.ids_ref.assign(size_t(T * K), -1);
  r.w_ref.assign(size_t(T * K), -1.0f);
  EXPECT_TRUE(ops::router_topk(test::ctx(), {.logits = Tensor(r.logits_gpu.data(), DType::F32, {T, E}),
                                .ids = Tensor(r.ids_ref.data(), DType::I32, {T, K}),
                                .weights = Tensor(r.w_ref.data(), DType::F32, {T, K})})
                  .ok());
  return r;
}

void expect_matches(const RouterRun& r, const RouterCase& c) {
  const std::string where = "T=" + std::to_string(c.T) + " D=" + std::to_string(c.D) + " E=" + std::to_string(c.E) +
                            " K=" + std::to_string(c.K) + (c.f32_logits ? " f32 logits" : " bf16 logits") +
                            (c.mxfp4 ? " mxfp4" : "");
  EXPECT_EQ(r.routes, router_routes(c)) << where;
  EXPECT_LT(nmse(r.xn_gpu, r.xn_cpu), kRouterNmse) << where;
  EXPECT_LT(nmse(r.logits_gpu, r.logits_cpu), kRouterNmse) << where;
  if (!c.topk) {  // logits only: ids untouched
    EXPECT_EQ(r.ids_gpu, std::vector<int32_t>(r.ids_gpu.size(), -1)) << where;
    return;
  }
  EXPECT_EQ(r.ids_gpu, r.ids_ref) << where;  // bitwise: the top-k of the logits the GPU stored
  EXPECT_TRUE(all_close(r.w_gpu, r.w_ref, 0, 1e-6)) << where;  // the same double softmax
}

TEST(CudaBf16Bf16wNormRouter, MoeRouterMatchesReference) {
  MX_REQUIRE_CUDA();
  constexpr int64_t kFused = heuristics::kMoeRouterFusedMaxTokens;
  const RouterCase cases[] = {
      {1, 2880, 128, 4, true, false},  // 120b decode (fused)
      {1, 2880, 32, 4, true, false},   // 20b decode (fused)
      {2, 2880, 128, 4, true, true},   // f32 logits (fused)
      {kFused, 2880, 32, 4, true, false},      // the fused kernel's last T
      {64, 2880, 128, 4, true, true},  // a decode batch of 64 (the grouped MoE path's router)
      {3, 72, 5, 3, true, false},      // odd sizes (fused)
      {5, 200, 256, 8, false, true},   // E and K at the kernel limits, no bias (fused)
      {1, 4096, 7, 1, true, false},    // D at the kernel limit, K = 1
      {kFused + 1, 2880, 128, 4, true, false},  // above it: rmsnorm -> linear -> router_topk
      {64, 2880, 32, 4, true, false},  // prefill chunk
      {2, 36, 6, 2, true, false},      // D % 8 != 0: the three ops even at small T
      {1, 2880, 128, 4, true, false, false},  // logits only (ops::moe selects): fused
      {kFused + 1, 2880, 32, 4, true, true, false},  // logits only: rmsnorm -> linear
      {1, 2880, 128, 4, true, false, false, true},  // MXFP4 router, 120b decode (fused)
      {4, 2880, 32, 4, true, true, true, true},     // MXFP4, fused with the top-k
      {3, 96, 5, 3, true, false, true, true},       // MXFP4, odd E (fused)
      {kFused + 1, 2880, 128, 4, true, false, true, true},  // MXFP4: rmsnorm -> MXFP4 linear -> router_topk
  };
  uint64_t seed = 1000;
  for (const RouterCase& c : cases) expect_matches(run_router(c, seed += 10), c);
}

TEST(CudaBf16Bf16wNormRouter, TiedRowsKeepTheLowerIndexFirst) {
  MX_REQUIRE_CUDA();
  const RouterCase c{4, 2880, 128, 4, true, false};
  const RouterRun r = run_router(c, 77);
  expect_matches(r, c);
  for (int64_t t = 0; t < c.T; ++t) {  // rows 1 and 2 tie far above the rest: ids 1, 2 lead
    EXPECT_EQ(r.ids_gpu[size_t(t * c.K)], 1) << "token " << t;
    EXPECT_EQ(r.ids_gpu[size_t(t * c.K + 1)], 2) << "token " << t;
    EXPECT_EQ(r.w_gpu[size_t(t * c.K)], r.w_gpu[size_t(t * c.K + 1)]) << "token " << t;
  }
}

TEST(CudaBf16Bf16wNormRouter, BackToBackCallsEachFinish) {
  MX_REQUIRE_CUDA();
  // Queued without a host sync in between (the second starts in the first's tail, PDL): each call
  // reads the x its own inputs hold and writes its own outputs.
  const RouterCase c{1, 2880, 128, 4, true, false};
  std::vector<RouterRun> runs;
  for (int i = 0; i < 3; ++i) runs.push_back(run_router(c, 300 + 10 * uint64_t(i)));
  for (const RouterRun& r : runs) expect_matches(r, c);
}

TEST(CudaBf16Bf16wNormRouter, ComparisonCatchesCorruptedOutput) {
  MX_REQUIRE_CUDA();
  const RouterCase c{2, 2880, 128, 4, true, false};
  RouterRun r = run_router(c, 91);
  expect_matches(r, c);
  EXPECT_GT(nmse(corrupted(r.xn_gpu), r.xn_cpu), kRouterNmse);
  EXPECT_GT(nmse(corrupted(r.logits_gpu), r.logits_cpu), kRouterNmse);
  std::swap(r.ids_gpu[2], r.ids_gpu[3]);
  EXPECT_NE(r.ids_gpu, r.ids_ref);
}

}  // namespace
}  // namespace mx::test
