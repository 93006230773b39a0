// The sampling stage's logits ops on CUDA (f32_logprobs_topk, f32_logits_process,
// f32_logprobs_chosen) against the CPU reference on fresh random rows at the vocabulary size and
// at odd small sizes: ties at the top and at the k-th logit, -inf and NaN, rows without work,
// k = 0, 1, 20; every entry kind, a token in all three kinds, tokens absent from the history.
// Then the whole stage captured in one CUDA graph, and its cost per step at batch 1.
// Suites by kernel: CudaF32LogprobsTopk, CudaF32LogitsProcess, CudaF32LogprobsChosen; the stage
// (those three and f32_sample): CudaSamplingStage.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/sample_rule.h"
#include "test_context.h"

namespace mx {
namespace {

constexpr int kTop = ops::kMaxTopLogprobs;
constexpr int64_t kVocab = 201088;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kUntouched = 123.0f;  // outputs hold this before an op
constexpr int32_t kUntouchedId = -7;

template <typename T>
std::vector<T> from_gpu(const test::Mirror& m) {
  std::vector<T> out(size_t(m.gpu.numel()));
  EXPECT_TRUE(ops::copy(Tensor(out.data(), m.gpu.dtype, {m.gpu.numel()}), m.gpu).ok());
  return out;
}
template <typename T>
std::vector<T> from_cpu(const test::Mirror& m) {
  std::vector<T> out(size_t(m.cpu.numel()));
  std::memcpy(out.data(), m.host.data(), out.size() * sizeof(T));
  return out;
}
const Tensor& on(const test::Mirror& m, Device dev) { return dev == Device::CUDA ? m.gpu : m.cpu; }

// GPU sums exp in fp32 per thread then across the block; the CPU in fp64: a few 1e-6 of the lse.
bool close(float got, float want) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::fabs(got - want) <= 2e-5 + 1e-6 * std::fabs(want);
}

// ---- inputs --------------------------------------------------------------------------------
enum class RowKind { Peaked, Uniform, TiedTop, TieAtKth, Quantized, HalfMinusInf, FewFinite, WithNaN, AllEqual, AllMinusInf };
constexpr RowKind kAllKinds[] = {RowKind::Peaked,    RowKind::TieAtKth,     RowKind::FewFinite,
                                 RowKind::TiedTop,   RowKind::Quantized,    RowKind::HalfMinusInf,
                                 RowKind::WithNaN,   RowKind::AllEqual,     RowKind::Uniform,
                                 RowKind::AllMinusInf};
constexpr int32_t kRowsK[] = {20, 1, 20, -1, 0};  // co-prime with the 10 kinds: every pair in 50 rows

void fill_row(float* l, int64_t V, RowKind kind, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 2.5f);
  std::uniform_int_distribution<int64_t> id(0, V - 1);
  auto set_random = [&](int n, float value) {
    for (int i = 0; i < n; ++i) l[id(rng)] = value;
  };
  if (kind == RowKind::Uniform) {
    std::uniform_real_distribution<float> u(-8.0f, 8.0f);  // coarse near 8: float ties are likely
    for (int64_t v = 0; v < V; ++v) l[v] = u(rng);
    return;
  }
  if (kind == RowKind::Quantized) {  // integer logits: hundreds tie at each of the top values
    for (int64_t v = 0; v < V; ++v) l[v] = std::round(normal(rng) * 0.6f);
    return;
  }
  if (kind == RowKind::AllEqual || kind == RowKind::AllMinusInf || kind == RowKind::FewFinite) {
    std::fill(l, l + V, kind == RowKind::AllEqual ? 0.5f : -kInf);
    if (kind == RowKind::FewFinite) {  // k > the finite count: the lowest -inf ids follow
      set_random(5, 3.0f);
      l[V - 1] = 4.0f;
    }
    return;
  }
  for (int64_t v = 0; v < V; ++v) l[v] = normal(rng);
  for (int i = 0; i < 8; ++i) l[id(rng)] = 12.0f + 4.0f * std::uniform_real_distribution<float>(0, 1)(rng);
  const float top = *std::max_element(l, l + V);
  if (kind == RowKind::TiedTop) set_random(std::min<int>(40, int(V / 4)), top);  // > k ties at the max
  if (kind == RowKind::TieAtKth) {  // 10 above, then thousands tied at 15: the first in id order fill
    set_random(int(std::min<int64_t>(2000, V / 4)), 15.0f);
    for (int i = 0; i < 10; ++i) l[id(rng)] = 20.0f + float(i);
  }
  if (kind == RowKind::HalfMinusInf)
    for (int64_t v = 0; v < V; v += 2) l[v] = -kInf;
  if (kind == RowKind::WithNaN) {
    set_random(int(std::max<int64_t>(1, V / 100)), kNaN);
    l[0] = kNaN;  // NaN ranks as -inf: never above a finite logit
  }
}

struct TopkCase {
  int64_t R, V;
  std::vector<float> logits;
  std::vector<int32_t> rows_k;
};

TopkCase topk_case(int64_t R, int64_t V, uint64_t seed, std::vector<RowKind> kinds = {std::begin(kAllKinds), std::end(kAllKinds)},
                   std::vector<int32_t> ks = {std::begin(kRowsK), std::end(kRowsK)}) {
  TopkCase c{R, V, std::vector<float>(size_t(R * V)), {}};
  std::mt19937_64 rng(seed);
  for (int64_t r = 0; r < R; ++r) {
    fill_row(c.logits.data() + r * V, V, kinds[size_t(r) % kinds.size()], rng);
    c.rows_k.push_back(ks[size_t(r) % ks.size()]);
  }
  return c;
}

struct TopkOut {
  std::vector<float> lse, logprobs;
  std::vector<int32_t> ids;
};

// Runs logprobs_topk on both backends over the same inputs.
std::pair<TopkOut, TopkOut> run_topk(const TopkCase& c) {
  test::Mirror l = test::raw(c.logits, DType::F32, {c.R, c.V}), k = test::raw(c.rows_k, DType::I32, {c.R});
  test::Mirror lse = test::raw(std::vector<float>(size_t(c.R), kUntouched), DType::F32, {c.R});
  test::Mirror ids = test::raw(std::vector<int32_t>(size_t(c.R * kTop), kUntouchedId), DType::I32, {c.R, kTop});
  test::Mirror lp = test::raw(std::vector<float>(size_t(c.R * kTop), kUntouched), DType::F32, {c.R, kTop});
  for (Device dev : {Device::CPU, Device::CUDA}) {
    const Status st = ops::logprobs_topk(test::ctx(), 
        {.logits = on(l, dev), .rows_k = on(k, dev), .lse = on(lse, dev), .top_ids = on(ids, dev), .top_logprobs = on(lp, dev)});
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return {{from_gpu<float>(lse), from_gpu<float>(lp), from_gpu<int32_t>(ids)},
          {from_cpu<float>(lse), from_cpu<float>(lp), from_cpu<int32_t>(ids)}};
}

// Rows with k < 0 untouched; else the lse, the first min(k, V) ids (bitwise) and their logprobs.
::testing::AssertionResult same_topk(const TopkOut& got, const TopkOut& want, const TopkCase& c) {
  for (int64_t r = 0; r < c.R; ++r) {
    const int32_t k = c.rows_k[size_t(r)];
    const size_t at = size_t(r * kTop);
    if (k < 0) {
      for (int j = 0; j < kTop; ++j)
        if (got.ids[at + j] != kUntouchedId || std::bit_cast<uint32_t>(got.logprobs[at + j]) != std::bit_cast<uint32_t>(kUntouched))
          return ::testing::AssertionFailure() << "row " << r << " (k < 0) column " << j << " was written";
      if (got.lse[size_t(r)] != kUntouched) return ::testing::AssertionFailure() << "row " << r << " (k < 0): lse written";
      continue;
    }
    if (!close(got.lse[size_t(r)], want.lse[size_t(r)]))
      return ::testing::AssertionFailure() << "row " << r << " lse " << got.lse[size_t(r)] << " vs " << want.lse[size_t(r)];
    for (int64_t j = 0; j < std::min<int64_t>(k, c.V); ++j) {
      const float x = got.ids[at + j] >= 0 && got.ids[at + j] < c.V ? c.logits[size_t(r * c.V + got.ids[at + j])] : kNaN;
      if (got.ids[at + j] != want.ids[at + j] || !close(got.logprobs[at + j], want.logprobs[at + j]))
        return ::testing::AssertionFailure() << "row " << r << " (k " << k << ") column " << j << ": id " << got.ids[at + j]
                                             << " (logit " << x << ") logprob " << got.logprobs[at + j] << ", want id "
                                             << want.ids[at + j] << " logprob " << want.logprobs[at + j];
    }
  }
  return ::testing::AssertionSuccess();
}

void expect_topk_matches(int64_t R, int64_t V, uint64_t seed) {
  const TopkCase c = topk_case(R, V, seed);
  const auto [gpu, cpu] = run_topk(c);
  EXPECT_TRUE(same_topk(gpu, cpu, c)) << "R=" << R << " V=" << V;
}

TEST(CudaF32LogprobsTopk, LogprobsTopkMatchesCpuAtVocabSize) {
  MX_REQUIRE_CUDA();
  for (int64_t R : {1, 3, 64}) expect_topk_matches(R, kVocab, 100 + uint64_t(R));
}

TEST(CudaF32LogprobsTopk, LogprobsTopkMatchesCpuAt256Rows) {
  MX_REQUIRE_CUDA();
  expect_topk_matches(256, kVocab, 7);
}

// Odd sizes: rows not 16-byte aligned, V < 1024 (idle warps), V < k.
TEST(CudaF32LogprobsTopk, LogprobsTopkMatchesCpuAtOddSmallVocab) {
  MX_REQUIRE_CUDA();
  for (int64_t V : {7, 37, 1001, 4099, 65537}) expect_topk_matches(64, V, 200 + uint64_t(V));
}

TEST(CudaF32LogprobsTopk, LogprobsTopkSingleRows) {
  MX_REQUIRE_CUDA();
  for (RowKind kind : kAllKinds)
    for (int32_t k : {20, 1, 0, -1}) {
      const TopkCase c = topk_case(1, kVocab, 300 + uint64_t(k), {kind}, {k});
      const auto [gpu, cpu] = run_topk(c);
      EXPECT_TRUE(same_topk(gpu, cpu, c)) << "kind " << int(kind) << " k " << k;
    }
}

// The comparison catches a swapped pair of ids, an lse off by 1e-3 and a write into a k < 0 row.
TEST(CudaF32LogprobsTopk, TopkCheckerCatchesErrors) {
  MX_REQUIRE_CUDA();
  const TopkCase c = topk_case(5, 4099, 9, {RowKind::Peaked}, {20, 20, 20, -1, 20});
  const auto [gpu, cpu] = run_topk(c);
  ASSERT_TRUE(same_topk(gpu, cpu, c));
  TopkOut bad = gpu;
  std::swap(bad.ids[kTop + 3], bad.ids[kTop + 4]);
  EXPECT_FALSE(same_topk(bad, cpu, c));
  bad = gpu;
  bad.lse[2] += 1e-3f;
  EXPECT_FALSE(same_topk(bad, cpu, c));
  bad = gpu;
  bad.ids[3 * kTop + 19] = 0;
  EXPECT_FALSE(same_topk(bad, cpu, c));
}

// ---- logits_process and logprobs_chosen -------------------------------------------------------
struct ProcessCase {
  int64_t R, V;
  std::vector<float> logits, penalties;
  std::vector<int32_t> offsets;
  std::vector<ops::LogitsEntry> entries;
};

// Per row (r % 5): no entries; penalties only; every kind with overlaps (a token in all three,
// biases and bans of tokens absent from the history, r < 1 and negative penalties); 3000 history
// tokens; biases and bans with the penalties off. Entries past offsets[R] must stay unread.
ProcessCase process_case(int64_t R, int64_t V, uint64_t seed) {
  ProcessCase c{R, V, std::vector<float>(size_t(R * V)), {}, {0}, {}};
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (float& x : c.logits) x = normal(rng);
  std::vector<int32_t> pool(static_cast<size_t>(V));
  std::iota(pool.begin(), pool.end(), 0);
  const float pens[5][3] = {{1.3f, 0.4f, 0.2f}, {1.3f, 0.4f, 0.2f}, {0.8f, -0.5f, -0.3f}, {1.1f, 0.1f, 0.7f}, {1, 0, 0}};
  const int history[5] = {0, 50, 40, 3000, 0}, fresh[5] = {0, 0, 20, 0, 30};
  for (int64_t r = 0; r < R; ++r) {
    const int mode = int(r % 5);
    c.penalties.insert(c.penalties.end(), pens[mode], pens[mode] + 3);
    const int h = int(std::min<int64_t>(history[mode], V / 2)), f = int(std::min<int64_t>(fresh[mode], V / 4));
    for (int i = 0; i < h + f; ++i) std::swap(pool[size_t(i)], pool[size_t(i) + rng() % (size_t(V) - size_t(i))]);
    for (int i = 0; i < h; ++i)
      c.entries.push_back({.token = pool[size_t(i)], .kind = ops::LogitsEntryKind::Penalty, .count = int32_t(rng() % 4),
                           .aux = int32_t(rng() % 2)});
    std::uniform_real_distribution<float> b(-5.0f, 5.0f);
    auto add = [&](ops::LogitsEntryKind kind, int32_t token) {
      const float bias = rng() % 7 == 0 ? (rng() % 2 ? 100.0f : -100.0f) : b(rng);
      c.entries.push_back({.token = token, .kind = kind, .aux = kind == ops::LogitsEntryKind::Bias ? std::bit_cast<int32_t>(bias) : 0});
    };
    for (auto kind : {ops::LogitsEntryKind::Bias, ops::LogitsEntryKind::Ban}) {
      for (int i = 0; i < h / 4; ++i) add(kind, pool[size_t(i)]);  // also in the history (i = 0: all three kinds)
      for (int i = h; i < h + f; i += 1 + int(kind == ops::LogitsEntryKind::Ban)) add(kind, pool[size_t(i)]);
    }
    if (mode == 2 || mode == 4) {  // guided decoding: a mask over a few random words; every other
      // row of these in the MaskOthers form (the words without an entry forbidden)
      const bool others = (r / 5) % 2 == 1;
      const size_t at = c.entries.size();
      if (others) c.entries.push_back({.token = 0, .kind = ops::LogitsEntryKind::MaskOthers});
      for (int64_t w = 0; w * 32 < V; ++w)
        if (rng() % 3 == 0)
          c.entries.push_back({.token = int32_t(w * 32), .kind = ops::LogitsEntryKind::Mask,
                               .aux = int32_t(uint32_t(rng()) & uint32_t(rng()))});
      if (others) c.entries[at].count = int32_t(c.entries.size() - at - 1);
    }
    c.offsets.push_back(int32_t(c.entries.size()));
  }
  for (int i = 0; i < 5; ++i)  // beyond offsets[R]
    c.entries.push_back({.token = int32_t(i), .kind = ops::LogitsEntryKind::Ban});
  return c;
}

// On x86-64 the two agree bit for bit; a host compiler that fuses x·r − y into an FMA (aarch64)
// may differ by one rounding.
bool within_one_ulp(float a, float b) {
  if (std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b)) return true;
  if (!std::isfinite(a) || !std::isfinite(b)) return false;
  return std::llabs(int64_t(float_key(a)) - int64_t(float_key(b))) <= 1;
}

struct Processed {
  std::vector<float> logits, saved;
};

// Processed logits within an ulp (untouched rows and tokens: bitwise), saved[] bitwise.
::testing::AssertionResult same_processed(const Processed& got, const Processed& want, const ProcessCase& c) {
  for (size_t i = 0; i < want.logits.size(); ++i)
    if (!within_one_ulp(got.logits[i], want.logits[i]))
      return ::testing::AssertionFailure() << "row " << int64_t(i) / c.V << " token " << int64_t(i) % c.V << ": raw "
                                           << c.logits[i] << ", processed " << got.logits[i] << " vs " << want.logits[i];
  for (size_t i = 0; i < want.saved.size(); ++i)
    if (std::bit_cast<uint32_t>(got.saved[i]) != std::bit_cast<uint32_t>(want.saved[i]))
      return ::testing::AssertionFailure() << "saved[" << i << "] (token " << c.entries[i].token << ") " << got.saved[i]
                                           << " vs " << want.saved[i];
  return ::testing::AssertionSuccess();
}

struct ProcessMirrors {
  test::Mirror logits, penalties, offsets, entries, saved;
  explicit ProcessMirrors(const ProcessCase& c)
      : logits(test::raw(c.logits, DType::F32, {c.R, c.V})),
        penalties(test::raw(c.penalties, DType::F32, {c.R, 3})),
        offsets(test::raw(c.offsets, DType::I32, {c.R + 1})),
        entries(test::raw(c.entries, DType::I32, {int64_t(c.entries.size()), 4})),
        saved(test::raw(std::vector<float>(c.entries.size(), kUntouched), DType::F32, {int64_t(c.entries.size())})) {}
  ops::LogitsProcessArgs args(Device dev) const {
    return {.logits = on(logits, dev), .penalties = on(penalties, dev), .offsets = on(offsets, dev),
            .entries = on(entries, dev), .saved = on(saved, dev)};
  }
};

std::pair<Processed, Processed> run_process(const ProcessCase& c) {
  ProcessMirrors m(c);
  for (Device dev : {Device::CPU, Device::CUDA}) {
    const Status st = ops::logits_process(test::ctx(), m.args(dev));
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return {{from_gpu<float>(m.logits), from_gpu<float>(m.saved)}, {from_cpu<float>(m.logits), from_cpu<float>(m.saved)}};
}

TEST(CudaF32LogitsProcess, LogitsProcessMatchesCpu) {
  MX_REQUIRE_CUDA();
  for (auto [R, V] : {std::pair<int64_t, int64_t>{1, kVocab}, {3, kVocab}, {64, kVocab}, {256, kVocab}, {64, 37}, {5, 1001}}) {
    const ProcessCase c = process_case(R, V, 400 + uint64_t(R * V));
    const auto [gpu, cpu] = run_process(c);
    EXPECT_TRUE(same_processed(gpu, cpu, c)) << "R=" << R << " V=" << V;
  }
}

TEST(CudaF32LogitsProcess, ProcessCheckerCatchesErrors) {
  MX_REQUIRE_CUDA();
  const ProcessCase c = process_case(5, 1001, 11);
  const auto [gpu, cpu] = run_process(c);
  ASSERT_TRUE(same_processed(gpu, cpu, c));
  Processed bad = gpu;
  const int32_t t = c.entries[size_t(c.offsets[1])].token;  // row 1's first penalised token
  bad.logits[size_t(c.V + t)] = std::nextafter(std::nextafter(bad.logits[size_t(c.V + t)], kInf), kInf);
  EXPECT_FALSE(same_processed(bad, cpu, c));
  bad = gpu;
  bad.saved.back() = 0.0f;  // an entry past offsets[R] written
  EXPECT_FALSE(same_processed(bad, cpu, c));
}

// logprobs_chosen on identical inputs: the same floats. Saved values differ per entry so that
// reading any but the token's first entry shows.
TEST(CudaF32LogprobsChosen, LogprobsChosenMatchesCpu) {
  MX_REQUIRE_CUDA();
  for (auto [R, V] : {std::pair<int64_t, int64_t>{1, kVocab}, {64, kVocab}, {256, 1001}}) {
    const ProcessCase c = process_case(R, V, 500 + uint64_t(R));
    ProcessMirrors m(c);
    const std::vector<float> saved = test::random_floats(c.entries.size(), 3, -10.0f, 10.0f);
    std::vector<int32_t> ids, rows_k;
    std::mt19937_64 rng(77);
    for (int64_t r = 0; r < R; ++r) {
      const int32_t b = c.offsets[size_t(r)], e = c.offsets[size_t(r) + 1];
      const int pick = int(r % 3);  // the first entry's token (all three kinds in mode 2), the last one's, a fresh one
      ids.push_back(b < e && pick < 2 ? c.entries[size_t(pick == 0 ? b : e - 1)].token : int32_t(rng() % uint64_t(V)));
      rows_k.push_back(r % 4 == 3 ? -1 : int32_t(r % 21));
    }
    test::Mirror sv = test::raw(saved, DType::F32, {int64_t(saved.size())}), id = test::raw(ids, DType::I32, {R});
    test::Mirror k = test::raw(rows_k, DType::I32, {R});
    test::Mirror lse = test::raw(test::random_floats(size_t(R), 5, 0.0f, 20.0f), DType::F32, {R});
    test::Mirror out = test::raw(std::vector<float>(size_t(R), kUntouched), DType::F32, {R});
    for (Device dev : {Device::CPU, Device::CUDA}) {
      const Status st = ops::logprobs_chosen(test::ctx(), {.logits = on(m.logits, dev), .offsets = on(m.offsets, dev),
                                              .entries = on(m.entries, dev), .saved = on(sv, dev), .ids = on(id, dev),
                                              .rows_k = on(k, dev), .lse = on(lse, dev), .logprobs = on(out, dev)});
      ASSERT_TRUE(st.ok()) << st.message();
    }
    const std::vector<float> gpu = from_gpu<float>(out), cpu = from_cpu<float>(out);
    for (int64_t r = 0; r < R; ++r)
      EXPECT_EQ(std::bit_cast<uint32_t>(gpu[size_t(r)]), std::bit_cast<uint32_t>(cpu[size_t(r)]))
          << "row " << r << " id " << ids[size_t(r)] << " k " << rows_k[size_t(r)] << ": " << gpu[size_t(r)] << " vs "
          << cpu[size_t(r)];
  }
}

// ---- the stage in one graph ---------------------------------------------------------------------
// topk over the raw logits, process, sample, chosen: captured once, replayed; against the eager
// run (bitwise) and the CPU (greedy rows' ids; every row's chosen logprob = raw logit - lse).
TEST(CudaSamplingStage, StageCapturedInOneGraph) {
  MX_REQUIRE_CUDA();
  const int64_t R = 8, V = kVocab;
  ProcessCase c = process_case(R, V, 600);
  const TopkCase t = topk_case(R, V, 601, {RowKind::Peaked, RowKind::TiedTop}, {20, -1, 1, 0});
  c.logits = t.logits;
  ProcessMirrors m(c);
  test::Mirror k = test::raw(t.rows_k, DType::I32, {R});
  test::Mirror lse = test::raw(std::vector<float>(size_t(R), kUntouched), DType::F32, {R});
  test::Mirror ids = test::raw(std::vector<int32_t>(size_t(R * kTop), kUntouchedId), DType::I32, {R, kTop});
  test::Mirror lp = test::raw(std::vector<float>(size_t(R * kTop), kUntouched), DType::F32, {R, kTop});
  std::vector<float> params;
  for (int64_t r = 0; r < R; ++r) params.insert(params.end(), {r < 4 ? 0.0f : 0.8f, 0.95f, 0.0f, r % 2 ? 40.0f : 0.0f});
  test::Mirror pa = test::raw(params, DType::F32, {R, 4});
  test::Mirror seeds = test::raw(std::vector<int32_t>(size_t(R), 17), DType::I32, {R});
  test::Mirror pos = test::raw(std::vector<int32_t>(size_t(R), 3), DType::I32, {R});
  test::Mirror sampled = test::raw(std::vector<int32_t>(size_t(R)), DType::I32, {R});
  test::Mirror chosen = test::raw(std::vector<float>(size_t(R), kUntouched), DType::F32, {R});
  auto stage = [&](Device dev) -> Status {
    MX_TRY(ops::logprobs_topk(test::ctx(), {.logits = on(m.logits, dev), .rows_k = on(k, dev), .lse = on(lse, dev),
                               .top_ids = on(ids, dev), .top_logprobs = on(lp, dev)}));
    MX_TRY(ops::logits_process(test::ctx(), m.args(dev)));
    MX_TRY(ops::sample(test::ctx(), {.logits = on(m.logits, dev), .params = on(pa, dev), .seeds = on(seeds, dev),
                        .positions = on(pos, dev), .ids = on(sampled, dev)}));
    return ops::logprobs_chosen(test::ctx(), {.logits = on(m.logits, dev), .offsets = on(m.offsets, dev), .entries = on(m.entries, dev),
                                 .saved = on(m.saved, dev), .ids = on(sampled, dev), .rows_k = on(k, dev),
                                 .lse = on(lse, dev), .logprobs = on(chosen, dev)});
  };
  const Tensor raw_logits(c.logits.data(), DType::F32, {R, V});
  ASSERT_TRUE(stage(Device::CPU).ok());
  ASSERT_TRUE(stage(Device::CUDA).ok());  // eager: also grows the sampler's scratch before capture
  auto read_all = [&] {
    return std::make_tuple(from_gpu<float>(m.logits), from_gpu<float>(lse), from_gpu<int32_t>(ids),
                           from_gpu<float>(lp), from_gpu<int32_t>(sampled), from_gpu<float>(chosen));
  };
  const auto eager = read_all();
  ASSERT_TRUE(ops::copy(m.logits.gpu, raw_logits).ok());
  auto graph = ops::StepGraph::capture(test::ctx(), [&] { return stage(Device::CUDA); });
  ASSERT_TRUE(graph.ok()) << graph.status().message();
  ASSERT_TRUE(ops::copy(chosen.gpu, Tensor(std::vector<float>(size_t(R), kUntouched).data(), DType::F32, {R})).ok());
  ASSERT_TRUE(graph->replay().ok());
  ASSERT_TRUE(ops::synchronize(test::ctx()).ok());
  const auto replayed = read_all();
  EXPECT_TRUE(eager == replayed) << "graph replay differs from the eager run";
  const auto& [logits, lse_g, ids_g, lp_g, sampled_g, chosen_g] = replayed;
  EXPECT_TRUE(same_topk({lse_g, lp_g, ids_g}, {from_cpu<float>(lse), from_cpu<float>(lp), from_cpu<int32_t>(ids)}, t));
  EXPECT_TRUE(same_processed({logits, from_gpu<float>(m.saved)}, {from_cpu<float>(m.logits), from_cpu<float>(m.saved)}, c));
  const std::vector<int32_t> sampled_c = from_cpu<int32_t>(sampled);
  for (int64_t r = 0; r < R; ++r) {
    const int32_t id = sampled_g[size_t(r)];
    ASSERT_TRUE(id >= 0 && id < V) << "row " << r;
    if (r < 4) {
      EXPECT_EQ(id, sampled_c[size_t(r)]) << "greedy row " << r;
    }
    if (t.rows_k[size_t(r)] < 0) {
      EXPECT_EQ(chosen_g[size_t(r)], kUntouched) << "row " << r;
      continue;
    }
    EXPECT_EQ(chosen_g[size_t(r)], c.logits[size_t(r * V + id)] - lse_g[size_t(r)]) << "row " << r << " id " << id;
  }
}

// Microseconds per call at batch 1 inside a graph (the decode step is ~2.3 ms): rows without work
// must cost next to nothing. Printed for docs/PERFORMANCE.md; the bound is loose on purpose.
TEST(CudaSamplingStage, CostAtBatchOne) {
  MX_REQUIRE_CUDA();
  const int64_t V = kVocab;
  for (int32_t want : {-1, 0, 20}) {
    const TopkCase t = topk_case(1, V, 700, {RowKind::Peaked}, {want});
    test::Mirror l = test::raw(t.logits, DType::F32, {1, V}), k = test::raw(t.rows_k, DType::I32, {1});
    test::Mirror lse = test::raw(std::vector<float>(1), DType::F32, {1});
    test::Mirror ids = test::raw(std::vector<int32_t>(kTop), DType::I32, {1, kTop});
    test::Mirror lp = test::raw(std::vector<float>(kTop), DType::F32, {1, kTop});
    const double us = test::graph_us_per_call([&](int) {
      return ops::logprobs_topk(test::ctx(), {.logits = l.gpu, .rows_k = k.gpu, .lse = lse.gpu, .top_ids = ids.gpu, .top_logprobs = lp.gpu});
    }, 20, 50);
    std::printf("logprobs_topk V=%lld k=%d: %.2f us\n", static_cast<long long>(V), want, us);
    if (want < 0) {
      EXPECT_LT(us, 10.0);
    }
  }
  for (int64_t R : {1, 64})
    for (bool with_entries : {false, true}) {
      ProcessCase c = process_case(R, V, 800);
      if (!with_entries) c.offsets.assign(size_t(R + 1), 0);  // the common decode step
      ProcessMirrors m(c);
      const double us = test::graph_us_per_call([&](int) { return ops::logits_process(test::ctx(), m.args(Device::CUDA)); }, 20, 50);
      std::printf("logits_process R=%lld %s entries: %.2f us\n", static_cast<long long>(R), with_entries ? "with" : "without",
                  us);
      if (!with_entries) {
        EXPECT_LT(us, 10.0);
      }
      test::Mirror ids = test::raw(std::vector<int32_t>(size_t(R), 5), DType::I32, {R});
      test::Mirror k = test::raw(std::vector<int32_t>(size_t(R), with_entries ? 0 : -1), DType::I32, {R});
      test::Mirror lse = test::raw(std::vector<float>(size_t(R)), DType::F32, {R});
      test::Mirror out = test::raw(std::vector<float>(size_t(R)), DType::F32, {R});
      const double chosen_us = test::graph_us_per_call([&](int) {
        return ops::logprobs_chosen(test::ctx(), {.logits = m.logits.gpu, .offsets = m.offsets.gpu, .entries = m.entries.gpu,
                                     .saved = m.saved.gpu, .ids = ids.gpu, .rows_k = k.gpu, .lse = lse.gpu,
                                     .logprobs = out.gpu});
      }, 20, 50);
      std::printf("logprobs_chosen R=%lld %s: %.2f us\n", static_cast<long long>(R),
                  with_entries ? "k = 0, with entries" : "k = -1", chosen_us);
      if (!with_entries) {
        EXPECT_LT(chosen_us, 10.0);
      }
    }
}

}  // namespace
}  // namespace mx
