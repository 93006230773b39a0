// GET /metrics and /metrics.json: the speculative-decoding series appear with --speculative-config
// only, with the engine's counts (vLLM's names; one accepted-tokens line per draft position).
#include <gtest/gtest.h>

#include "server/metrics.h"

namespace mx::server {
namespace {

TEST(Metrics, SpeculativeSeriesOnlyWithSpeculation) {
  Metrics m;
  EngineStats s;
  const std::string off = m.render("m", s);
  EXPECT_NE(off.find("vllm:generation_tokens_total{model_name=\"m\"} 0"), std::string::npos) << off;
  EXPECT_EQ(off.find("spec_decode"), std::string::npos) << off;
  EXPECT_FALSE(m.json("m", s)["metrics"].contains("vllm:spec_decode_num_drafts_total"));

  s.spec_tokens = 3;
  s.spec.add_round(3, 2);
  s.spec.add_round(2, 0);
  s.spec.add_round(3, 3);
  const std::string on = m.render("m", s);
  for (const char* line : {"vllm:spec_decode_num_drafts_total{model_name=\"m\"} 3",
                           "vllm:spec_decode_num_draft_tokens_total{model_name=\"m\"} 8",
                           "vllm:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 5",
                           "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"0\"} 2",
                           "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"1\"} 2",
                           "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"2\"} 1",
                           "# TYPE vllm:spec_decode_num_drafts_total counter"})
    EXPECT_NE(on.find(line), std::string::npos) << line << "\n" << on;
  const auto j = m.json("m", s)["metrics"];
  EXPECT_EQ(j["vllm:spec_decode_num_accepted_tokens_total"], 5.0);
  EXPECT_EQ(j["vllm:spec_decode_num_accepted_tokens_per_pos_total"], nlohmann::ordered_json::array({2, 2, 1}));
  EXPECT_DOUBLE_EQ(s.spec.mean_acceptance_length(), 1.0 + 5.0 / 3.0);
}

}  // namespace
}  // namespace mx::server
