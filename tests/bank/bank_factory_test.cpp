// TieredBank: the one assembly of the bank's tiers from options (order,
// absence, block verification on by default, close at shutdown).
#include "bank/bank_factory.h"

#include <gtest/gtest.h>

#include "tests/bank/ssd_test_util.h"

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

TEST(TieredBank, WithoutTiersThereIsNoBankAndARemoteTierIsRefused) {
  BankOptions none;
  std::unique_ptr<TieredBank> b;
  ASSERT_TRUE(TieredBank::open(none, &b).is_ok());
  EXPECT_EQ(b->bank(), nullptr);
  EXPECT_EQ(b->ram(), nullptr);
  EXPECT_EQ(b->ssd(), nullptr);
  EXPECT_TRUE(b->close(std::chrono::steady_clock::now()).is_ok());

  BankOptions remote;
  remote.remote = "redis://127.0.0.1:1";
  EXPECT_EQ(TieredBank::open(remote, &b).code(), Code::kUnsupported);
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
