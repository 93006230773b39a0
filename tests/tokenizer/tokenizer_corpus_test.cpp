// The oracle test: token ids identical to js-tiktoken's o200k_base on a >1 MB generated corpus
// (tests/js/make_corpus.mjs + tiktoken_ids.mjs, run here with node), and decode(encode(x)) == x.
#include <fstream>
#include <nlohmann/json.hpp>

#include "tokenizer_fixture.h"

namespace mx {
namespace {

using json = nlohmann::json;

struct CorpusDoc {
  std::string text;
  std::vector<int32_t> ids;
  bool allow_special = false;
};

// Runs the node scripts into a fresh directory and reads the JSONL; empty on failure (with a message).
std::vector<CorpusDoc> generate_corpus(std::string& error) {
  const auto dir = test::temp_dir("tok_corpus");
  const std::string cmd = "cd '" + test::js_dir().string() + "' && node tiktoken_ids.mjs '" + dir.string() + "'";
  auto [rc, out] = test::run_command(cmd);
  std::vector<CorpusDoc> docs;
  if (rc != 0) {
    error = "`" + cmd + "` failed (" + std::to_string(rc) + "): " + out;
    return docs;
  }
  std::ifstream in(dir / "corpus.jsonl");
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    docs.push_back({j["text"].get<std::string>(), j["ids"].get<std::vector<int32_t>>(), j["allow_special"].get<bool>()});
  }
  std::filesystem::remove_all(dir);
  return docs;
}

// Escapes control characters so a mismatch report shows \r, \n and \t.
std::string visible(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else out += c;
  }
  return out;
}

// "index k: got [..] want [..]" around the first differing id, with the bytes of each token.
std::string describe_mismatch(const Tokenizer& tok, const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
  size_t k = 0;
  while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
  auto window = [&](const std::vector<int32_t>& ids) {
    std::string s;
    for (size_t i = k >= 3 ? k - 3 : 0; i < std::min(ids.size(), k + 4); ++i) {
      s += fmt::format("{}{}='{}' ", i == k ? ">" : "", ids[i], visible(tok.token_bytes(ids[i])));
    }
    return s;
  };
  return fmt::format("first difference at id index {} (got {} ids, want {})\n  got:  {}\n  want: {}", k, got.size(),
                     want.size(), window(got), window(want));
}

TEST(TokenizerCorpus, IdsMatchJsTiktokenO200kAndRoundTrip) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node not found: needed for the js-tiktoken reference";
  std::string error;
  const std::vector<CorpusDoc> docs = generate_corpus(error);
  ASSERT_FALSE(docs.empty()) << error;

  size_t bytes = 0, ids = 0, bad_docs = 0, bad_round_trips = 0, special_docs = 0;
  std::string first_report;
  for (size_t d = 0; d < docs.size(); ++d) {
    const CorpusDoc& doc = docs[d];
    const auto mode = doc.allow_special ? SpecialTokens::Allow : SpecialTokens::AsText;
    auto got = tok->encode(doc.text, mode);
    ASSERT_TRUE(got.ok()) << "doc " << d << ": " << got.status().message();
    bytes += doc.text.size();
    ids += doc.ids.size();
    special_docs += doc.allow_special;
    if (*got != doc.ids && bad_docs++ == 0) {
      first_report = fmt::format("doc {} ({} bytes, allow_special={}): {}", d, doc.text.size(), doc.allow_special,
                                 describe_mismatch(*tok, *got, doc.ids));
    }
    if (tok->decode(*got) != doc.text) ++bad_round_trips;
  }
  EXPECT_GE(bytes, 1000000u) << "corpus must be at least 1 MB";
  EXPECT_GE(special_docs, 1u) << "corpus must contain documents with special tokens allowed";
  EXPECT_EQ(bad_docs, 0u) << bad_docs << " of " << docs.size() << " documents differ; " << first_report;
  EXPECT_EQ(bad_round_trips, 0u) << "decode(encode(x)) != x";
  std::printf("compared %zu documents, %zu bytes, %zu ids\n", docs.size(), bytes, ids);
}

}  // namespace
}  // namespace mx
