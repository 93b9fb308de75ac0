// Chain keys: the documented encoding (tagged, length-prefixed fields hashed
// with XXH3-128), and that every field changes the key.
#include "bank/key.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <set>
#include <vector>

#include "bank/chain.h"

namespace sb {
namespace {

void put_field(std::vector<uint8_t>& out, char tag, const std::vector<uint8_t>& bytes) {
  out.push_back(static_cast<uint8_t>(tag));
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(bytes.size()) >> (8 * i)));
  out.insert(out.end(), bytes.begin(), bytes.end());
}
std::vector<uint8_t> text(const std::string& s) { return {s.begin(), s.end()}; }
std::vector<uint8_t> le32(uint32_t v) {
  return {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v >> 16),
          static_cast<uint8_t>(v >> 24)};
}

TEST(Key, RootKeyIsXxh3OfTheTaggedLengthPrefixedFields) {
  std::vector<uint8_t> bytes;
  put_field(bytes, 'D', text("statebank.root"));
  put_field(bytes, 'V', le32(1));
  put_field(bytes, 'F', text("fp"));
  put_field(bytes, 'N', text("tenant"));
  put_field(bytes, 'B', le32(256));
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  const Key k = root_key(1, "fp", "tenant", 256);
  EXPECT_EQ(k.hi, h.high64);
  EXPECT_EQ(k.lo, h.low64);
}

TEST(Key, ChainKeyIsXxh3OfParentAndTokens) {
  const Key parent{0x0102030405060708ULL, 0x1112131415161718ULL};
  const std::vector<int32_t> tokens = {7, -1, 151643};
  std::vector<uint8_t> bytes;
  put_field(bytes, 'D', text("statebank.chain"));
  std::vector<uint8_t> pk;
  for (int i = 0; i < 8; ++i) pk.push_back(static_cast<uint8_t>(parent.hi >> (8 * i)));
  for (int i = 0; i < 8; ++i) pk.push_back(static_cast<uint8_t>(parent.lo >> (8 * i)));
  put_field(bytes, 'P', pk);
  std::vector<uint8_t> tk;
  for (int32_t t : tokens) {
    auto b = le32(static_cast<uint32_t>(t));
    tk.insert(tk.end(), b.begin(), b.end());
  }
  put_field(bytes, 'T', tk);
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  const Key k = chain_key(parent, tokens);
  EXPECT_EQ(k.hi, h.high64);
  EXPECT_EQ(k.lo, h.low64);
}

TEST(Key, EveryRootFieldChangesTheKeyAndFieldsDoNotRunTogether) {
  std::set<Key> keys;
  keys.insert(root_key(1, "fp", "", 256));
  keys.insert(root_key(2, "fp", "", 256));
  keys.insert(root_key(1, "fq", "", 256));
  keys.insert(root_key(1, "fp", "a", 256));
  keys.insert(root_key(1, "fp", "", 128));
  // Moving bytes between fingerprint and namespace must not collide.
  keys.insert(root_key(1, "fpa", "", 256));
  keys.insert(root_key(1, "f", "pa", 256));
  // A namespace equal to the fingerprint, and the two swapped.
  keys.insert(root_key(1, "x", "y", 256));
  keys.insert(root_key(1, "y", "x", 256));
  keys.insert(root_key(1, "x", "x", 256));
  EXPECT_EQ(keys.size(), 10u);
  EXPECT_EQ(root_key(1, "fp", "a", 256), root_key(1, "fp", "a", 256));
}

TEST(Key, ChainKeyDependsOnParentTokensAndOrder) {
  const Key root = root_key(1, "fp", "", 4);
  const std::vector<int32_t> a = {1, 2, 3, 4}, b = {1, 2, 4, 3}, c = {1, 2, 3};
  EXPECT_NE(chain_key(root, a), chain_key(root, b));
  EXPECT_NE(chain_key(root, a), chain_key(root, c));
  EXPECT_NE(chain_key(root, a), chain_key(root_key(1, "fp", "t", 4), a));
  EXPECT_EQ(chain_key(root, a), chain_key(root, a));
}

TEST(Key, ChainKeysFollowTheChain) {
  const Key root = root_key(1, "fp", "", 2);
  const std::vector<int32_t> tokens = {5, 6, 7, 8, 9};
  const auto keys = chain_keys(root, tokens, 2, 2);
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0], root);
  EXPECT_EQ(keys[1], chain_key(root, std::vector<int32_t>{5, 6}));
  EXPECT_EQ(keys[2], chain_key(keys[1], std::vector<int32_t>{7, 8}));
}

TEST(Key, HexRoundTripsAndRejectsBadText) {
  const Key k{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(k.hex(), "0123456789abcdeffedcba9876543210");
  Key back;
  ASSERT_TRUE(Key::from_hex(k.hex(), &back));
  EXPECT_EQ(back, k);
  ASSERT_TRUE(Key::from_hex("0123456789ABCDEFFEDCBA9876543210", &back));
  EXPECT_EQ(back, k);
  EXPECT_FALSE(Key::from_hex("0123", &back));
  EXPECT_FALSE(Key::from_hex("0123456789abcdeffedcba987654321g", &back));
  EXPECT_FALSE(Key::from_hex(k.hex() + "0", &back));
}

}  // namespace
}  // namespace sb
