// Tensor parallelism's split of the model over the ranks (model/tensor_parallel.h,
// docs/TENSOR_PARALLEL.md): TpPlan's heads, expert blocks and vocabulary per rank, the splits it
// refuses, and tp_slice taking each rank's part of a weight.
#include <gtest/gtest.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/random_model.h"
#include "model/tensor_parallel.h"

namespace mx {
namespace {

ModelConfig gpt_oss_120b() {
  RandomModelSpec s{.layers = 36, .hidden = 2880, .intermediate = 2880, .heads = 64, .kv_heads = 8, .head_dim = 64,
                    .experts = 128, .vocab = 201088};
  return *ModelConfig::from_json(nlohmann::json::parse(random_model_config(s).dump()));
}

TEST(TpPlan, SplitsHeadsExpertBlocksAndVocabulary) {
  const ModelConfig c = gpt_oss_120b();
  auto p4 = TpPlan::make(c, 4);
  ASSERT_TRUE(p4.ok()) << p4.status().message();
  int64_t blocks = 0;
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(p4->heads(r).begin, 16 * r);
    EXPECT_EQ(p4->heads(r).size(), 16);
    EXPECT_EQ(p4->kv_heads(r).begin, 2 * r);
    EXPECT_EQ(p4->ff_blocks(r).begin, blocks) << "rank " << r;
    blocks += p4->ff_blocks(r).size();
    EXPECT_EQ(p4->vocab(r).size(), 201088 / 4);
    const ModelConfig rc = p4->rank_config(r);
    EXPECT_EQ(rc.num_attention_heads, 16);
    EXPECT_EQ(rc.num_key_value_heads, 2);
    EXPECT_EQ(rc.intermediate_size, 32 * p4->ff_blocks(r).size());
  }
  EXPECT_EQ(blocks, 90);
  EXPECT_EQ(p4->ff_blocks(0).size(), 23);  // 90 = 23 + 23 + 22 + 22: the first ranks take the extra blocks
  EXPECT_EQ(p4->ff_blocks(3).size(), 22);
  EXPECT_EQ(p4->vocab_starts(), (std::vector<int64_t>{0, 50272, 100544, 150816, 201088}));
  auto p8 = TpPlan::make(c, 8);
  ASSERT_TRUE(p8.ok());
  EXPECT_EQ(p8->ff_blocks(0).size(), 12);
  EXPECT_EQ(p8->ff_blocks(7).size(), 11);
  EXPECT_EQ(p8->kv_heads(7).begin, 7);
}

TEST(TpPlan, RefusesSplitsThatDoNotDivide) {
  const ModelConfig c = gpt_oss_120b();
  auto three = TpPlan::make(c, 3);
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.status().message().find("8 kv heads"), std::string::npos) << three.status().message();
  ModelConfig narrow = c;
  narrow.intermediate_size = 64;  // 2 blocks for 4 ranks
  auto p = TpPlan::make(narrow, 4);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("block of 32 per rank"), std::string::npos) << p.status().message();
  EXPECT_FALSE(TpPlan::make(c, 16).ok());
}

// A (E, D, G, 16) down tensor of bytes numbered in order: rank r holds, of every (e, d) row, blocks
// ff_blocks(r); a gate_up (E, 2F, ...) tensor: rows 64·b0 .. of every expert; o (D, H·Dh): the
// columns of its heads; a bias added once: rank 0's copy, zeros elsewhere.
TEST(TpSlice, TakesEachRanksPart) {
  RandomModelSpec s{.layers = 1, .hidden = 64, .intermediate = 96, .heads = 4, .kv_heads = 2, .head_dim = 16,
                    .experts = 4, .vocab = 301};
  auto parsed = ModelConfig::from_json(nlohmann::json::parse(random_model_config(s).dump()));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const ModelConfig c = *parsed;
  const TpPlan plan = *TpPlan::make(c, 2);  // blocks 2 + 1
  const int64_t E = 4, D = 64, G = 3;
  std::vector<uint8_t> down(size_t(E * D * G * 16));
  for (size_t i = 0; i < down.size(); ++i) down[i] = uint8_t(i * 7 + 3);
  const Tensor full(down.data(), DType::U8, {E, D, G, 16});
  std::vector<ops::Buffer> storage;
  for (int r = 0; r < 2; ++r) {
    const TpRange b = plan.ff_blocks(r);
    auto t = tp_slice(full, TpWeight::DownBlocks, plan, r, Device::CPU, storage);
    ASSERT_TRUE(t.ok()) << t.status().message();
    ASSERT_EQ(t->shape_str(), fmt::format("[{}, {}, {}, 16]", E, D, b.size()));
    for (int64_t row = 0; row < E * D; ++row)
      ASSERT_EQ(std::memcmp(t->ptr<uint8_t>() + row * b.size() * 16, down.data() + (row * G + b.begin) * 16,
                            size_t(b.size()) * 16),
                0)
          << "rank " << r << " row " << row;
  }
  std::vector<uint16_t> gu(size_t(E * 2 * 96));
  for (size_t i = 0; i < gu.size(); ++i) gu[i] = uint16_t(i);
  auto g1 = tp_slice(Tensor(gu.data(), DType::BF16, {E, 2 * 96}), TpWeight::GateUpRows, plan, 1, Device::CPU, storage);
  ASSERT_TRUE(g1.ok());
  EXPECT_EQ(g1->shape_str(), "[4, 64]");  // rank 1: block 2, gate/up rows 128..191
  EXPECT_EQ(g1->ptr<uint16_t>()[0], 128);
  EXPECT_EQ(g1->ptr<uint16_t>()[64], 192 + 128);
  std::vector<uint16_t> o(size_t(D * 64));
  for (size_t i = 0; i < o.size(); ++i) o[i] = uint16_t(i);
  auto o1 = tp_slice(Tensor(o.data(), DType::BF16, {D, 64}), TpWeight::OColumns, plan, 1, Device::CPU, storage);
  ASSERT_TRUE(o1.ok());
  EXPECT_EQ(o1->shape_str(), "[64, 32]");  // heads 2, 3: columns 32..63
  EXPECT_EQ(o1->ptr<uint16_t>()[0], 32);
  EXPECT_EQ(o1->ptr<uint16_t>()[32], 64 + 32);
  std::vector<uint16_t> bias(size_t(D), 0x3f80);
  auto z = tp_slice(Tensor(bias.data(), DType::BF16, {D}), TpWeight::RankZeroOnly, plan, 1, Device::CPU, storage);
  auto keep = tp_slice(Tensor(bias.data(), DType::BF16, {D}), TpWeight::RankZeroOnly, plan, 0, Device::CPU, storage);
  ASSERT_TRUE(z.ok() && keep.ok());
  EXPECT_EQ(z->ptr<uint16_t>()[5], 0);
  EXPECT_EQ(keep->ptr<uint16_t>()[5], 0x3f80);
}

}  // namespace
}  // namespace mx
