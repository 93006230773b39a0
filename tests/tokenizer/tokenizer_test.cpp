// Tokenizer unit tests: the special tokens of GPTOSS_SPEC §5.2, allowed vs as-text specials,
// invalid UTF-8 errors, StreamDecoder on split characters, the two BPE merge loops agreeing,
// long inputs, loading errors on small hand-made tokenizer.json files (`mxserve tokenize`:
// tests/cli/tokenize_cmd_test.cpp).
#include <nlohmann/json.hpp>
#include <fstream>
#include <random>

#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/utf8.h"
#include "tokenizer_fixture.h"

namespace mx {
namespace {

using json = nlohmann::json;
using test::encode_ok;

std::string byte_level(std::string_view bytes) {  // raw bytes -> GPT-2 byte-level string (UTF-8)
  std::string out;
  for (unsigned char b : bytes) {
    const char32_t cp = byte_level_code_point(b);
    if (cp < 0x80) out += char(cp);
    else out += char(0xC0 | (cp >> 6)), out += char(0x80 | (cp & 0x3F));
  }
  return out;
}

// A tiny tokenizer.json: the 256 bytes (ids 0..255), a few merged tokens and added tokens.
std::filesystem::path write_tiny_tokenizer(const std::filesystem::path& dir, const json& extra_vocab,
                                           const json& added) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level(std::string(1, char(b)))] = b;
  for (auto& [k, v] : extra_vocab.items()) vocab[byte_level(k)] = v;
  json j = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
            {"added_tokens", added},
            {"pre_tokenizer", nullptr}};
  const auto path = dir / "tokenizer.json";
  std::ofstream(path) << j.dump();
  return path;
}

TEST(ByteLevel, MapsPrintableBytesToThemselvesAndOthersAbove255) {
  EXPECT_EQ(byte_level_code_point('a'), U'a');
  EXPECT_EQ(byte_level_code_point(' '), U'\u0120');  // "Ġ"
  EXPECT_EQ(byte_level_code_point('\n'), U'\u010A');  // "Ċ"
  EXPECT_EQ(byte_level_code_point(0xAD), U'\u0143');  // soft hyphen is remapped too
  auto r = byte_level_to_bytes("\xC4\xA0hello\xC4\x8A");  // "ĠhelloĊ"
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value(), " hello\n");
  EXPECT_FALSE(byte_level_to_bytes("\xE4\xBD\xA0").ok());  // U+4F60 is not a byte-level code point
}

TEST(Utf8, FirstInvalidOffset) {
  EXPECT_EQ(utf8_first_invalid("plain ascii text, long enough for the 8-byte path"), std::nullopt);
  EXPECT_EQ(utf8_first_invalid("h\xC3\xA9llo \xF0\x9F\x98\x80"), std::nullopt);
  EXPECT_EQ(utf8_first_invalid("abcdefghij\xFF"), std::optional<size_t>(10));
  EXPECT_EQ(utf8_first_invalid("ab\xC0\xAF"), std::optional<size_t>(2));          // overlong '/'
  EXPECT_EQ(utf8_first_invalid("\xED\xA0\x80"), std::optional<size_t>(0));        // surrogate
  EXPECT_EQ(utf8_first_invalid("x\xF4\x90\x80\x80"), std::optional<size_t>(1));   // above U+10FFFF
  EXPECT_EQ(utf8_first_invalid("xyz\xE4\xBD"), std::optional<size_t>(3));         // truncated at the end
  EXPECT_EQ(utf8_first_invalid("\x80"), std::optional<size_t>(0));                // lone continuation
}

TEST(TinyTokenizer, MergesByLowestRankAndMatchesAddedTokens) {
  const auto dir = test::temp_dir("tiny_tok");
  const json extra = {{"ab", 300}, {"bc", 260}, {"abc", 301}, {"cd", 270}};
  const json added = json::array({{{"id", 400}, {"content", "<|x|>"}, {"special", true}},
                                  {{"id", 401}, {"content", "<|x|>!"}, {"special", true}},
                                  {{"id", 402}, {"content", "[plain]"}, {"special", false}}});
  auto tok = Tokenizer::load(write_tiny_tokenizer(dir, extra, added));
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  const Tokenizer& t = **tok;
  // "abcd": pairs ab=300, bc=260, cd=270 -> bc merges first (lowest rank), then a+bc = abc (301);
  // merging leftmost-first would give [ab, cd] = [300, 270] instead.
  EXPECT_EQ(encode_ok(t, "abcd"), (std::vector<int32_t>{301, 'd'}));
  EXPECT_EQ(encode_ok(t, "bcd"), (std::vector<int32_t>{260, 'd'}));  // bcd not in vocab
  EXPECT_EQ(encode_ok(t, "abc"), (std::vector<int32_t>{301}));  // whole piece in the vocab
  // Specials: only when allowed, longest match wins; non-special added tokens always match.
  EXPECT_EQ(encode_ok(t, "<|x|>!", SpecialTokens::Allow), (std::vector<int32_t>{401}));
  EXPECT_EQ(encode_ok(t, "a<|x|>", SpecialTokens::Allow), (std::vector<int32_t>{'a', 400}));
  EXPECT_EQ(t.decode(encode_ok(t, "a<|x|>")), "a<|x|>");
  for (int32_t id : encode_ok(t, "a<|x|>")) EXPECT_LT(id, 400);
  EXPECT_EQ(encode_ok(t, "[plain]"), (std::vector<int32_t>{402}));
  EXPECT_TRUE(t.is_special(400));
  EXPECT_FALSE(t.is_special(402));
  EXPECT_EQ(t.vocab_size(), 403);
  EXPECT_EQ(t.token_id("<|x|>"), std::optional<int32_t>(400));
  EXPECT_EQ(t.token_id("bc"), std::optional<int32_t>(260));
  EXPECT_EQ(t.token_id("zzz"), std::nullopt);
}

TEST(TinyTokenizer, LoadErrorsNameTheProblem) {
  const auto dir = test::temp_dir("tiny_tok_bad");
  auto missing = Tokenizer::load(dir / "nope.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot open"), std::string::npos) << missing.status().message();

  std::ofstream(dir / "broken.json") << "{\"model\": ";
  auto broken = Tokenizer::load(dir / "broken.json");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("not valid JSON"), std::string::npos) << broken.status().message();

  std::ofstream(dir / "nobyte.json") << R"({"model": {"type": "BPE", "vocab": {"a": 0}}})";
  auto nobyte = Tokenizer::load(dir / "nobyte.json");
  ASSERT_FALSE(nobyte.ok());
  EXPECT_NE(nobyte.status().message().find("single byte"), std::string::npos) << nobyte.status().message();
}

// Found by fuzz_tokenizer_json: two tokens on one id decoded as the wrong one, and fields of
// another type threw out of Tokenizer::load.
TEST(TinyTokenizer, AmbiguousIdsAndWrongTypesAreErrors) {
  const auto dir = test::temp_dir("tiny_tok_ids");
  const auto status_of = [&](const json& extra_vocab, const json& added) {
    auto t = Tokenizer::load(write_tiny_tokenizer(dir, extra_vocab, added));
    return t.ok() ? std::string("ok") : t.status().message();
  };
  EXPECT_NE(status_of({{"ab", 97}}, json::array()).find("vocab id 97 is given to two tokens"), std::string::npos);
  EXPECT_NE(status_of(json::object(), {{{"id", 97}, {"content", "<|x|>"}}}).find("takes id 97"), std::string::npos);
  EXPECT_EQ(status_of({{"ab", 300}}, {{{"id", 300}, {"content", "ab"}}}), "ok");  // the same token twice is fine
  EXPECT_NE(status_of(json::object(), {{{"id", 300}, {"content", 5}}}).find("wrong type"), std::string::npos);
  std::ofstream(dir / "type.json") << R"({"model": {"type": 5, "vocab": {}}})";
  auto t = Tokenizer::load(dir / "type.json");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("wrong type"), std::string::npos) << t.status().message();
}

TEST(GptOssTokenizer, SpecialTokensOfSpec) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  const std::pair<const char*, int32_t> specials[] = {
      {"<|startoftext|>", 199998}, {"<|endoftext|>", 199999},     {"<|reserved_200000|>", 200000},
      {"<|reserved_200001|>", 200001}, {"<|return|>", 200002},    {"<|constrain|>", 200003},
      {"<|reserved_200004|>", 200004}, {"<|channel|>", 200005},   {"<|start|>", 200006},
      {"<|end|>", 200007},         {"<|message|>", 200008},       {"<|reserved_200009|>", 200009},
      {"<|reserved_200010|>", 200010}, {"<|reserved_200011|>", 200011}, {"<|call|>", 200012},
      {"<|reserved_200013|>", 200013}, {"<|reserved_200017|>", 200017}, {"<|endofprompt|>", 200018}};
  for (const auto& [text, id] : specials) {
    EXPECT_EQ(tok->token_id(text), std::optional<int32_t>(id)) << text;
    EXPECT_EQ(tok->token_bytes(id), text);
    EXPECT_TRUE(tok->is_special(id)) << id;
    EXPECT_EQ(encode_ok(*tok, text, SpecialTokens::Allow), std::vector<int32_t>{id}) << text;
  }
  EXPECT_EQ(tok->vocab_size(), 200019);  // 199998 ordinary + 21 added (§5.2); 200019.. undefined
  EXPECT_FALSE(tok->is_special(0));
  EXPECT_FALSE(tok->is_special(199997));
  EXPECT_EQ(tok->token_bytes(200019), "");
  EXPECT_EQ(tok->token_bytes(-1), "");
  EXPECT_EQ(tok->token_bytes(0), "!");
  EXPECT_EQ(tok->token_id(" the"), std::optional<int32_t>(290));  // o200k_base rank of " the"
}

TEST(GptOssTokenizer, SpecialsAllowedVersusAsText) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  const std::string text = "<|start|>user<|message|>Hi<|end|><|start|>assistant";
  const auto allowed = encode_ok(*tok, text, SpecialTokens::Allow);
  const std::vector<int32_t> user = encode_ok(*tok, "user"), hi = encode_ok(*tok, "Hi"), asst = encode_ok(*tok, "assistant");
  std::vector<int32_t> want = {200006};
  want.insert(want.end(), user.begin(), user.end());
  want.push_back(200008);
  want.insert(want.end(), hi.begin(), hi.end());
  want.push_back(200007);
  want.push_back(200006);
  want.insert(want.end(), asst.begin(), asst.end());
  EXPECT_EQ(allowed, want);

  const auto as_text = encode_ok(*tok, text, SpecialTokens::AsText);
  for (int32_t id : as_text) EXPECT_LT(id, 199998) << "a special id in as-text encoding";
  EXPECT_GT(as_text.size(), allowed.size());
  EXPECT_EQ(tok->decode(as_text), text);
  EXPECT_EQ(tok->decode(allowed), text);
  // A partial special string stays text even when allowed.
  for (int32_t id : encode_ok(*tok, "<|start| <start|> |>", SpecialTokens::Allow)) EXPECT_LT(id, 199998);
}

TEST(GptOssTokenizer, InvalidUtf8IsAnErrorWithTheOffset) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  const std::pair<std::string, size_t> cases[] = {
      {"hello \xFF world", 6}, {"\xC3", 0}, {"ok \xE2\x82", 3}, {"\xED\xA0\x80 surrogate", 0}, {"over\xC1\xBF", 4}};
  for (const auto& [text, offset] : cases) {
    auto r = tok->encode(text);
    ASSERT_FALSE(r.ok()) << "accepted invalid UTF-8 at " << offset;
    EXPECT_NE(r.status().message().find("byte offset " + std::to_string(offset)), std::string::npos)
        << r.status().message();
    EXPECT_FALSE(tok->encode(text, SpecialTokens::Allow).ok());
  }
  EXPECT_TRUE(encode_ok(*tok, "").empty());
}

TEST(GptOssTokenizer, StreamDecoderNeverSplitsACharacter) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  // Rare emoji and a ZWJ sequence are spread over several byte tokens.
  const std::string text = "ok 🫶🏾 👩🏿‍🚀 𝒜 end";
  const auto ids = encode_ok(*tok, text);
  size_t partial_tokens = 0;
  for (int32_t id : ids) partial_tokens += utf8_first_invalid(tok->token_bytes(id)).has_value();
  ASSERT_GT(partial_tokens, 0u) << "test text no longer splits a character across tokens";

  StreamDecoder dec(tok);
  std::string joined;
  for (int32_t id : ids) {
    const std::string piece = dec.push(id);
    EXPECT_EQ(utf8_first_invalid(piece), std::nullopt) << "half a character emitted after id " << id;
    joined += piece;
  }
  joined += dec.flush();
  EXPECT_EQ(joined, text);

  // A truncated stream: flush turns the dangling lead bytes into U+FFFD.
  StreamDecoder cut(tok);
  std::string out;
  const auto emoji = encode_ok(*tok, "🫶");
  ASSERT_GT(emoji.size(), 1u);
  for (size_t i = 0; i + 1 < emoji.size(); ++i) out += cut.push(emoji[i]);
  EXPECT_EQ(out, "");
  EXPECT_EQ(cut.flush().substr(0, 3), "\xEF\xBF\xBD");
}

TEST(GptOssTokenizer, ScanAndHeapMergeLoopsAgree) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  RankTable ranks;
  ranks.reserve(199998);
  for (int32_t id = 0; id < 199998; ++id) ASSERT_TRUE(ranks.insert(tok->token_bytes(id), id)) << id;
  std::mt19937 rng(7);
  const char* alphabet[] = {"a", "b", "e", "n", "t", " ", "の", "語", "é", "\xCC\x81", "🙂", "0", "-", "ß", "к"};
  for (int trial = 0; trial < 300; ++trial) {
    std::string piece;
    const int len = 2 + int(rng() % (trial < 200 ? 60 : 400));
    for (int i = 0; i < len; ++i) piece += alphabet[rng() % std::size(alphabet)];
    std::vector<int32_t> scan, heap;
    bpe_encode(ranks, piece, scan, MergeStrategy::Scan);
    bpe_encode(ranks, piece, heap, MergeStrategy::Heap);
    ASSERT_EQ(scan, heap) << "piece: " << piece;
    std::string back;
    for (int32_t id : scan) back += tok->token_bytes(id);
    ASSERT_EQ(back, piece);
  }
}

TEST(GptOssTokenizer, LongRunsEncodeAndRoundTrip) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  const std::string runs[] = {std::string(200000, ' '), std::string(100000, '7'), std::string(150000, 'a'),
                              std::string(50000, '\n') + "x", [] {
                                std::string s;
                                for (int i = 0; i < 20000; ++i) s += "\r\n \t";
                                return s;
                              }()};
  for (const std::string& text : runs) {
    const auto ids = encode_ok(*tok, text);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(tok->decode(ids), text) << "round trip of a run of " << text.size() << " bytes";
  }
  // 300000 digits split into pieces of 3: "777" repeated.
  const auto digits = encode_ok(*tok, std::string(300000, '7'));
  ASSERT_EQ(digits.size(), 100000u);
  EXPECT_EQ(tok->token_bytes(digits[0]), "777");
}

TEST(Pretokenizer, O200kAlternatives) {
  auto pre = Pretokenizer::create(kO200kPattern);
  ASSERT_TRUE(pre.ok()) << pre.status().message();
  EXPECT_TRUE((*pre)->jit()) << "PCRE2 JIT unavailable: encode will be slow";
  auto pieces = [&](std::string_view text) {
    std::vector<std::string> out;
    const Status st = (*pre)->split(text, [&](std::string_view p) { out.emplace_back(p); });
    EXPECT_TRUE(st.ok()) << st.message();
    return out;
  };
  using V = std::vector<std::string>;
  // Case-insensitive contraction suffix stays attached to the word; curly apostrophe does not.
  EXPECT_EQ(pieces("I'M don'T we'Ll"), (V{"I'M", " don'T", " we'Ll"}));
  EXPECT_EQ(pieces("isn’t"), (V{"isn", "’t"}));
  // Upper-case run followed by lower case splits before the lower-case word (alternatives 1 and 2).
  EXPECT_EQ(pieces("HTTPServer"), (V{"HTTPServer"}));
  EXPECT_EQ(pieces("helloWorld"), (V{"hello", "World"}));
  // Digits come in groups of at most three.
  EXPECT_EQ(pieces("1234567"), (V{"123", "456", "7"}));
  // Punctuation with its trailing newlines / slashes; the last space joins the next word.
  EXPECT_EQ(pieces("a   b"), (V{"a", "  ", " b"}));
  EXPECT_EQ(pieces("x;\n\ny"), (V{"x", ";\n\n", "y"}));
  EXPECT_EQ(pieces("end.\r\n\r\nNext"), (V{"end", ".\r\n\r\n", "Next"}));
  EXPECT_EQ(pieces("  \n  x"), (V{"  \n", " ", " x"}));
  EXPECT_EQ(pieces("你好世界"), (V{"你好世界"}));
}

// Found by fuzz_tokenizer_json: a tokenizer.json whose Split regex does not match every character
// (or matches empty) lost the text in between; it is now a piece of its own.
TEST(Pretokenizer, TextBetweenMatchesIsKept) {
  auto pieces = [](std::string_view pattern, std::string_view text) {
    auto pre = Pretokenizer::create(pattern);
    EXPECT_TRUE(pre.ok()) << pre.status().message();
    std::vector<std::string> out;
    EXPECT_TRUE((*pre)->split(text, [&](std::string_view p) { out.emplace_back(p); }).ok());
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("\\p{L}+", "ab 12!cd?"), (V{"ab", " 12!", "cd", "?"}));
  EXPECT_EQ(pieces("\\s?\\p{N}{0,3}", "x12 é"), (V{"x", "12", " ", "é"}));  // empty matches between
  EXPECT_EQ(pieces("q", "none here"), (V{"none here"}));
}

}  // namespace
}  // namespace mx
