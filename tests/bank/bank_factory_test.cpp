// TieredBank: the one assembly of the bank's tiers from options (order,
// absence, block verification on by default, close at shutdown).
#include "bank/bank_factory.h"

#include <gtest/gtest.h>

#include "bank/format.h"
#include "tests/bank/ssd_test_util.h"
#include "tests/util/redis_server.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

using namespace sb::testing;

BankOptions options(const std::string& dir) {
  BankOptions o;
  o.ram_bytes = 1 << 20;
  o.ssd_mode = SsdMode::kOn;
  o.ssd_dir = dir;
  o.schema = ssd_test_schema();
  o.log = [](const std::string&) {};
  return o;
}

TEST(TieredBank, OpensRamOverSsdInLookupOrder) {
  TempDir d;
  std::unique_ptr<TieredBank> b;
  ASSERT_TRUE(TieredBank::open(options(d.bank()), &b).is_ok());
  ASSERT_EQ(b->tiers().size(), 2u);
  EXPECT_EQ(b->tiers()[0]->kind(), TierKind::kRam);
  EXPECT_EQ(b->tiers()[1]->kind(), TierKind::kSsd);
  EXPECT_EQ(b->tiers()[0], b->ram());
  EXPECT_EQ(b->tiers()[1], b->ssd());
  ASSERT_NE(b->bank(), nullptr);
  EXPECT_EQ(b->bank()->tiers(), b->tiers());
}

TEST(TieredBank, WithoutTiersThereIsNoBankAndABadRemoteUrlIsRefused) {
  BankOptions none;
  std::unique_ptr<TieredBank> b;
  ASSERT_TRUE(TieredBank::open(none, &b).is_ok());
  EXPECT_EQ(b->bank(), nullptr);
  EXPECT_EQ(b->ram(), nullptr);
  EXPECT_EQ(b->ssd(), nullptr);
  EXPECT_TRUE(b->close(std::chrono::steady_clock::now()).is_ok());

  BankOptions remote;
  remote.remote = "http://127.0.0.1:1";
  EXPECT_EQ(TieredBank::open(remote, &b).code(), Code::kInvalidArgument);
}

TEST(TieredBank, OpensRamOverSsdOverRedisAndClosesThemAll) {
  TempDir d;
  RedisServer redis;
  BankOptions o = options(d.bank());
  o.remote = redis.url();
  o.remote_secret = "factory-test-secret-0123456789";
  o.remote_key_prefix = "factory-test:";
  std::unique_ptr<TieredBank> b;
  ASSERT_TRUE(TieredBank::open(o, &b).is_ok());
  ASSERT_EQ(b->tiers().size(), 3u);
  EXPECT_EQ(b->tiers()[2]->kind(), TierKind::kRemote);
  EXPECT_EQ(b->tiers()[2], b->remote());
  auto chain = make_chain(4, 2);
  for (const auto& obj : chain.all()) ASSERT_TRUE(b->bank()->publish(obj, Retention::kBlock).is_ok());
  ASSERT_TRUE(b->close(std::chrono::steady_clock::time_point::max()).is_ok());
  EXPECT_EQ(redis.keys("factory-test:*").size(), chain.all().size());
  // Closed: nothing more is written.
  EXPECT_EQ(b->remote()->put(make_chain(5, 1).blocks[0], Retention::kBlock).code(), Code::kResourceExhausted);
  // Block verification is on for the remote tier too: a block filed under a
  // key that is not its tokens' is a corruption there.
  auto forged = std::make_shared<Object>(*chain.blocks[1]);
  forged->tokens[0] += 1;
  // (Sealed with the right secret: this is the check behind the MAC.)
  const auto image = encode_object(*forged, Retention::kBlock, schema_digest(ssd_test_schema()));
  const std::string name = b->remote()->redis_key(ObjectKind::kBlock, forged->key);
  ASSERT_EQ(redis.command({"SET", name, RedisTier::seal(o.remote_secret, name, image)}).str, "OK");
  ObjectRef got;
  EXPECT_EQ(b->remote()->get(ObjectKind::kBlock, forged->key, &got).code(), Code::kCorruption);
}

TEST(TieredBank, ABlockWhoseKeyIsNotItsTokensIsACorruptionByDefault) {
  TempDir d;
  auto chain = make_chain(3, 2);
  auto forged = std::make_shared<Object>(*chain.blocks[1]);
  forged->tokens[0] += 1;  // filed under the old key: a hash that no longer matches
  {
    BankOptions o = options(d.bank());
    o.ram_bytes = 0;
    o.verify_blocks = false;  // only so that the forged block can be written
    std::unique_ptr<TieredBank> b;
    ASSERT_TRUE(TieredBank::open(o, &b).is_ok());
    ASSERT_TRUE(b->bank()->publish(chain.blocks[0], Retention::kBlock).is_ok());
    ASSERT_TRUE(b->bank()->publish(forged, Retention::kBlock).is_ok());
    ASSERT_TRUE(b->close(std::chrono::steady_clock::time_point::max()).is_ok());
  }
  BankOptions o = options(d.bank());
  o.ram_bytes = 0;
  std::unique_ptr<TieredBank> b;
  ASSERT_TRUE(TieredBank::open(o, &b).is_ok());
  ObjectRef got;
  EXPECT_TRUE(b->ssd()->get(ObjectKind::kBlock, chain.blocks[0]->key, &got).is_ok());
  EXPECT_EQ(b->ssd()->get(ObjectKind::kBlock, forged->key, &got).code(), Code::kCorruption);
  EXPECT_EQ(b->ssd()->stats().check_failures, 1u);
}

}  // namespace
}  // namespace sb
