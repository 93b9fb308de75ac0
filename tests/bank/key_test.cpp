// Chain keys: the documented encoding (tagged, length-prefixed fields hashed
// with SHA-256, all 256 bits kept), and that every field changes the key.
#include "bank/key.h"

#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <vector>

#include "bank/chain.h"
#include "common/sha256.h"
#include "tests/util/key_bits.h"

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

// The digest of a whole buffer through libcrypto's one-shot path, which the
// key code (incremental, no buffer) must agree with.
Key sha256_of(const std::vector<uint8_t>& bytes) {
  Key k;
  k.bytes = sha256(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  return k;
}

TEST(Key, RootKeyIsSha256OfTheTaggedLengthPrefixedFields) {
  std::vector<uint8_t> bytes;
  put_field(bytes, 'D', text("statebank.root"));
  put_field(bytes, 'V', le32(2));
  put_field(bytes, 'F', text("fp"));
  put_field(bytes, 'N', text("tenant"));
  put_field(bytes, 'B', le32(256));
  EXPECT_EQ(root_key(2, "fp", "tenant", 256), sha256_of(bytes));
  // The SHA-256 of the empty string, as a check that it is SHA-256 at all.
  EXPECT_EQ(hex_digest(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Key, ChainKeyIsSha256OfParentAndTokens) {
  Key parent;
  for (size_t i = 0; i < 32; ++i) parent.bytes[i] = static_cast<uint8_t>(i + 1);
  const std::vector<int32_t> tokens = {7, -1, 151643};
  std::vector<uint8_t> bytes;
  put_field(bytes, 'D', text("statebank.chain"));
  put_field(bytes, 'P', std::vector<uint8_t>(parent.bytes.begin(), parent.bytes.end()));
  std::vector<uint8_t> tk;
  for (int32_t t : tokens) {
    auto b = le32(static_cast<uint32_t>(t));
    tk.insert(tk.end(), b.begin(), b.end());
  }
  put_field(bytes, 'T', tk);
  EXPECT_EQ(chain_key(parent, tokens), sha256_of(bytes));
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
  Key k;
  for (size_t i = 0; i < 32; ++i) k.bytes[i] = static_cast<uint8_t>(0x10 * (i % 16) + (15 - i % 16));
  const std::string hex = k.hex();
  EXPECT_EQ(hex, "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0");
  Key back;
  ASSERT_TRUE(Key::from_hex(hex, &back));
  EXPECT_EQ(back, k);
  std::string upper = hex;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_FALSE(Key::from_hex(upper, &back)) << "names are written lower case; anything else is not ours";
  EXPECT_FALSE(Key::from_hex(hex.substr(0, 32), &back)) << "a version-1 (128-bit) name";
  EXPECT_FALSE(Key::from_hex(hex.substr(0, 63) + "g", &back));
  EXPECT_FALSE(Key::from_hex(hex + "0", &back));
}

TEST(Key, TruncationHookKeepsTheLeadingBitsOnly) {
  const std::vector<int32_t> a = {1, 2, 3, 4};
  const Key root = root_key(2, "fp", "", 4);
  const Key full = chain_key(root, a);
  set_key_bits_for_testing(12);
  const Key cut = chain_key(root, a);
  set_key_bits_for_testing(0);
  EXPECT_EQ(cut.bytes[0], full.bytes[0]);
  EXPECT_EQ(cut.bytes[1], full.bytes[1] & 0xf0);
  for (size_t i = 2; i < 32; ++i) EXPECT_EQ(cut.bytes[i], 0) << i;
  EXPECT_EQ(chain_key(root, a), full) << "0 restores full keys";
}

}  // namespace
}  // namespace sb
