// `mxserve run --dump-logits` and `mxserve info` end to end on a fixture: the .npy holds
// [steps, vocab] float32 rows equal to Hugging Face's greedy logits (row 0 = last prompt position).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <span>

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

}  // namespace
}  // namespace mx
