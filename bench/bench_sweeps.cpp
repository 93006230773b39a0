// bench_sweeps: the timing sweeps behind heuristics.h's bounds and the fusions of dispatch.cpp: each
// times the alternatives of one choice at gpt-oss sizes and prints a markdown table (docs/lab,
// docs/PERFORMANCE.md) whose columns name the kernels by their stems (docs/KERNELS.md; `linear`
// where the route depends on T: the GEMV up to its bound, cuBLASLt above). Usage: bench_sweeps
// <sweep>, one of
//   moe_router      fused norm + router GEMV against rmsnorm -> linear (kMoeRouterFusedMaxTokens)
//   input_norm      linear with the input RMSNorm fused into the GEMV against rmsnorm -> linear
//   mxfp4_gemv      linear with BF16 against MXFP4 weights, µs and GB/s (kLinearMxfp4GemvMaxTokens)
//   qkv_projection  the attention input: three ops, two, and qkv_projection as one kernel
//   moe_grouped     the MoE GEMVs against the grouped GEMMs by T (kMoeGemvMaxTokens; MXSERVE_SWEEP_T=64,128
//                   times those batches only, e.g. to profile one of them with ncu)
//   all_reduce      all_reduce_add over 2 and 4 GPUs (MXSERVE_TP_SIZES, default "2,4";
//                   MXSERVE_TP_TOKENS, default "1,8,64")
#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "kernels/collective.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/heuristics.h"
#include "sweep_util.h"
#include "bench_context.h"

namespace mx::bench {
namespace {

// moe_router at decode sizes as the forward calls it (F32 logits; the MoE GEMVs select): the fused
// kernel against rmsnorm -> linear, inside CUDA graphs, router weights rotated over 96 copies
// (71 MB at E = 128, past L2), as in a decode step.
void sweep_moe_router() {
  const int D = 2880, kCopies = 96;
  std::printf("| E | T | bf16_bf16w_rmsnorm + linear us | bf16_bf16w_norm_router us |\n|---|---|---|---|\n");
  for (const int E : {128, 32}) {
    std::vector<GpuTensor> ws;
    for (int i = 0; i < kCopies; ++i)
      ws.push_back(bf16_tensor(random_floats(size_t(E) * D, 2000 + uint64_t(i), -0.1f, 0.1f), {E, D}));
    GpuTensor nw = bf16_tensor(random_floats(size_t(D), 2100, 0.5f, 2.0f), {D});
    GpuTensor b = bf16_tensor(random_floats(size_t(E), 2101), {E});
    for (const int64_t T : {1, 2, 4, 8}) {
      GpuTensor x = bf16_tensor(random_floats(size_t(T * D), 2200, -3.0f, 3.0f), {T, D});
      GpuTensor xn = bf16_tensor(std::vector<float>(size_t(T * D)), {T, D});
      GpuTensor logits = raw(std::vector<float>(size_t(T * E)), DType::F32, {T, E});
      const double unfused = graph_us_per_call(
          [&](int i) -> Status {
            MX_TRY(ops::rmsnorm(bench::ctx(), {.x = x.gpu, .weight = nw.gpu, .out = xn.gpu}));
            return ops::linear(bench::ctx(), {.x = xn.gpu, .w = ws[size_t(i)].gpu, .bias = b.gpu, .out = logits.gpu});
          },
          kCopies, 10);
      const double fused = graph_us_per_call(
          [&](int i) {
            return ops::moe_router(bench::ctx(), {.x = x.gpu, .norm_weight = nw.gpu, .w = ws[size_t(i)].gpu, .bias = b.gpu,
                                    .xn = xn.gpu, .logits = logits.gpu});
          },
          kCopies, 10);
      std::printf("| %d | %lld | %.2f | %.2f |\n", E, static_cast<long long>(T), unfused, fused);
    }
  }
}

// The attention-norm + qkv input at decode (fused GEMV vs rmsnorm kernel + GEMV) inside CUDA
// graphs, weights rotated over 4 copies (118 MB, past L2).
void sweep_input_norm() {
  const int64_t N = 5120, Kin = 2880;
  std::vector<GpuTensor> ws;
  for (int i = 0; i < 4; ++i)
    ws.push_back(bf16_tensor(random_floats(size_t(N * Kin), 900 + i, -0.05f, 0.05f), {N, Kin}));
  GpuTensor nw = bf16_tensor(random_floats(size_t(Kin), 910, 0.5f, 2.0f), {Kin});
  GpuTensor b = bf16_tensor(random_floats(size_t(N), 911), {N});
  std::printf("| T | bf16_bf16w_rmsnorm + bf16_bf16w_gemv us | bf16_bf16w_gemv (norm fused) us |\n|---|---|---|\n");
  for (const int64_t T : {1, 2}) {
    GpuTensor x = bf16_tensor(random_floats(size_t(T * Kin), 920, -3.0f, 3.0f), {T, Kin});
    GpuTensor xn = bf16_tensor(std::vector<float>(size_t(T * Kin)), {T, Kin});
    GpuTensor out = bf16_tensor(std::vector<float>(size_t(T * N)), {T, N});
    const double unfused = graph_us_per_call(
        [&](int i) -> Status {
          MX_TRY(ops::rmsnorm(bench::ctx(), {.x = x.gpu, .weight = nw.gpu, .out = xn.gpu}));
          return ops::linear(bench::ctx(), {.x = xn.gpu, .w = ws[size_t(i % 4)].gpu, .bias = b.gpu, .out = out.gpu});
        },
        32, 20);
    const double fused = graph_us_per_call(
        [&](int i) {
          return ops::linear(bench::ctx(), 
              {.x = x.gpu, .w = ws[size_t(i % 4)].gpu, .bias = b.gpu, .out = out.gpu, .norm = {.weight = nw.gpu}});
        },
        32, 20);
    std::printf("| %lld | %.2f | %.2f |\n", static_cast<long long>(T), unfused, fused);
  }
}

// linear with BF16 and MXFP4 weights at decode sizes inside CUDA graphs, weights rotated over
// copies past L2: µs per call and GB/s of weight bytes. bf16_bf16w: bf16_bf16w_gemv up to its
// bound, cuBLASLt above; bf16_mxfp4w: bf16_mxfp4w_gemv at T = 1, bf16_mxfp4w_gemv_mma above.
void sweep_mxfp4_gemv() {
  struct Shape {
    const char* name;
    int64_t N, Kin;
    bool norm;
    int copies;
  };
  const Shape shapes[] = {{"qkv", 5120, 2880, true, 8}, {"o", 2880, 4096, false, 8}, {"lm_head", 201088, 2880, true, 1}};
  std::printf("| matrix | T | bf16_bf16w µs | bf16_bf16w GB/s | bf16_mxfp4w µs | bf16_mxfp4w GB/s |\n"
              "|---|--:|--:|--:|--:|--:|\n");
  for (const Shape& sh : shapes) {
    std::vector<GpuTensor> bf;
    std::vector<Mxfp4Gpu> q;
    for (int i = 0; i < sh.copies; ++i) {
      const std::vector<float> v = random_floats(size_t(sh.N * sh.Kin), 2000 + i, -0.05f, 0.05f);
      bf.push_back(bf16_tensor(v, {sh.N, sh.Kin}));
      q.push_back(mxfp4_weights(v, sh.N, sh.Kin));
    }
    GpuTensor nw = bf16_tensor(random_floats(size_t(sh.Kin), 2100, 0.5f, 2.0f), {sh.Kin});
    for (const int64_t T : {1, 2, 4, 8}) {
      GpuTensor x = bf16_tensor(random_floats(size_t(T * sh.Kin), 2200, -2.0f, 2.0f), {T, sh.Kin});
      GpuTensor out = raw(std::vector<float>(size_t(T * sh.N)), DType::F32, {T, sh.N});
      const Tensor norm = sh.norm ? nw.gpu : Tensor();
      const int per_graph = sh.copies * 4;
      const double us_bf = graph_us_per_call(
          [&](int i) {
            return ops::linear(bench::ctx(), {.x = x.gpu, .w = bf[size_t(i % sh.copies)].gpu, .out = out.gpu, .norm = {.weight = norm}});
          },
          per_graph, 10);
      const double us_q = graph_us_per_call(
          [&](int i) {
            const Mxfp4Gpu& m = q[size_t(i % sh.copies)];
            return ops::linear(bench::ctx(), {.x = x.gpu, .w = m.blocks.gpu, .out = out.gpu, .norm = {.weight = norm},
                                .w_scales = m.scales.gpu});
          },
          per_graph, 10);
      const double bytes_bf = 2.0 * sh.N * sh.Kin, bytes_q = sh.N * sh.Kin * 17.0 / 32.0;
      std::printf("| %s | %lld | %.2f | %.0f | %.2f | %.0f |\n", sh.name, static_cast<long long>(T), us_bf,
                  bytes_bf / us_bf / 1e3, us_q, bytes_q / us_q / 1e3);
    }
  }
}

// A BF16 paged cache of 97 random blocks (64 q / 8 kv heads, Dh 64, blocks of 16), block tables of
// S rows whose entry i is block i % 97, and a batch of one token per sequence at `pos`.
struct PagedCache {
  static constexpr int H = 64, Hkv = 8, Dh = 64, B = 16, kPool = 97;
  GpuTensor k, v, tables, positions, seq_index;
  PagedCache(const std::vector<int32_t>& pos, int S, int max_blocks, uint64_t seed) {
    const int64_t n = int64_t(kPool) * B * Hkv * Dh;
    k = bf16_tensor(random_floats(size_t(n), seed, -2.0f, 2.0f), {kPool, B, Hkv, Dh});
    v = bf16_tensor(random_floats(size_t(n), seed + 1, -2.0f, 2.0f), {kPool, B, Hkv, Dh});
    std::vector<int32_t> table(size_t(S) * max_blocks), seq(pos.size());
    for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t(i % kPool);
    std::iota(seq.begin(), seq.end(), 0);
    tables = raw(table, DType::I32, {S, max_blocks});
    positions = raw(pos, DType::I32, {int64_t(pos.size())});
    seq_index = raw(seq, DType::I32, {int64_t(seq.size())});
  }
  ops::TokenBatch batch() const {
    return {.positions = positions.gpu, .seq_index = seq_index.gpu, .block_tables = tables.gpu};
  }
  ops::KvLayer cache() const { return {.k = k.gpu, .v = v.gpu}; }
};

// The attention block's input at decode inside CUDA graphs, qkv weights rotated over 4 copies
// (118 MB, past L2), 120b layout: rmsnorm + GEMV + qkv_rope_cache, GEMV with the norm +
// qkv_rope_cache, and qkv_projection as one kernel.
void sweep_qkv_projection() {
  constexpr int H = PagedCache::H, Hkv = PagedCache::Hkv, Dh = PagedCache::Dh;
  const int64_t D = 2880, N = int64_t(H + 2 * Hkv) * Dh;
  std::vector<GpuTensor> ws;
  for (int i = 0; i < 4; ++i)
    ws.push_back(bf16_tensor(random_floats(size_t(N * D), 950 + uint64_t(i), -0.05f, 0.05f), {N, D}));
  GpuTensor nw = bf16_tensor(random_floats(size_t(D), 960, 0.5f, 2.0f), {D});
  GpuTensor b = bf16_tensor(random_floats(size_t(N), 961), {N});
  std::vector<float> inv(size_t(Dh / 2));
  for (int i = 0; i < Dh / 2; ++i) inv[size_t(i)] = std::pow(150000.0f, -2.0f * float(i) / float(Dh));
  GpuTensor inv_freq = raw(inv, DType::F32, {Dh / 2});
  const ops::RopeTable rope{.inv_freq = inv_freq.gpu, .concentration = 1.3465736f};
  std::printf("| T | bf16_bf16w_rmsnorm + bf16_bf16w_gemv + bf16_qkv_rope_cache us "
              "| bf16_bf16w_gemv (norm) + bf16_qkv_rope_cache us | bf16_bf16w_gemv (norm, qkv epilogue) us |\n"
              "|---|---|---|---|\n");
  for (const std::vector<int32_t>& pos : {std::vector<int32_t>{4097}, std::vector<int32_t>{4097, 100}}) {
    const int64_t T = int64_t(pos.size());
    const PagedCache f(pos, 2, 4097 / PagedCache::B + 1, 970);
    GpuTensor x = bf16_tensor(random_floats(size_t(T * D), 971, -3.0f, 3.0f), {T, D});
    GpuTensor xn = bf16_tensor(std::vector<float>(size_t(T * D)), {T, D});
    GpuTensor qkv = bf16_tensor(std::vector<float>(size_t(T * N)), {T, N});
    const ops::QkvRopeCacheArgs rc{.qkv = qkv.gpu, .n_heads = H, .n_kv_heads = Hkv, .head_dim = Dh,
                                   .rope = rope, .batch = f.batch(), .cache = f.cache()};
    const double unfused = graph_us_per_call(
        [&](int i) -> Status {
          MX_TRY(ops::rmsnorm(bench::ctx(), {.x = x.gpu, .weight = nw.gpu, .out = xn.gpu}));
          MX_TRY(ops::linear(bench::ctx(), {.x = xn.gpu, .w = ws[size_t(i % 4)].gpu, .bias = b.gpu, .out = qkv.gpu}));
          return ops::qkv_rope_cache(bench::ctx(), rc);
        },
        32, 20);
    const double norm_only = graph_us_per_call(
        [&](int i) -> Status {
          MX_TRY(ops::linear(bench::ctx(), 
              {.x = x.gpu, .w = ws[size_t(i % 4)].gpu, .bias = b.gpu, .out = qkv.gpu, .norm = {.weight = nw.gpu}}));
          return ops::qkv_rope_cache(bench::ctx(), rc);
        },
        32, 20);
    const double fused = graph_us_per_call(
        [&](int i) {
          return ops::qkv_projection(bench::ctx(), {.x = x.gpu, .norm = {.weight = nw.gpu}, .w = ws[size_t(i % 4)].gpu,
                                      .bias = b.gpu, .qkv = qkv.gpu, .n_heads = H, .n_kv_heads = Hkv,
                                      .head_dim = Dh, .rope = rope, .batch = f.batch(), .cache = f.cache()});
        },
        32, 20);
    std::printf("| %lld | %.2f | %.2f | %.2f |\n", static_cast<long long>(T), unfused, norm_only, fused);
  }
}

// ---- moe_grouped ---------------------------------------------------------------------------------
// One 120b layer's MXFP4 experts (E = 128, D = F = 2880) filled on the device (1.7 GB in
// milliseconds); scales 2^-9..2^-5 so that gate/up values reach the ±7 clamps.
struct Experts {
  GpuTensor gu_b, gu_s, gu_bias, dn_b, dn_s, dn_bias;
};
GpuTensor device_random(DType dtype, std::initializer_list<int64_t> shape, uint64_t seed, int lo, int hi) {
  GpuTensor m;
  const Tensor probe(nullptr, dtype, shape, Device::CUDA);
  m.dev = must(ops::Buffer::allocate(Device::CUDA, probe.nbytes()));
  m.gpu = m.dev.view(dtype, shape);
  must(ops::fill_random(bench::ctx(), {.out = m.gpu, .seed = seed, .scale = 1.0f, .byte_lo = lo, .byte_hi = hi}));
  return m;
}
Experts make_experts(int64_t E, int64_t D, int64_t F, uint64_t seed) {
  return {.gu_b = device_random(DType::U8, {E, 2 * F, D / 32, 16}, seed, 0, 255),
          .gu_s = device_random(DType::U8, {E, 2 * F, D / 32}, seed + 1, 118, 122),
          .gu_bias = device_random(DType::BF16, {E, 2 * F}, seed + 2, 0, 255),
          .dn_b = device_random(DType::U8, {E, D, F / 32, 16}, seed + 3, 0, 255),
          .dn_s = device_random(DType::U8, {E, D, F / 32}, seed + 4, 116, 120),
          .dn_bias = device_random(DType::BF16, {E, D}, seed + 5, 0, 255)};
}

// Distinct top-k ids per token from a seeded shuffle of the E experts.
std::vector<int32_t> random_ids(int64_t T, int K, int E, uint64_t seed) {
  std::vector<int32_t> ids;
  std::mt19937_64 rng(seed);
  std::vector<int32_t> e(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    std::iota(e.begin(), e.end(), 0);
    std::shuffle(e.begin(), e.end(), rng);
    ids.insert(ids.end(), e.begin(), e.begin() + K);
  }
  return ids;
}

// One call's x, ids, weights and residual.
struct MoeInputs {
  GpuTensor x, ids, w, res;
  ops::MoeArgs args(const Experts& ex) const {
    return {.x = x.gpu, .ids = ids.gpu, .weights = w.gpu,
            .w = {.gate_up_blocks = ex.gu_b.gpu, .gate_up_scales = ex.gu_s.gpu, .gate_up_bias = ex.gu_bias.gpu,
                  .down_blocks = ex.dn_b.gpu, .down_scales = ex.dn_s.gpu, .down_bias = ex.dn_bias.gpu},
            .residual = res.gpu};
  }
};
MoeInputs make_inputs(int64_t T, int64_t D, int K, const std::vector<int32_t>& ids, uint64_t seed) {
  return {.x = bf16_tensor(random_floats(size_t(T * D), seed, -2.0f, 2.0f), {T, D}),
          .ids = raw(ids, DType::I32, {T, K}),
          .w = raw(random_floats(size_t(T * K), seed + 1, 0.05f, 1.0f), DType::F32, {T, K}),
          .res = bf16_tensor(random_floats(size_t(T * D), seed + 2, -0.5f, 0.5f), {T, D})};
}

// The batches of the sweep: MXSERVE_SWEEP_T=64,128 or the default list.
std::vector<int64_t> sweep_tokens() {
  std::vector<int64_t> Ts{1, 2, 4, 8, 16, 32, 64, 96, 128, 192, 256, 512, 2048};
  if (const char* env = std::getenv("MXSERVE_SWEEP_T")) {
    Ts.clear();
    for (const char* c = env;;) {
      char* end = nullptr;
      const long long T = std::strtoll(c, &end, 10);
      if (end == c) break;
      Ts.push_back(T);
      c = *end == ',' ? end + 1 : end;
    }
  }
  return Ts;
}

// The per-(token, slot) GEMVs (cuda::moe) and the grouped path (cuda::moe_grouped: each GEMM
// family pinned, then FP8 activations) at 120b sizes, µs per call (route + GEMMs + finalize);
// eight id sets rotate so that routed experts change between calls. The mma.sync pin takes the
// thin GEMMs up to heuristics::kShortTileMaxPairsPerExpert pairs per expert, the grouped ones above.
void sweep_moe_grouped() {
  const int64_t E = 128, D = 2880, F = 2880;
  const int K = 4;
  const Experts ex = make_experts(E, D, F, 5000);
  std::printf("| T | bf16_mxfp4w_moe_gemv us | bf16_mxfp4w_moe_thin / _grouped us | sm90_bf16_mxfp4w_moe_grouped us "
              "| e4m3_mxfp4w_moe_grouped us |\n|---|---|---|---|---|\n");
  for (const int64_t T : sweep_tokens()) {
    std::vector<MoeInputs> sets;
    for (int i = 0; i < 8; ++i)
      sets.push_back(make_inputs(T, D, K, random_ids(T, K, int(E), 5100 + 8 * T + i), 5200 + i));
    auto time_us = [&](auto fn) {
      const int iters = T >= 512 ? 16 : 48;
      for (int i = 0; i < 8; ++i) must(fn(sets[size_t(i)].args(ex)));
      must(ops::synchronize(bench::ctx()));
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) must(fn(sets[size_t(i % 8)].args(ex)));
      must(ops::synchronize(bench::ctx()));
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    };
    const double g = T <= 256 ? time_us([](const ops::MoeArgs& a) { return cuda::moe(*bench::ctx().cuda(), a); }) : 0.0;
    bench::ctx().pin_moe_grouped(heuristics::MoeGroupedPin::kMmaSync);
    const double q = time_us([](const ops::MoeArgs& a) { return cuda::moe_grouped(*bench::ctx().cuda(), a, bench::ctx().moe_grouped_pin()); });
    double qw = 0.0;
    if (cuda::moe_grouped_wgmma_available()) {
      bench::ctx().pin_moe_grouped(heuristics::MoeGroupedPin::kWgmma);
      qw = time_us([](const ops::MoeArgs& a) { return cuda::moe_grouped(*bench::ctx().cuda(), a, bench::ctx().moe_grouped_pin()); });
    }
    bench::ctx().pin_moe_grouped(heuristics::MoeGroupedPin::kAuto);
    const double q8 = time_us([](ops::MoeArgs a) {
      a.activation = ops::MoeActivation::FP8;
      return cuda::moe_grouped(*bench::ctx().cuda(), a, bench::ctx().moe_grouped_pin());
    });
    std::printf("| %lld | %.1f | %.1f | %.1f | %.1f |\n", static_cast<long long>(T), g, q, qw, q8);
  }
}

// ---- all_reduce ----------------------------------------------------------------------------------
std::vector<int> int_list(const char* env, const char* fallback) {
  std::vector<int> v;
  std::stringstream ss(std::getenv(env) ? std::getenv(env) : fallback);
  for (std::string x; std::getline(ss, x, ',');) v.push_back(std::stoi(x));
  return v;
}

// Latency of one all-reduce of T rows of 2880 BF16 inside a CUDA graph (100 calls per graph, every
// rank on its own thread); group sizes beyond the machine's GPUs are skipped.
void sweep_all_reduce() {
  for (int n : int_list("MXSERVE_TP_SIZES", "2,4")) {
    if (ops::gpu_count() < n) continue;
    for (int T : int_list("MXSERVE_TP_TOKENS", "1,8,64")) {
      ops::CollectiveShape s{.max_tokens = T, .width = 2880, .max_rows = 1, .vocab_starts = {}};
      for (int r = 0; r <= n; ++r) s.vocab_starts.push_back(r);
      const auto group = must(ops::make_collectives(Device::CUDA, n, s));
      constexpr int kCalls = 100, kReplays = 20;
      std::vector<double> per_call(static_cast<size_t>(n), 0.0);
      std::vector<std::thread> threads;
      for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
          must(ops::use_gpu(Device::CUDA, r));
          const auto cx = must(ops::Context::create(Device::CUDA));  // this rank's, on its GPU
          const ops::Buffer x = must(ops::Buffer::allocate(Device::CUDA, size_t(T) * 2880 * 2));
          const Tensor xt = x.view(DType::BF16, {T, 2880});
          ops::Collective& c = *group[size_t(r)];
          per_call[size_t(r)] = graph_us_per_call(
              [&](int) { return c.all_reduce_add(*cx, ops::PartialSlot::Attention, xt); }, kCalls, kReplays, *cx);
        });
      for (auto& t : threads) t.join();
      std::printf("bf16_all_reduce_add, %d GPUs, %d x 2880 bf16: %.2f us per call (rank 0, in a CUDA graph)\n", n, T,
                  per_call[0]);
    }
  }
}

struct Sweep {
  const char* name;
  void (*run)();
};
constexpr Sweep kSweeps[] = {{"moe_router", sweep_moe_router},         {"input_norm", sweep_input_norm},
                             {"mxfp4_gemv", sweep_mxfp4_gemv},         {"qkv_projection", sweep_qkv_projection},
                             {"moe_grouped", sweep_moe_grouped},       {"all_reduce", sweep_all_reduce}};

}  // namespace
}  // namespace mx::bench

int main(int argc, char** argv) {
  using namespace mx;
  const std::string want = argc > 1 ? argv[1] : "";
  const auto* sweep = std::find_if(std::begin(bench::kSweeps), std::end(bench::kSweeps),
                                   [&](const bench::Sweep& s) { return want == s.name; });
  if (argc != 2 || sweep == std::end(bench::kSweeps)) {
    std::fprintf(stderr, "usage: bench_sweeps <sweep>, one of:");
    for (const bench::Sweep& s : bench::kSweeps) std::fprintf(stderr, " %s", s.name);
    std::fprintf(stderr, "\n");
    return 2;
  }
  if (!ops::cuda_available()) {
    std::printf("bench_sweeps: no CUDA device\n");
    return 0;
  }
  sweep->run();
  return 0;
}
