// Every case of tests/fixtures/harmony (openai/harmony v0.0.8 tests): renders byte-exact
// (and token-exact where the case compares tokens), parses to the expected messages or error,
// in process and through `mxserve harmony render|parse`.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "test_util.h"
#include "tokenizer/harmony_json.h"
#include "tokenizer/tokenizer_fixture.h"

namespace mx::harmony {
namespace {

namespace fs = std::filesystem;

fs::path fixture_dir() { return test::fixtures_dir() / "harmony"; }

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fixture_dir(), ec))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The README: strip trailing whitespace of .expected.txt before comparing.
std::string rstrip(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

bool is_parse_kind(const ojson& c) {
  const std::string kind = c.value("kind", "");
  return kind == "parse_completion" || kind == "streaming_parse";
}

// Messages compared as plain JSON values (key order does not matter, null fields do).
nlohmann::json plain(const ojson& j) { return nlohmann::json::parse(j.dump()); }

// Parses a case's input the way its kind says (one token at a time) and checks the outcome.
void check_parse(const ojson& input, const ojson& options, const ojson& expect, const Tokenizer& tok,
                 std::shared_ptr<const Tokenizer> shared_tok) {
  auto pc = parse_case_input(input, options, &tok);
  ASSERT_TRUE(pc.ok()) << pc.status().message();
  if (input.value("format", "") == "text") {
    // The ids were computed for the fixture by an independent o200k implementation.
    auto ids = tok.encode(input["text"].get<std::string>(), SpecialTokens::Allow);
    ASSERT_TRUE(ids.ok()) << ids.status().message();
    EXPECT_EQ(ids.value(), pc->ids) << "tokenizer disagrees with the fixture's token_ids";
  }
  auto messages = parse_tokens(std::move(shared_tok), pc->ids, pc->options, pc->eos);
  if (expect.contains("expected_error")) {
    ASSERT_FALSE(messages.ok()) << "expected an error, got " << messages_to_json(messages.value()).dump();
    const std::string want = expect["expected_error"].get<std::string>();
    if (want != "*") {
      EXPECT_NE(messages.status().message().find(want), std::string::npos) << messages.status().message();
    }
    return;
  }
  ASSERT_TRUE(messages.ok()) << messages.status().message();
  if (expect.contains("expected_message_count")) {
    EXPECT_EQ(messages->size(), expect["expected_message_count"].get<size_t>());
  }
  EXPECT_EQ(plain(messages_to_json(messages.value())), plain(expect["expected_messages"]));
}

class HarmonyFixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto c = read_json_file(fixture_dir() / (GetParam() + ".json"));
    ASSERT_TRUE(c.ok()) << c.status().message();
    case_ = c.value();
    expected_ = rstrip(read_file(fixture_dir() / (GetParam() + ".expected.txt")));
  }
  ojson case_;
  std::string expected_;
};

TEST(HarmonyFixtures, AllCasesPresent) {
  // 25 cases at v0.0.8; fewer means tests/fixtures/harmony is missing or was cut down.
  EXPECT_GE(case_names().size(), 25u) << "fixtures expected under " << fixture_dir();
}

TEST_P(HarmonyFixture, RendersOrParses) {
  if (is_parse_kind(case_)) {
    MX_REQUIRE_GPTOSS_TOKENIZER(tok);
    check_parse(case_["input"], case_["options"], case_, *tok, tok);
    return;
  }
  auto rendered = render_case(case_);
  ASSERT_TRUE(rendered.ok()) << rendered.status().message();
  EXPECT_EQ(rendered->str(), expected_);

  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  // Token comparison as the original test does: the expected text encoded with specials allowed.
  auto want = tok->encode(expected_, SpecialTokens::Allow);
  ASSERT_TRUE(want.ok()) << want.status().message();
  auto got = rendered->tokens(*tok);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got.value(), want.value());
  if (case_.contains("parse_check")) {
    const ojson& pcheck = case_["parse_check"];
    check_parse(pcheck["input"], pcheck["options"], pcheck, *tok, tok);
  }
}

TEST_P(HarmonyFixture, CliMatches) {
  const fs::path bin = test::mxserve_binary();
  if (!fs::exists(bin)) GTEST_SKIP() << "mxserve binary not built: " << bin;
  const std::string case_path = (fixture_dir() / (GetParam() + ".json")).string();
  if (!is_parse_kind(case_)) {
    auto [rc, out] = test::run_command(fmt::format("'{}' harmony render '{}'", bin.string(), case_path));
    ASSERT_EQ(rc, 0) << out;
    EXPECT_EQ(out, expected_);
    return;
  }
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  const std::string cmd = fmt::format("'{}' harmony parse --tokenizer '{}' '{}'", bin.string(),
                                      test::gptoss_tokenizer_json().string(), case_path);
  auto [rc, out] = test::run_command(cmd);
  if (case_.contains("expected_error")) {
    EXPECT_NE(rc, 0) << out;
    return;
  }
  ASSERT_EQ(rc, 0) << out;
  const auto got = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(got.is_discarded()) << out;
  EXPECT_EQ(got, plain(case_["expected_messages"]));
}

INSTANTIATE_TEST_SUITE_P(Harmony, HarmonyFixture, ::testing::ValuesIn(case_names()),
                         [](const auto& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(HarmonyFixture);

}  // namespace
}  // namespace mx::harmony
