// `mxserve run --dump-logits` and `mxserve info` end to end on a fixture: the .npy holds
// [steps, vocab] float32 rows equal to Hugging Face's greedy logits (row 0 = last prompt position).
// A truncated checkpoint is an error exit naming the file, not a crash.
// --kv-cache-dtype / --kv-scale on run, bench and serve: bad values are clear errors.
// --speculative-config on run, bench and serve: bad JSON, methods and keys are clear errors; run
// prints the same tokens with it as without.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>

#include <cstring>
#include <fstream>
#include <iterator>
#include <span>

#include "model/random_model.h"
#include "model/safetensors.h"
#include "test_util.h"

namespace mx {
namespace {

struct Npy {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Minimal .npy (v1.0, '<f4', C order) reader for the test.
Npy read_npy(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  EXPECT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  const size_t hlen = uint8_t(bytes[8]) | (size_t(uint8_t(bytes[9])) << 8);
  const std::string header = bytes.substr(10, hlen);
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos) << header;
  EXPECT_NE(header.find("'fortran_order': False"), std::string::npos) << header;
  Npy n;
  const size_t open = header.find("'shape': (") + 10, close = header.find(')', open);
  std::string dims = header.substr(open, close - open);
  for (size_t pos = 0; pos < dims.size();) {
    const size_t comma = dims.find(',', pos);
    const std::string d = dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (d.find_first_not_of(' ') != std::string::npos) n.shape.push_back(std::stoll(d));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  n.data.resize((bytes.size() - 10 - hlen) / 4);
  std::memcpy(n.data.data(), bytes.data() + 10 + hlen, n.data.size() * 4);
  return n;
}

TEST(CliRun, DumpLogitsMatchesTransformers) {
  const auto dir = test::fixtures_dir() / "models" / "tiny-odd";
  auto ref = SafetensorsFile::open(dir / "reference.safetensors");
  ASSERT_TRUE(ref.ok());
  const Tensor prompt = (*ref)->view(*(*ref)->find("prompt_ids"));
  const Tensor greedy = (*ref)->view(*(*ref)->find("greedy_ids"));
  const Tensor logits = (*ref)->view(*(*ref)->find("greedy_logits"));
  std::string ids;
  for (int64_t i = 0; i < prompt.numel(); ++i) ids += (i ? "," : "") + std::to_string(prompt.ptr<int32_t>()[i]);
  const auto out = test::temp_dir("npy") / "logits.npy";
  const auto [code, text] = test::run_command(test::mxserve_binary().string() + " run " + dir.string() +
                                              " --backend cpu --ignore-eos --prompt-ids " + ids + " -n " +
                                              std::to_string(greedy.numel()) + " --dump-logits " + out.string());
  ASSERT_EQ(code, 0) << text;
  const Npy npy = read_npy(out);
  ASSERT_EQ(npy.shape, (std::vector<int64_t>{greedy.numel(), logits.dim(1)}));
  const std::span<const float> want(logits.ptr<const float>(), size_t(logits.numel()));
  EXPECT_LE(test::max_rel_error(npy.data, want), 1e-4);
  for (int64_t i = 0; i < greedy.numel(); ++i)  // the printed ids are the greedy continuation
    EXPECT_NE(text.find(std::to_string(greedy.ptr<int32_t>()[i]) + " "), std::string::npos) << text;
}

TEST(CliRun, InfoReportsAMatchingCheckpointAndFailsOnAMissingModel) {
  const auto [code, text] = test::run_command(test::mxserve_binary().string() + " info " +
                                              (test::fixtures_dir() / "models" / "tiny-sharded").string());
  EXPECT_EQ(code, 0) << text;
  EXPECT_NE(text.find("in 2 file(s)"), std::string::npos) << text;
  const auto [code2, text2] = test::run_command(test::mxserve_binary().string() + " info no-such-org/no-model");
  EXPECT_EQ(code2, 1) << text2;
  EXPECT_NE(text2.find("not found"), std::string::npos) << text2;
}

TEST(Cli, CorruptCheckpointExitsCleanly) {
  namespace fs = std::filesystem;
  const fs::path dir = test::temp_dir("cli");
  ASSERT_TRUE(write_random_model(dir, {.layers = 2, .hidden = 32, .intermediate = 64, .heads = 2, .kv_heads = 1,
                                       .head_dim = 8, .experts = 3, .experts_per_token = 2, .vocab = 50})
                  .ok());
  fs::resize_file(dir / "model.safetensors", fs::file_size(dir / "model.safetensors") - 100);
  const auto [code, out] = test::run_command(test::mxserve_binary().string() + " run " + dir.string() +
                                             " --prompt-ids 1,2 --backend cpu");
  EXPECT_EQ(code, 1) << out;  // an error exit, not a crash (signal)
  EXPECT_NE(out.find("ERROR"), std::string::npos) << out;
  EXPECT_NE(out.find("model.safetensors"), std::string::npos) << out;
}

// Refused before the model loads (serve: before it binds), each error naming what is accepted.
TEST(CliRun, KvCacheDtypeAndScaleErrors) {
  const std::string bin = test::mxserve_binary().string() + " ";
  const std::string model = (test::fixtures_dir() / "models" / "tiny").string();
  const std::string run = bin + "run " + model + " --backend cpu --prompt-ids 1,2 -n 1 ";
  const std::pair<std::string, std::string> cases[] = {
      {run + "--kv-cache-dtype fp16", "--kv-cache-dtype: unknown value 'fp16' (use auto or fp8)"},
      {run + "--kv-scale 0.5", "--kv-scale is only valid with --kv-cache-dtype fp8"},
      {run + "--kv-cache-dtype auto --kv-scale 0.5", "--kv-scale is only valid with --kv-cache-dtype fp8"},
      {run + "--kv-cache-dtype fp8 --kv-scale 0,1", "--kv-scale: '0' is not a positive finite number"},
      {run + "--kv-cache-dtype fp8 --kv-scale 1,2,3", "--kv-scale: '2,3' is not a positive finite number"},
      {bin + "bench " + model + " --backend cpu --kv-cache-dtype fp8_e5m2", "unknown value 'fp8_e5m2' (use auto or fp8)"},
      {bin + "serve " + model + " --backend cpu --port 0 --kv-cache-dtype fp8 --kv-scale 1,nan",
       "--kv-scale: 'nan' is not a positive finite number"},
  };
  for (const auto& [cmd, want] : cases) {
    const auto [code, out] = test::run_command(cmd);
    EXPECT_EQ(code, 1) << cmd << "\n" << out;
    EXPECT_NE(out.find(want), std::string::npos) << cmd << "\n" << out;
  }
  // bench's cache is random bytes with scales 1: it has no --kv-scale.
  const auto [code, out] = test::run_command(bin + "bench " + model + " --kv-cache-dtype fp8 --kv-scale 1");
  EXPECT_NE(code, 0) << out;
}

TEST(CliRun, Fp8KvCacheRunsCalibratedOrWithFixedScales) {
  const std::string run = test::mxserve_binary().string() + " run " +
                          (test::fixtures_dir() / "models" / "tiny").string() +
                          " --backend cpu --ignore-eos --prompt-ids 5,6,7,8,9 -n 3 --kv-cache-dtype fp8";
  const auto [code, out] = test::run_command(run);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("KV cache fp8: scales calibrated from the first prefill step (5 tokens)"), std::string::npos)
      << out;
  const auto [code2, out2] = test::run_command(run + " --kv-scale 0.02,0.01");
  EXPECT_EQ(code2, 0) << out2;
  EXPECT_EQ(out2.find("calibrated"), std::string::npos) << out2;
}

TEST(CliRun, SpeculativeConfigErrorsAndSameTokens) {
  const std::string bin = test::mxserve_binary().string() + " ";
  const std::string model = (test::fixtures_dir() / "models" / "tiny").string();
  const std::string run = bin + "run " + model + " --backend cpu --prompt-ids 1,2 -n 1 ";
  const std::pair<std::string, std::string> cases[] = {
      {run + "--speculative-config '{\"method\": \"eagle3\", \"num_speculative_tokens\": 3}'",
       "method eagle3 needs \"model\""},
      {run + "--speculative-config '{\"method\": \"eagle3\", \"model\": \"/nonexistent/draft\", "
             "\"num_speculative_tokens\": 3}'",
       "/nonexistent/draft"},
      {run + "--speculative-config '{\"method\": \"medusa\", \"num_speculative_tokens\": 3}'",
       "supported: \"ngram\", \"eagle3\""},
      {run + "--speculative-config '{\"method\": \"ngram\", \"k\": 3}'", "unknown key \"k\""},
      {run + "--speculative-config 'ngram'", "expected a JSON object"},
      {bin + "bench " + model + " --backend cpu --spec-acceptance-rate 0.5",
       "--spec-acceptance-rate needs --speculative-config"},
      {bin + "bench " + model + " --backend cpu --speculative-config '{\"method\": \"ngram\"}'",
       "\"num_speculative_tokens\" is required"},
      {bin + "serve " + model + " --backend cpu --port 0 --speculative-config '{\"method\": \"ngram\", "
                                "\"num_speculative_tokens\": 99}'",
       "\"num_speculative_tokens\" must be in [0, 15]"},
  };
  for (const auto& [cmd, want] : cases) {
    const auto [code, out] = test::run_command(cmd);
    EXPECT_EQ(code, 1) << cmd << "\n" << out;
    EXPECT_NE(out.find(want), std::string::npos) << cmd << "\n" << out;
  }
  // A prompt that repeats itself, so that prompt lookup drafts.
  const std::string gen = bin + "run " + model + " --backend cpu --ignore-eos -n 24 --prompt-ids "
                          "5,6,7,8,9,5,6,7,8,9,5,6,7,8,9,5,6,7 ";
  const auto [code, plain] = test::run_command(gen);
  ASSERT_EQ(code, 0) << plain;
  const auto [code2, spec] = test::run_command(gen + "--speculative-config '{\"method\": \"ngram\", "
                                                     "\"num_speculative_tokens\": 3, \"prompt_lookup_max\": 3}'");
  ASSERT_EQ(code2, 0) << spec;
  auto ids = [](const std::string& out) {  // the printed ids: after the load line and the log lines that follow it
    const size_t loaded = out.find("loaded ");
    if (loaded == std::string::npos) return std::string();
    size_t start = out.find('\n', loaded) + 1;
    while (out.compare(start, 4, "INFO") == 0) start = out.find('\n', start) + 1;
    const size_t end = out.find("INFO", start);
    return end == std::string::npos ? std::string() : out.substr(start, end - start);
  };
  EXPECT_FALSE(ids(plain).empty()) << plain;
  EXPECT_EQ(ids(spec), ids(plain)) << spec;
  EXPECT_NE(spec.find("speculative decoding (ngram, up to 3 tokens per round"), std::string::npos) << spec;
  // An EAGLE-3 draft (synthetic, the SpecForge shape at the tiny model's width): the same tokens.
  const auto [code3, eagle] = test::run_command(gen + "--speculative-config '{\"method\": \"eagle3\", "
                                                      "\"model\": \"synthetic:eagle3\", \"num_speculative_tokens\": 2}'");
  ASSERT_EQ(code3, 0) << eagle;
  EXPECT_EQ(ids(eagle), ids(plain)) << eagle;
  EXPECT_NE(eagle.find("EAGLE-3 draft (LlamaForCausalLMEagle3)"), std::string::npos) << eagle;
  EXPECT_NE(eagle.find("speculative decoding (eagle3 draft synthetic:eagle3"), std::string::npos) << eagle;
}

// --tensor-parallel-size on the CPU backend (the stand-in of several GPUs): the same tokens as one
// rank, the layout logged; a model that does not split is refused with its numbers.
TEST(CliRun, TensorParallelSameTokensAndErrors) {
  const std::string bin = test::mxserve_binary().string() + " ";
  const std::string model = (test::fixtures_dir() / "models" / "tiny-gqa8").string();
  const std::string gen = bin + "run " + model + " --backend cpu --ignore-eos -n 12 --prompt-ids 3,1,4,1,5,9,2,6 ";
  auto ids = [](const std::string& out) {  // the streamed ids: the longest run of digits and spaces
    std::string best, cur;
    for (char ch : out) {
      if (std::isdigit(static_cast<unsigned char>(ch)) || ch == ' ') cur += ch;
      else cur.clear();
      if (cur.size() > best.size()) best = cur;
    }
    return best;
  };
  const auto [code1, one] = test::run_command(gen);
  ASSERT_EQ(code1, 0) << one;
  const auto [code2, two] = test::run_command(gen + "-tp 2");
  ASSERT_EQ(code2, 0) << two;
  const std::string one_ids = ids(one);
  EXPECT_GE(std::count(one_ids.begin(), one_ids.end(), ' '), 11) << one;
  EXPECT_EQ(ids(two), one_ids) << two;
  EXPECT_NE(two.find("tensor parallelism over 2 CPU ranks: rank 0: q heads 0..7, kv heads 0..0"), std::string::npos)
      << two;
  const auto [code4, four] = test::run_command(gen + "--tensor-parallel-size 4");
  EXPECT_EQ(code4, 1) << four;
  EXPECT_NE(four.find("the model's 2 kv heads and 16 q heads must divide evenly"), std::string::npos) << four;
  const auto [code3, three] = test::run_command(gen + "-tp 3");
  EXPECT_NE(code3, 0) << three;
}

}  // namespace
}  // namespace mx
