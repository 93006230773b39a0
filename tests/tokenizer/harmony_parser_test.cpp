// Harmony parsing beyond the fixture cases (tests/fixtures/harmony): header rules, UTF-8 helpers,
// streaming deltas and current channel, lenient recovery, and truncated / garbage token streams
// (never a crash).
#include <gtest/gtest.h>

#include <map>

#include <random>

#include "tokenizer/harmony_json.h"
#include "tokenizer/harmony_parser.h"
#include "tokenizer/tokenizer_fixture.h"

namespace mx::harmony {
namespace {

TEST(HarmonyHeader, RecipientAndChannelInEitherOrder) {
  for (const char* h : {"assistant to=functions.f<|channel|>commentary <|constrain|>json",
                        "assistant<|channel|>commentary to=functions.f<|constrain|>json",
                        "assistant to=functions.f<|channel|>commentary<|constrain|>json"}) {
    auto m = parse_header(h, std::nullopt);
    ASSERT_TRUE(m.ok()) << h << ": " << m.status().message();
    EXPECT_EQ(m->author.role, Role::Assistant);
    EXPECT_EQ(m->channel, "commentary") << h;
    EXPECT_EQ(m->recipient, "functions.f") << h;
    EXPECT_EQ(m->content_type, "<|constrain|>json") << h;
  }
}

TEST(HarmonyHeader, ToolAuthorsAndErrors) {
  auto tool = parse_header("functions.f to=assistant<|channel|>commentary", std::nullopt);
  ASSERT_TRUE(tool.ok()) << tool.status().message();
  EXPECT_EQ(tool->author.role, Role::Tool);
  EXPECT_EQ(tool->author.name, "functions.f");
  EXPECT_EQ(tool->recipient, "assistant");

  auto given = parse_header("<|channel|>final", Role::Assistant);
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(given->channel, "final");
  EXPECT_FALSE(given->recipient.has_value());

  EXPECT_FALSE(parse_header("", std::nullopt).ok());
  EXPECT_FALSE(parse_header("wizard", std::nullopt).ok());
  EXPECT_FALSE(parse_header("assistant<|channel|>", std::nullopt).ok());
  auto extra = parse_header("assistant a b c", std::nullopt);
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("unexpected tokens remaining in message header"), std::string::npos);

  const Message lenient = parse_header_lenient("assistant junk to=functions.g<|channel|>commentary", std::nullopt);
  EXPECT_EQ(lenient.author.role, Role::Assistant);
  EXPECT_EQ(lenient.recipient, "functions.g");
  EXPECT_EQ(lenient.channel, "commentary");
}

TEST(HarmonyUtf8, PrefixAndSanitize) {
  const std::string euro = "\xE2\x82\xAC";
  EXPECT_EQ(utf8_complete_prefix("ab" + euro), 5u);
  EXPECT_EQ(utf8_complete_prefix(std::string("ab") + euro.substr(0, 2)), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xF0\x9F"), 2u);
  EXPECT_EQ(sanitize_utf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(sanitize_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(sanitize_utf8(euro), euro);
  // Unicode §3.9 Table 3-8: one U+FFFD per maximal subpart, not per byte.
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(sanitize_utf8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + r + r + r + "b" + r + "c" + r + r + "d");
  EXPECT_EQ(sanitize_utf8("\xF0\x9F\x98"), r);         // an emoji cut short
  EXPECT_EQ(sanitize_utf8("\xF0\x9F\x98x"), r + "x");
  EXPECT_EQ(sanitize_utf8("\xE0\x80\x80"), r + r + r);  // overlong: E0 takes A0..BF only
  EXPECT_EQ(sanitize_utf8("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(sanitize_utf8("\xC0\xAF"), r + r);
  EXPECT_EQ(utf8_complete_prefix("ab\xE0\x80"), 4u);  // E0 80 can never complete: released
  EXPECT_EQ(utf8_complete_prefix("ab\xF4\x8F\xBF"), 2u);
}

std::vector<int32_t> encode(const Tokenizer& tok, const std::string& text) {
  auto ids = tok.encode(text, SpecialTokens::Allow);
  EXPECT_TRUE(ids.ok()) << ids.status().message();
  return ids.ok() ? ids.value() : std::vector<int32_t>{};
}

StreamParser make_parser(std::shared_ptr<const Tokenizer> tok, ParseMode mode) {
  auto p = StreamParser::create(std::move(tok), {.role = Role::Assistant, .mode = mode});
  EXPECT_TRUE(p.ok()) << p.status().message();
  return std::move(p).value();
}

const char* kOutput =
    "<|channel|>analysis<|message|>Think: caf\xC3\xA9 \xF0\x9F\xA4\x96 ok.<|end|>"
    "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{\"a\": 1}<|call|>"
    "<|start|>assistant<|channel|>final<|message|>Done \xE4\xBD\xA0\xE5\xA5\xBD.<|return|>";

TEST(HarmonyStream, DeltasAndCurrentChannel) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  StreamParser p = make_parser(tok, ParseMode::Strict);
  std::map<std::string, std::string> by_channel;
  for (int32_t id : encode(*tok, kOutput)) {
    ASSERT_TRUE(p.push(id).ok());
    const std::string& d = p.last_content_delta();
    EXPECT_EQ(sanitize_utf8(d), d) << "delta is not whole UTF-8";
    if (!d.empty() && p.current()) by_channel[p.current_channel().value_or("")] += d;
  }
  ASSERT_EQ(p.messages().size(), 3u);
  EXPECT_EQ(p.messages()[0].text(), "Think: caf\xC3\xA9 \xF0\x9F\xA4\x96 ok.");
  EXPECT_EQ(by_channel["analysis"], p.messages()[0].text());
  EXPECT_EQ(by_channel["commentary"], "{\"a\": 1}");
  EXPECT_EQ(by_channel["final"], "Done \xE4\xBD\xA0\xE5\xA5\xBD.");
  EXPECT_EQ(p.messages()[1].recipient, "functions.get_weather");
  EXPECT_EQ(p.state(), ParserState::ExpectStart);
}

// #27 item 12: invalid or cut-short UTF-8 in the model's output becomes one U+FFFD per maximal
// subpart (as openai-harmony's from_utf8_lossy does), in the parsed message, in the streamed
// deltas and in the plain StreamDecoder alike.
TEST(HarmonyStream, InvalidUtf8BecomesOneReplacementPerMaximalSubpart) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  std::map<unsigned char, int32_t> byte_ids;
  for (int32_t id = 0; id < tok->vocab_size() && byte_ids.size() < 256; ++id)
    if (const auto b = tok->token_bytes(id); b.size() == 1) byte_ids.emplace(static_cast<unsigned char>(b[0]), id);
  auto bytes = [&](std::string_view s) {
    std::vector<int32_t> ids;
    for (char c : s) ids.push_back(byte_ids.at(static_cast<unsigned char>(c)));
    return ids;
  };
  std::vector<int32_t> ids = encode(*tok, "<|channel|>final<|message|>");
  const std::string body = "\xF0\x9F\x98" "x" "\xED\xA0\x80" "y" "\xE2\x82";  // cut emoji, surrogate, cut euro
  const auto body_ids = bytes(body);
  ids.insert(ids.end(), body_ids.begin(), body_ids.end());
  ids.push_back(*tok->token_id("<|return|>"));
  const std::string r = "\xEF\xBF\xBD";
  const std::string want = r + "x" + r + r + r + "y" + r;
  StreamParser p = make_parser(tok, ParseMode::Strict);
  std::string deltas;
  for (int32_t id : ids) {
    ASSERT_TRUE(p.push(id).ok());
    deltas += p.last_content_delta();
  }
  ASSERT_EQ(p.messages().size(), 1u);
  EXPECT_EQ(p.messages()[0].text(), want);
  EXPECT_EQ(deltas, want);
  StreamDecoder dec(tok);
  std::string plain;
  for (int32_t id : body_ids) plain += dec.push(id);
  EXPECT_EQ(plain + dec.flush(), want);
}

// Conversations rendered to tokens parse back to the same messages.
TEST(HarmonyStream, RenderParseRoundTrip) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  std::vector<Message> msgs;
  msgs.push_back(text_message(Role::User, "What's 2+2? \xF0\x9F\x98\x80"));
  Message think = text_message(Role::Assistant, "Easy.\n  Indented line.");
  think.channel = "analysis";
  Message call = text_message(Role::Assistant, "{\"x\":[1,2]}");
  call.channel = "commentary";
  call.recipient = "functions.calc";
  call.content_type = "<|constrain|>json";
  Message result = text_message(Role::Tool, "4");
  result.author.name = "functions.calc";
  result.recipient = "assistant";
  result.channel = "commentary";
  Message answer = text_message(Role::Assistant, "4");
  answer.channel = "final";
  msgs.insert(msgs.end(), {think, call, result, answer});
  auto rendered = render_conversation(msgs, {.drop_analysis = DropAnalysis::Keep});
  ASSERT_TRUE(rendered.ok());
  auto ids = rendered->tokens(*tok);
  ASSERT_TRUE(ids.ok());
  auto parsed = parse_tokens(tok, ids.value(), {.role = std::nullopt, .mode = ParseMode::Strict}, EndOfStream::Reached);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(messages_to_json(parsed.value()), messages_to_json(msgs));
}

TEST(HarmonyStream, LenientRecovers) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  struct Case {
    const char* text;
    std::vector<std::pair<std::string, std::string>> want;  // (channel, content)
  };
  const Case cases[] = {
      // <|end|><|start|>assistant forgotten before the next channel.
      {"<|channel|>analysis<|message|>hmm<|channel|>final<|message|>Hi!<|return|>", {{"analysis", "hmm"}, {"final", "Hi!"}}},
      // <|end|> forgotten before <|start|>.
      {"<|channel|>analysis<|message|>hmm<|start|>assistant<|channel|>final<|message|>Hi!", {{"analysis", "hmm"}, {"final", "Hi!"}}},
      // No <|message|>: the header words become the content.
      {"Just text<|end|>", {{"", "Just text"}}},
      // Text after a terminator without <|start|>: a new assistant message.
      {"<|channel|>final<|message|>a<|end|><|channel|>final<|message|>b", {{"final", "a"}, {"final", "b"}}},
      // Junk header words are dropped, the rest kept.
      {"<|channel|>final a b c<|message|>ok<|end|>", {{"final", "ok"}}},
  };
  for (const Case& c : cases) {
    StreamParser p = make_parser(tok, ParseMode::Lenient);
    for (int32_t id : encode(*tok, c.text)) EXPECT_TRUE(p.push(id).ok()) << c.text;
    EXPECT_TRUE(p.finish().ok());
    ASSERT_EQ(p.messages().size(), c.want.size()) << c.text;
    for (size_t i = 0; i < c.want.size(); ++i) {
      EXPECT_EQ(p.messages()[i].channel.value_or(""), c.want[i].first) << c.text;
      EXPECT_EQ(p.messages()[i].text(), c.want[i].second) << c.text;
    }
  }
}

// Every truncation of a valid output: no crash, lenient never errors, the completed messages
// are a prefix of the full parse, and a cut inside content still yields that content.
TEST(HarmonyStream, TruncatedStreams) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  const std::vector<int32_t> ids = encode(*tok, kOutput);
  auto full = parse_tokens(tok, ids, {.role = Role::Assistant, .mode = ParseMode::Strict}, EndOfStream::Reached);
  ASSERT_TRUE(full.ok());
  for (size_t n = 0; n <= ids.size(); ++n) {
    const std::span<const int32_t> prefix(ids.data(), n);
    for (ParseMode mode : {ParseMode::Strict, ParseMode::Lenient}) {
      auto p = StreamParser::create(tok, {.role = Role::Assistant, .mode = mode});
      ASSERT_TRUE(p.ok());
      for (int32_t id : prefix) ASSERT_TRUE(p->push(id).ok()) << "cut at " << n;
      const bool in_content = p->state() == ParserState::Content;
      const std::string partial = p->current_content();
      const size_t done = p->messages().size();  // completed before the cut
      ASSERT_LE(done, full->size());
      for (size_t i = 0; i < done; ++i)
        EXPECT_EQ(message_to_json(p->messages()[i]), message_to_json((*full)[i])) << "cut at " << n;
      const Status st = p->finish();
      if (mode == ParseMode::Lenient) {
        EXPECT_TRUE(st.ok()) << st.message();
      }
      if (in_content) {
        ASSERT_EQ(p->messages().size(), done + 1);
        EXPECT_EQ(p->messages().back().text().substr(0, partial.size()), partial);
        EXPECT_EQ(p->messages().back().channel, (*full)[done].channel);
      }
    }
  }
}

// Random ids (markers, ordinary, out-of-vocabulary, negative) never crash; lenient never errors.
TEST(HarmonyStream, GarbageStreams) {
  MX_REQUIRE_GPTOSS_TOKENIZER(tok);
  const std::vector<int32_t> markers = {200002, 200003, 200005, 200006, 200007, 200008, 200012, 199999, 200018};
  std::mt19937 rng(1234);
  for (int round = 0; round < 200; ++round) {
    std::vector<int32_t> ids;
    const int len = int(rng() % 60);
    for (int i = 0; i < len; ++i) {
      switch (rng() % 4) {
        case 0: ids.push_back(markers[rng() % markers.size()]); break;
        case 1: ids.push_back(int32_t(rng() % 199998)); break;
        case 2: ids.push_back(int32_t(rng() % 20) - 10 + (rng() % 2 ? 0 : 201100)); break;
        default: ids.push_back(int32_t(rng() % 1000)); break;
      }
    }
    for (ParseMode mode : {ParseMode::Strict, ParseMode::Lenient}) {
      auto p = StreamParser::create(tok, {.role = round % 2 ? std::optional(Role::Assistant) : std::nullopt, .mode = mode});
      ASSERT_TRUE(p.ok());
      for (int32_t id : ids) {
        const Status st = p->push(id);
        if (mode == ParseMode::Lenient) {
          ASSERT_TRUE(st.ok()) << st.message();
        }
        EXPECT_EQ(sanitize_utf8(p->last_content_delta()), p->last_content_delta());
      }
      const Status st = p->finish();
      if (mode == ParseMode::Lenient) {
        EXPECT_TRUE(st.ok()) << st.message();
      }
      for (const Message& m : p->messages()) EXPECT_EQ(sanitize_utf8(m.text()), m.text());
    }
  }
}

}  // namespace
}  // namespace mx::harmony
