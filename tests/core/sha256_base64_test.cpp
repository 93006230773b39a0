// SHA-256, HMAC-SHA256 and base64 against published test vectors (FIPS 180-4 examples, RFC 4231,
// RFC 4648), plus lengths around the 64-byte block and padding boundaries.
#include <gtest/gtest.h>

#include "core/base64.h"
#include "core/sha256.h"

namespace mx {
namespace {

std::string hex(const Digest256& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) s += {kHex[b >> 4], kHex[b & 15]};
  return s;
}

TEST(Sha256, PublishedVectors) {
  EXPECT_EQ(hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(sha256(std::string(1000000, 'a'))), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, FedInPiecesEqualsWhole) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += char('a' + i % 26);
  for (size_t len : {55u, 56u, 63u, 64u, 65u, 119u, 128u, 300u}) {
    const std::string s = text.substr(0, len);
    Sha256 h;
    for (size_t i = 0; i < s.size(); i += 7) h.update(std::string_view(s).substr(i, 7));
    EXPECT_EQ(hex(h.digest()), hex(sha256(s))) << len;
  }
}

TEST(HmacSha256, Rfc4231Vectors) {
  EXPECT_EQ(hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // A key longer than the block is hashed first (test case 6).
  EXPECT_EQ(hex(hmac_sha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_TRUE(digests_equal(sha256("x"), sha256("x")));
  EXPECT_FALSE(digests_equal(sha256("x"), sha256("y")));
}

TEST(Base64, Rfc4648VectorsAndBadInput) {
  const std::pair<const char*, const char*> v[] = {{"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"},
                                                   {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, coded] : v) {
    EXPECT_EQ(base64_encode(plain), coded);
    EXPECT_EQ(base64_decode(coded), plain);
  }
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes += char(i);
  EXPECT_EQ(base64_decode(base64_encode(bytes)), bytes);
  for (const char* bad : {"Zg=", "Zg", "Z===", "Zm9v!A==", "Zg==Zg==", "=Zg=", "Zm=v"}) EXPECT_FALSE(base64_decode(bad)) << bad;
}

}  // namespace
}  // namespace mx
