// The commands of mx_cli called as functions: errors come back as a Status (the process goes on),
// exceptions are turned into one at the command's boundary, make-demo finds its tokenizer the
// way every command does (tokenizer/tokenizer_file.h), and expand_args rewrites the command line.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "cli/commands.h"
#include "test_util.h"
#include "tokenizer/tokenizer_env_guard.h"
#include "tokenizer/tokenizer_file.h"

namespace mx::cli {
namespace {

namespace fs = std::filesystem;

using test::EnvTokenizer;

::testing::AssertionResult error_with(const Status& st, const std::string& text) {
  if (st.ok()) return ::testing::AssertionFailure() << "ok, expected an error with \"" << text << "\"";
  if (st.message().find(text) == std::string::npos)
    return ::testing::AssertionFailure() << "\"" << st.message() << "\" lacks \"" << text << "\"";
  return ::testing::AssertionSuccess();
}

TEST(CliCommands, ErrorsComeBackAsStatus) {
  EXPECT_TRUE(info({.model = (test::fixtures_dir() / "models" / "tiny-sharded").string()}).ok());
  EXPECT_TRUE(error_with(info({.model = "no-such-org/no-model"}), "not found"));
  EXPECT_TRUE(error_with(run({.model = (test::fixtures_dir() / "models" / "tiny").string(),
                              .prompt_ids = "1,2",
                              .backend = "cpu",
                              .kv_cache = {.dtype = "fp16"}}),
                         "--kv-cache-dtype: unknown value 'fp16'"));
  EXPECT_TRUE(error_with(run({}), "give a prompt with -p TEXT or --prompt-ids"));
  EXPECT_TRUE(error_with(bench({.model = "synthetic:tiny", .backend = "cpu", .spec_acceptance_rate = 0.5}),
                         "--spec-acceptance-rate needs --speculative-config"));
  EXPECT_TRUE(error_with(tokenize({.model = "/no/such/tokenizer.json", .prompt = "x"}),
                         "--model /no/such/tokenizer.json does not exist"));
}

TEST(CliCommands, ExceptionsStopAtTheCommandBoundary) {
  const Status st = catch_exceptions("demo-cmd", []() -> Status { throw std::runtime_error("boom"); });
  EXPECT_TRUE(error_with(st, "demo-cmd: boom"));
  EXPECT_TRUE(catch_exceptions("demo-cmd", [] { return ok_status(); }).ok());
}

TEST(CliCommands, MakeDemoTakesTheTokenizerFromTheFlagOrTheEnvironment) {
  const fs::path dir = test::temp_dir("make_demo");
  std::ofstream(dir / "tok.json") << "{\"from\": \"env\"}";
  {
    const EnvTokenizer env("");
    ASSERT_TRUE(make_demo({.out = (dir / "none").string()}).ok());
    EXPECT_TRUE(fs::exists(dir / "none" / "config.json"));
    EXPECT_FALSE(fs::exists(dir / "none" / "tokenizer.json"));  // nothing from the source tree
    EXPECT_TRUE(error_with(make_demo({.out = (dir / "typo").string(), .tokenizer = (dir / "typo.json").string()}),
                           "--tokenizer " + (dir / "typo.json").string() + " does not exist"));
    EXPECT_FALSE(fs::exists(dir / "typo")) << "nothing is written before the tokenizer is found";
  }
  const EnvTokenizer env((dir / "tok.json").string());
  ASSERT_TRUE(make_demo({.out = (dir / "env").string()}).ok());
  std::ifstream in(dir / "env" / "tokenizer.json");
  const std::string copied((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(copied, "{\"from\": \"env\"}");
  fs::remove_all(dir);  // two demo models, 50 MB each
}

TEST(CliCommands, ExpandArgs) {
  const fs::path yaml = test::temp_dir("expand_args") / "serve.yaml";
  std::ofstream(yaml) << "# comment\nmax_model_len: 4096\nenable-prefix-caching: true\nenforce-eager: false\n";
  auto args = expand_args({"serve", "-np", "4", "--config", yaml.string(), "-tp", "2"});
  ASSERT_TRUE(args.ok()) << args.status().message();
  EXPECT_EQ(args.value(), (std::vector<std::string>{"serve", "--max-model-len", "4096", "--enable-prefix-caching",
                                                    "--parallel", "4", "--config", yaml.string(),
                                                    "--tensor-parallel-size", "2"}));
  EXPECT_TRUE(error_with(expand_args({"serve", "--config", "/no/such.yaml"}).status(), "cannot open /no/such.yaml"));
}

}  // namespace
}  // namespace mx::cli
