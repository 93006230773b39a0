// Hand-worked cases for the CPU reference of the sampling stage's logits ops: logprobs_topk (ties,
// -inf and NaN, k = 0, k > V, rows without logprobs), logits_process (the repetition rule on both
// signs, presence and frequency, bias, ban, a token in all three kinds, saved raw values) and
// logprobs_chosen; and the contracts dispatch refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "runtime/sampler.h"
#include "test_context.h"

namespace mx {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int kTop = ops::kMaxTopLogprobs;
constexpr float kUntouched = 123.0f;  // what outputs hold before the op

struct Topk {
  std::vector<float> lse, logprobs;
  std::vector<int32_t> ids;
  Status status;
};

Topk topk(std::vector<float> logits, std::vector<int32_t> rows_k) {
  const int64_t R = int64_t(rows_k.size()), V = int64_t(logits.size()) / R;
  Topk t{std::vector<float>(size_t(R), kUntouched), std::vector<float>(size_t(R * kTop), kUntouched),
         std::vector<int32_t>(size_t(R * kTop), -7), ok_status()};
  t.status = ops::logprobs_topk(test::ctx(), {.logits = Tensor(logits.data(), DType::F32, {R, V}),
                                 .rows_k = Tensor(rows_k.data(), DType::I32, {R}),
                                 .lse = Tensor(t.lse.data(), DType::F32, {R}),
                                 .top_ids = Tensor(t.ids.data(), DType::I32, {R, kTop}),
                                 .top_logprobs = Tensor(t.logprobs.data(), DType::F32, {R, kTop})});
  return t;
}

TEST(LogitsOps, LogprobsTopkRanksByLogitThenId) {
  // Row 0: a tie at 3 (ids 1, 2), -inf at 3, NaN (ranks as -inf, after id 3) at 4.
  const Topk t = topk({1, 3, 3, -kInf, kNaN, 2, /* row 1 */ 0, 0, 0, 0, 0, 0, /* row 2 */ 5, 4, 3, 2, 1, 0},
                      {20, 1, -1});
  ASSERT_TRUE(t.status.ok()) << t.status.message();
  const double lse0 = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0));
  EXPECT_NEAR(t.lse[0], lse0, 1e-6);
  // k = 20 > V = 6: all six, NaN last; the logprob of -inf and NaN is -inf.
  EXPECT_EQ(std::vector<int32_t>(t.ids.begin(), t.ids.begin() + 6), (std::vector<int32_t>{1, 2, 5, 0, 3, 4}));
  const std::vector<double> want = {3 - lse0, 3 - lse0, 2 - lse0, 1 - lse0};
  for (size_t j = 0; j < want.size(); ++j) EXPECT_NEAR(t.logprobs[j], want[j], 1e-6) << j;
  EXPECT_EQ(t.logprobs[4], -kInf);
  EXPECT_EQ(t.logprobs[5], -kInf);
  // Row 1: all equal: the lowest id, log(1/6).
  EXPECT_NEAR(t.lse[1], std::log(6.0), 1e-6);
  EXPECT_EQ(t.ids[kTop], 0);
  EXPECT_NEAR(t.logprobs[kTop], -std::log(6.0), 1e-6);
  // Row 2: k = -1 leaves every output untouched.
  EXPECT_EQ(t.lse[2], kUntouched);
  for (int j = 0; j < kTop; ++j) EXPECT_EQ(t.ids[size_t(2 * kTop + j)], -7);
}

TEST(LogitsOps, LogprobsTopkWithZeroKWritesOnlyTheLse) {
  const Topk t = topk({0, std::log(3.0f)}, {0});
  ASSERT_TRUE(t.status.ok());
  EXPECT_NEAR(t.lse[0], std::log(4.0), 1e-6);
  EXPECT_EQ(t.ids[0], -7);
  EXPECT_EQ(t.logprobs[0], kUntouched);
}

TEST(LogitsOps, LogprobsTopkOfAnAllMinusInfRow) {
  const Topk t = topk({-kInf, kNaN, -kInf}, {2});
  ASSERT_TRUE(t.status.ok());
  EXPECT_EQ(t.lse[0], -kInf);
  EXPECT_EQ(t.ids[0], 0);
  EXPECT_EQ(t.ids[1], 1);
  EXPECT_TRUE(std::isnan(t.logprobs[0]));  // -inf - -inf: no probability is defined
}

// ---- logits_process and logprobs_chosen ------------------------------------------------------

ops::LogitsEntry penalty(int32_t token, int32_t count, bool in_prompt) {
  return {.token = token, .kind = ops::LogitsEntryKind::Penalty, .count = count, .aux = in_prompt ? 1 : 0};
}
ops::LogitsEntry bias(int32_t token, float b) {
  return {.token = token, .kind = ops::LogitsEntryKind::Bias, .aux = std::bit_cast<int32_t>(b)};
}
ops::LogitsEntry ban(int32_t token) { return {.token = token, .kind = ops::LogitsEntryKind::Ban}; }

struct Batch {
  std::vector<float> logits, penalties;
  std::vector<int32_t> offsets;
  std::vector<ops::LogitsEntry> entries;
  std::vector<float> saved;
  int64_t R, V;

  Status process() {
    saved.assign(entries.size(), kUntouched);
    const int64_t N = int64_t(entries.size());
    return ops::logits_process(test::ctx(), {.logits = Tensor(logits.data(), DType::F32, {R, V}),
                                .penalties = Tensor(penalties.data(), DType::F32, {R, 3}),
                                .offsets = Tensor(offsets.data(), DType::I32, {R + 1}),
                                .entries = Tensor(entries.data(), DType::I32, {N, 4}),
                                .saved = Tensor(saved.data(), DType::F32, {N})});
  }
  Status chosen(std::vector<int32_t> ids, std::vector<int32_t> rows_k, std::vector<float> lse, std::vector<float>& out) {
    const int64_t N = int64_t(entries.size());
    return ops::logprobs_chosen(test::ctx(), {.logits = Tensor(logits.data(), DType::F32, {R, V}),
                                 .offsets = Tensor(offsets.data(), DType::I32, {R + 1}),
                                 .entries = Tensor(entries.data(), DType::I32, {N, 4}),
                                 .saved = Tensor(saved.data(), DType::F32, {N}),
                                 .ids = Tensor(ids.data(), DType::I32, {R}),
                                 .rows_k = Tensor(rows_k.data(), DType::I32, {R}),
                                 .lse = Tensor(lse.data(), DType::F32, {R}),
                                 .logprobs = Tensor(out.data(), DType::F32, {R})});
  }
};

// Row 0: repetition 2, presence 0.5, frequency 0.25 over V = 6; row 1 has no entries; row 2 bans.
Batch worked_batch() {
  Batch b{.logits = {4, -3, 0, 1, 2, 6, /* row 1 */ 9, 9, 9, 9, 9, 9, /* row 2 */ 1, 2, 3, 4, 5, 6},
          .penalties = {2, 0.5f, 0.25f, /* row 1 */ 3, 1, 1, /* row 2 */ 1, 0, 0},
          .offsets = {0, 8, 8, 9},
          .entries = {penalty(0, 2, false),  // 4 / 2 - (0.25 * 2 + 0.5) = 1
                      penalty(1, 0, true),   // in the prompt only: -3 * 2 = -6, no presence
                      penalty(2, 1, true),   // 0 * 2 - 0.75 = -0.75
                      penalty(4, 0, false),  // neither generated nor in the prompt: unchanged
                      bias(0, 0.5f), bias(3, -1.5f),  // token 3 is not in the history: 1 - 1.5
                      ban(0), ban(5)},                 // token 0 is in all three kinds
          .saved = {},
          .R = 3,
          .V = 6};
  b.entries.push_back(ban(2));  // row 2
  return b;
}

TEST(LogitsOps, LogitsProcessAppliesThePhasesInOrder) {
  Batch b = worked_batch();
  const Status st = b.process();
  ASSERT_TRUE(st.ok()) << st.message();
  const std::vector<float> want = {-kInf, -6, -0.75f, -0.5f, 2, -kInf, 9, 9, 9, 9, 9, 9, 1, 2, -kInf, 4, 5, 6};
  EXPECT_EQ(b.logits, want);
  // Every entry's saved value is its token's raw logit, whatever entries of it came before.
  EXPECT_EQ(b.saved, (std::vector<float>{4, -3, 0, 2, 4, 1, 4, 6, 3}));
}

// Guided decoding: Mask entries clear the ids whose bits are 0 after the other phases; ids past V
// and words without an entry stay as they were; a Mask entry's saved value is its first id's raw logit.
TEST(LogitsOps, MaskEntriesForbidClearedBits) {
  const int64_t V = 70;
  Batch b{.logits = std::vector<float>(size_t(2 * V)), .penalties = {1, 0, 0, 1, 0, 0}, .offsets = {0, 3, 4},
          .entries = {bias(33, 2.0f),
                      {.token = 0, .kind = ops::LogitsEntryKind::Mask, .aux = int32_t(0x80000005u)},
                      {.token = 64, .kind = ops::LogitsEntryKind::Mask, .aux = 0x3},  // ids 64, 65 of 70
                      {.token = 32, .kind = ops::LogitsEntryKind::Mask, .aux = 0}},
          .saved = {}, .R = 2, .V = V};
  for (size_t i = 0; i < b.logits.size(); ++i) b.logits[i] = float(i % 97);
  const std::vector<float> raw = b.logits;
  ASSERT_TRUE(b.process().ok());
  for (int64_t id = 0; id < V; ++id) {
    const bool allowed0 = id == 0 || id == 2 || id == 31 || (id >= 32 && id < 64) || id == 64 || id == 65;
    const float want0 = !allowed0 ? -kInf : id == 33 ? raw[size_t(id)] + 2.0f : raw[size_t(id)];
    EXPECT_EQ(b.logits[size_t(id)], want0) << "row 0 id " << id;
    const float want1 = id >= 32 && id < 64 ? -kInf : raw[size_t(V + id)];
    EXPECT_EQ(b.logits[size_t(V + id)], want1) << "row 1 id " << id;
  }
  EXPECT_EQ(b.saved, (std::vector<float>{raw[33], raw[0], raw[64], raw[size_t(V + 32)]}));
}

// The other form: after MaskOthers only the Mask entries' words keep their allowed ids; every
// other id of the row is forbidden, past the other phases.
TEST(LogitsOps, MaskOthersForbidsTheWordsWithoutEntries) {
  const int64_t V = 70;
  Batch b{.logits = std::vector<float>(size_t(V)), .penalties = {1, 0, 0}, .offsets = {0, 4},
          .entries = {bias(40, 3.0f), {.token = 0, .kind = ops::LogitsEntryKind::MaskOthers, .count = 2},
                      {.token = 32, .kind = ops::LogitsEntryKind::Mask, .aux = int32_t(0x00000101u)},  // ids 32, 40
                      {.token = 64, .kind = ops::LogitsEntryKind::Mask, .aux = 0x21}},                 // ids 64, 69
          .saved = {}, .R = 1, .V = V};
  for (size_t i = 0; i < b.logits.size(); ++i) b.logits[i] = float(i % 97);
  const std::vector<float> raw = b.logits;
  ASSERT_TRUE(b.process().ok());
  for (int64_t id = 0; id < V; ++id) {
    const bool allowed = id == 32 || id == 40 || id == 64 || id == 69;
    const float want = !allowed ? -kInf : id == 40 ? raw[size_t(id)] + 3.0f : raw[size_t(id)];
    EXPECT_EQ(b.logits[size_t(id)], want) << "id " << id;
  }
  EXPECT_EQ(b.saved, (std::vector<float>{raw[40], raw[0], raw[32], raw[64]}));
  {  // the host form is checked: the count must cover the rest of the row, in increasing ids
    Batch bad = b;
    bad.entries[1].count = 1;
    EXPECT_FALSE(bad.process().ok());
    bad = b;
    std::swap(bad.entries[2], bad.entries[3]);
    EXPECT_FALSE(bad.process().ok());
    bad = b;
    bad.entries[1].token = 32;
    EXPECT_FALSE(bad.process().ok());
  }
}

// SampleRows::add sends a row's mask in the shorter form (MaskOthers where fewer words allow an id
// than forbid one); both give the logits of the mask applied id by id.
TEST(LogitsOps, SampleRowsSendsEitherMaskForm) {
  const int64_t V = 1000;
  std::mt19937_64 rng(77);
  for (const double p_allowed : {0.002, 0.3, 0.97, 1.0, 0.0}) {
    std::vector<uint32_t> mask(size_t((V + 31) / 32), 0u);
    std::bernoulli_distribution allow(p_allowed);
    for (int64_t id = 0; id < V; ++id)
      if (allow(rng)) mask[size_t(id / 32)] |= 1u << (id % 32);
    SampleRows rows;
    rows.add(SamplingParams{}, 0, -1, nullptr, {}, mask);
    const bool others = std::any_of(rows.entries.begin(), rows.entries.end(),
                                    [](const ops::LogitsEntry& e) { return e.kind == ops::LogitsEntryKind::MaskOthers; });
    const auto allowing = std::count_if(mask.begin(), mask.end(), [](uint32_t m) { return m != 0u; });
    const auto forbidding = std::count_if(mask.begin(), mask.end(), [](uint32_t m) { return m != ~0u; });
    EXPECT_EQ(others, allowing < forbidding) << p_allowed;
    if (p_allowed == 0.002 || p_allowed == 0.0) {  // both forms are exercised
      EXPECT_TRUE(others);
    }
    if (p_allowed == 0.97) {
      EXPECT_FALSE(others);
    }
    Batch b{.logits = std::vector<float>(size_t(V)), .penalties = {1, 0, 0}, .offsets = rows.offsets,
            .entries = rows.entries, .saved = {}, .R = 1, .V = V};
    for (size_t i = 0; i < b.logits.size(); ++i) b.logits[i] = float(i % 89) - 40.0f;
    const std::vector<float> raw = b.logits;
    ASSERT_TRUE(b.process().ok());
    for (int64_t id = 0; id < V; ++id) {
      const bool allowed = (mask[size_t(id / 32)] >> (id % 32)) & 1u;
      EXPECT_EQ(b.logits[size_t(id)], allowed ? raw[size_t(id)] : -kInf) << "p " << p_allowed << " id " << id;
    }
  }
}

TEST(LogitsOps, RepetitionDividesPositiveAndMultipliesNegativeLogits) {
  Batch b{.logits = {3, -3, 3, -3}, .penalties = {1.5f, 0, 0, 0.5f, 0, 0}, .offsets = {0, 2, 4},
          .entries = {penalty(0, 1, false), penalty(1, 1, false), penalty(0, 0, true), penalty(1, 0, true)},
          .saved = {}, .R = 2, .V = 2};
  ASSERT_TRUE(b.process().ok());
  EXPECT_EQ(b.logits, (std::vector<float>{2, -4.5f, 6, -1.5f}));  // r < 1 raises both signs
}

TEST(LogitsOps, LogprobsChosenUsesTheRawLogit) {
  Batch b = worked_batch();
  ASSERT_TRUE(b.process().ok());
  std::vector<float> out(3, kUntouched);
  // Row 0 took banned token 0 (raw 4, from its first entry); row 1 has no entries; row 2's token 4
  // has no entry (its logit is raw).
  const Status st = b.chosen({0, 3, 4}, {0, 2, 1}, {10, 20, 30}, out);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(out, (std::vector<float>{4 - 10, 9 - 20, 5 - 30}));
  b.saved[0] = 7;  // the first entry of token 0 is the one read, not the later ones
  ASSERT_TRUE(b.chosen({0, 3, 4}, {0, 2, 1}, {10, 20, 30}, out).ok());
  EXPECT_EQ(out[0], 7 - 10);
  ASSERT_TRUE(b.chosen({3, 3, 4}, {0, 2, 1}, {10, 20, 30}, out).ok());  // token 3: a bias entry only
  EXPECT_EQ(out[0], 1 - 10);
  ASSERT_TRUE(b.chosen({1, 3, 4}, {0, 2, 1}, {10, 20, 30}, out).ok());  // token 1: penalised to -6
  EXPECT_EQ(out[0], -3 - 10);
  out.assign(3, kUntouched);
  ASSERT_TRUE(b.chosen({1, 3, 4}, {0, -1, -1}, {10, 20, 30}, out).ok());  // rows without logprobs
  EXPECT_EQ(out, (std::vector<float>{-3 - 10, kUntouched, kUntouched}));
}

TEST(LogitsOps, DispatchRefusesBrokenContracts) {
  {
    Batch b = worked_batch();
    b.entries[1].token = 6;  // outside V
    EXPECT_FALSE(b.process().ok());
  }
  {
    Batch b = worked_batch();
    b.offsets = {0, 8, 7, 9};  // decreasing
    EXPECT_FALSE(b.process().ok());
  }
  {
    Batch b = worked_batch();
    b.offsets = {0, 8, 8, 10};  // past N
    EXPECT_FALSE(b.process().ok());
  }
  {
    Batch b = worked_batch();
    b.entries[2].kind = ops::LogitsEntryKind(4);
    EXPECT_FALSE(b.process().ok());
  }
  {
    Batch b = worked_batch();
    b.entries[8] = {.token = 1, .kind = ops::LogitsEntryKind::Mask};  // not the start of a 32-id word
    EXPECT_FALSE(b.process().ok());
  }
  {
    Batch b = worked_batch();
    ASSERT_TRUE(b.process().ok());
    std::vector<float> out(3);
    EXPECT_FALSE(b.chosen({0, 6, 0}, {0, 0, 0}, {0, 0, 0}, out).ok());  // id outside V
    EXPECT_TRUE(b.chosen({0, 6, 0}, {0, -1, 0}, {0, 0, 0}, out).ok());  // ... in a row without logprobs
  }
  EXPECT_FALSE(topk({1, 2}, {21}).status.ok());  // more than kMaxTopLogprobs
  EXPECT_TRUE(topk({1, 2}, {20}).status.ok());
  std::vector<float> logits(6), lse(1), lp(kTop);
  std::vector<int32_t> k(1, 1), ids(kTop);
  EXPECT_FALSE(ops::logprobs_topk(test::ctx(), {.logits = Tensor(logits.data(), DType::F32, {1, 6}),
                                   .rows_k = Tensor(k.data(), DType::I32, {1}),
                                   .lse = Tensor(lse.data(), DType::F32, {1}),
                                   .top_ids = Tensor(ids.data(), DType::I32, {1, kTop - 1}),
                                   .top_logprobs = Tensor(lp.data(), DType::F32, {1, kTop})})
                   .ok());
  Batch b = worked_batch();
  std::vector<float> saved(b.entries.size());
  EXPECT_FALSE(ops::logits_process(test::ctx(), {.logits = Tensor(b.logits.data(), DType::F32, {3, 6}),
                                    .penalties = Tensor(b.penalties.data(), DType::F32, {3, 3}),
                                    .offsets = Tensor(b.offsets.data(), DType::I32, {3}),  // not R + 1
                                    .entries = Tensor(b.entries.data(), DType::I32, {9, 4}),
                                    .saved = Tensor(saved.data(), DType::F32, {9})})
                   .ok());
}

}  // namespace
}  // namespace mx
