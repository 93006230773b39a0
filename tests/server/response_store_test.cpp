// The Responses API's state: sealed reasoning (round trip, tampering, another server's secret),
// and ResponseStore — previous_response_id prepends the stored conversation, item_reference
// expands (unknown reasoning dropped, unknown message a 400), encrypted_content opens, the byte
// budget evicts the oldest, the age limit forgets, store/erase/get.
#include <gtest/gtest.h>

#include <thread>

#include "server/response_store.h"

namespace mx::server {
namespace {

TEST(Sealer, RoundTripAndTampering) {
  const Sealer a("secret one"), b("secret two");
  for (const std::string text : {std::string(""), std::string("The user wants the weather."), std::string(1000, 'x')}) {
    const std::string blob = a.seal(text);
    EXPECT_EQ(a.open(blob), text);
    EXPECT_NE(a.seal(text), blob) << "a fresh nonce each time";
    EXPECT_FALSE(b.open(blob)) << "another server's secret";
    EXPECT_EQ(blob.find(text.empty() ? "\x01" : text), std::string::npos) << "the text is not readable in the blob";
  }
  std::string blob = a.seal("keep this exact");
  for (size_t i : {size_t(4), blob.size() / 2, blob.size() - 6}) {
    std::string t = blob;
    t[i] = t[i] == 'A' ? 'B' : 'A';
    EXPECT_FALSE(a.open(t)) << "byte " << i;
  }
  EXPECT_FALSE(a.open(blob.substr(0, blob.size() - 4)));
  EXPECT_FALSE(a.open(""));
  EXPECT_FALSE(a.open("not base64 at all"));
  const Sealer random1, random2;  // fresh secrets differ
  EXPECT_FALSE(random2.open(random1.seal("x")));
}

Json message(const std::string& id, const std::string& role, const std::string& text) {
  return {{"id", id}, {"type", "message"}, {"role", role}, {"content", text}};
}

TEST(ResponseStore, PreviousResponseAndReferences) {
  ResponseStore store({});
  const Json conv = Json::array({message("msg_u1", "user", "hi"),
                                 {{"id", "rs_1"}, {"type", "reasoning"}, {"content", Json::array({{{"type", "reasoning_text"}, {"text", "r"}}})}},
                                 message("msg_a1", "assistant", "hello")});
  store.put("resp_1", {{"id", "resp_1"}, {"object", "response"}}, conv);
  EXPECT_EQ(store.response("resp_1").value()["id"], "resp_1");
  EXPECT_FALSE(store.response("resp_2"));

  Json body = {{"previous_response_id", "resp_1"}, {"input", "and now?"}};
  ASSERT_FALSE(store.expand_input(body));
  ASSERT_EQ(body["input"].size(), 4u);
  EXPECT_EQ(body["input"][2]["id"], "msg_a1");
  EXPECT_EQ(body["input"][3]["content"], "and now?");

  Json refs = {{"input", Json::array({{{"type", "item_reference"}, {"id", "msg_a1"}},
                                      {{"type", "item_reference"}, {"id", "rs_gone"}},
                                      message("m", "user", "next")})}};
  ASSERT_FALSE(store.expand_input(refs));
  ASSERT_EQ(refs["input"].size(), 2u) << "the unknown reasoning reference is dropped";
  EXPECT_EQ(refs["input"][0]["content"], "hello");

  Json bad_ref = {{"input", Json::array({{{"type", "item_reference"}, {"id", "msg_unknown"}}})}};
  auto e = store.expand_input(bad_ref);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "item_not_found");
  Json bad_prev = {{"previous_response_id", "resp_nope"}, {"input", "x"}};
  e = store.expand_input(bad_prev);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "previous_response_id");
  Json wrong_type = {{"previous_response_id", 5}, {"input", "x"}};
  EXPECT_TRUE(store.expand_input(wrong_type));

  EXPECT_TRUE(store.erase("resp_1"));
  EXPECT_FALSE(store.erase("resp_1"));
  Json after = {{"input", Json::array({{{"type", "item_reference"}, {"id", "msg_a1"}}})}};
  EXPECT_TRUE(store.expand_input(after)) << "erased with its response";
}

TEST(ResponseStore, EncryptedReasoningOpensOrIsRefused) {
  ResponseStore store({}), other({});
  const std::string blob = store.sealer().seal("private thoughts");
  Json body = {{"input", Json::array({{{"type", "reasoning"}, {"summary", Json::array()}, {"encrypted_content", blob}},
                                      message("m", "user", "go on")})}};
  Json copy = body;
  ASSERT_FALSE(store.expand_input(body));
  EXPECT_EQ(body["input"][0]["content"][0]["text"], "private thoughts");
  EXPECT_FALSE(body["input"][0].contains("encrypted_content"));
  auto e = other.expand_input(copy);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("encrypted_content"), std::string::npos);
}

TEST(ResponseStore, ByteBudgetEvictsOldestAndAgeForgets) {
  const Json big = Json::array({message("msg_x", "user", std::string(400, 'a'))});
  ResponseStore store({.max_bytes = 1500, .ttl_s = 3600});
  for (int i = 0; i < 5; ++i) store.put("resp_" + std::to_string(i), {{"id", i}}, big);
  EXPECT_LE(store.size(), 3u);
  EXPECT_FALSE(store.response("resp_0")) << "the oldest went first";
  EXPECT_TRUE(store.response("resp_4"));
  store.put("huge", {{"id", "huge"}}, Json::array({message("m", "user", std::string(5000, 'b'))}));
  EXPECT_FALSE(store.response("huge")) << "larger than the whole budget: not stored";
  EXPECT_TRUE(store.response("resp_4")) << "and nothing evicted for it";

  ResponseStore none({.max_bytes = 0});
  none.put("r", {{"id", "r"}}, Json::array());
  EXPECT_FALSE(none.response("r"));

  ResponseStore brief({.max_bytes = 1 << 20, .ttl_s = 1});
  brief.put("r", {{"id", "r"}}, big);
  EXPECT_TRUE(brief.response("r"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_FALSE(brief.response("r"));
  EXPECT_EQ(brief.size(), 0u);
}

}  // namespace
}  // namespace mx::server
