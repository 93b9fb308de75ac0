// HMAC-SHA-256 (common/hmac.h) against RFC 4231's test cases 1, 2 and 6
// (a key longer than the block), given in one piece and in several updates.
#include "common/hmac.h"

#include <gtest/gtest.h>

#include <string>

namespace sb {
namespace {

std::string tag_hex(const std::string& key, const std::string& data, size_t piece) {
  HmacSha256 h(key);
  for (size_t i = 0; i < data.size(); i += piece) h.update(data.data() + i, std::min(piece, data.size() - i));
  return hex_digest(h.finish());
}

TEST(HmacSha256, MatchesRfc4231) {
  const std::string k1(20, '\x0b');
  const std::string k6(131, '\xaa');
  const std::string d6 = "Test Using Larger Than Block-Size Key - Hash Key First";
  for (size_t piece : {size_t{1}, size_t{7}, size_t{1000}}) {
    EXPECT_EQ(tag_hex(k1, "Hi There", piece), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    EXPECT_EQ(tag_hex("Jefe", "what do ya want for nothing?", piece),
              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    EXPECT_EQ(tag_hex(k6, d6, piece), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  }
}

TEST(HmacSha256, SameTagComparesEveryByte) {
  Sha256Digest a{}, b{};
  EXPECT_TRUE(same_tag(a.data(), b.data(), a.size()));
  b[31] = 1;
  EXPECT_FALSE(same_tag(a.data(), b.data(), a.size()));
}

}  // namespace
}  // namespace sb
