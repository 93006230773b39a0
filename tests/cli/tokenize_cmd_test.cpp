// `mxserve tokenize` end to end with the real gpt-oss tokenizer (skips without tests/js/node_modules):
// the ids printed as JSON equal Tokenizer::encode's, from -p or a text file; a text file that is not
// UTF-8 is an error naming it.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "tokenizer/tokenizer_fixture.h"

namespace mx {
namespace {

using json = nlohmann::json;
using test::encode_ok;

TEST(TokenizeCli, PrintsIdsAsJson) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  const auto bin = test::mxserve_binary();
  if (!std::filesystem::exists(bin)) GTEST_SKIP() << "mxserve binary not built at " << bin;
  const std::string model_dir = test::gptoss_tokenizer_json().parent_path().string();
  auto [rc, out] = test::run_command("'" + bin.string() + "' tokenize --model '" + model_dir +
                                     "' --allow-special -p 'Hello<|end|> world'");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(json::parse(out).get<std::vector<int32_t>>(), encode_ok(*tok, "Hello<|end|> world", SpecialTokens::Allow));

  const auto dir = test::temp_dir("tok_cli");
  std::ofstream(dir / "in.txt") << "Hello<|end|> world\r\n";
  auto [rc2, out2] = test::run_command("'" + bin.string() + "' tokenize --model '" + test::gptoss_tokenizer_json().string() +
                                       "' --text-file '" + (dir / "in.txt").string() + "'");
  ASSERT_EQ(rc2, 0) << out2;
  EXPECT_EQ(json::parse(out2).get<std::vector<int32_t>>(), encode_ok(*tok, "Hello<|end|> world\r\n"));

  std::ofstream(dir / "bad.txt") << "ok \xff";
  auto [rc3, out3] = test::run_command("'" + bin.string() + "' tokenize --model '" + model_dir + "' --text-file '" +
                                       (dir / "bad.txt").string() + "'");
  EXPECT_NE(rc3, 0) << out3;
  EXPECT_NE(out3.find("UTF-8"), std::string::npos) << out3;
}

}  // namespace
}  // namespace mx
