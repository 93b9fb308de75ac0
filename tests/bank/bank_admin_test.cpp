// The Bank's operator view (bank/bank_admin.cpp) over a real RAM and SSD
// tier: stored prefixes with their tiers, bytes and first tokens, and
// flushes of one namespace or everything.
#include <gtest/gtest.h>

#include "bank/bank.h"
#include "bank/chain.h"
#include "bank/ram_tier.h"
#include "tests/bank/ssd_test_util.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

using namespace sb::testing;

void publish(Bank& bank, const TestChain& c) {
  for (const auto& b : c.blocks) ASSERT_TRUE(bank.publish(b, Retention::kBlock).is_ok());
  for (const auto& s : c.snapshots) ASSERT_TRUE(bank.publish(s, Retention::kKeep).is_ok());
}

// A chain that shares the first `shared` blocks of `base` and goes on with
// its own `own` blocks (a conversation branching off another).
TestChain branch(const TestChain& base, int shared, uint64_t seed, int own) {
  TestChain c;
  c.blocks.assign(base.blocks.begin(), base.blocks.begin() + shared);
  c.snapshots.assign(base.snapshots.begin(), base.snapshots.begin() + shared);
  const TestChain tail = make_chain(seed, own);
  Key parent = base.blocks[shared - 1]->key;
  for (int i = 0; i < own; ++i) {
    auto b = std::make_shared<Object>(*tail.blocks[i]);
    b->parent = parent;
    b->position = int64_t(shared + i) * kTestBlockTokens;
    b->key = chain_key(parent, b->tokens);
    parent = b->key;
    c.blocks.push_back(b);
    auto s = std::make_shared<Object>(*tail.snapshots[i]);
    s->key = b->key;
    s->position = b->position + kTestBlockTokens;
    c.snapshots.push_back(s);
  }
  return c;
}

const PrefixInfo* find(const std::vector<PrefixInfo>& list, const Key& tail) {
  for (const auto& p : list)
    if (p.tail == tail) return &p;
  return nullptr;
}

class BankAdmin : public ::testing::Test {
 protected:
  void SetUp() override {
    ssd_ = open_tier(test_options(d_.bank()));
    bank_ = std::make_unique<Bank>(std::vector<Tier*>{&ram_, ssd_.get()});
    a_ = make_chain(3, 5);        // namespace "ns0"
    b_ = branch(a_, 2, 40, 2);    // shares a's first two blocks
    c_ = make_chain(4, 3);        // namespace "ns1"
    publish(*bank_, a_);
    publish(*bank_, b_);
    publish(*bank_, c_);
    ASSERT_TRUE(ssd_->flush().is_ok());
  }
  TempDir d_;
  RamTier ram_{1 << 30};
  std::unique_ptr<SsdTier> ssd_;
  std::unique_ptr<Bank> bank_;
  TestChain a_, b_, c_;
};

TEST_F(BankAdmin, ListsEveryStoredChainWithItsTiersBytesAndFirstTokens) {
  // Two reads of a's first blocks and one of b's own.
  ObjectRef o;
  ASSERT_TRUE(ram_.get(ObjectKind::kBlock, a_.blocks[0]->key, &o).is_ok());
  ASSERT_TRUE(ram_.get(ObjectKind::kBlock, a_.blocks[0]->key, &o).is_ok());
  ASSERT_TRUE(ram_.get(ObjectKind::kBlock, b_.blocks[3]->key, &o).is_ok());
  ASSERT_TRUE(ssd_->get(ObjectKind::kBlock, a_.blocks[0]->key, &o).is_ok());

  const auto list = bank_->prefixes(/*needs_snapshot=*/true, /*first_tokens=*/5);
  ASSERT_EQ(list.size(), 3u);  // a, b and c; a's shared blocks are no prefix of their own
  EXPECT_EQ(list[0].tail, a_.blocks.back()->key);  // longest first
  const PrefixInfo* a = find(list, a_.blocks.back()->key);
  const PrefixInfo* b = find(list, b_.blocks.back()->key);
  const PrefixInfo* c = find(list, c_.blocks.back()->key);
  ASSERT_TRUE(a && b && c);
  EXPECT_TRUE(a->has_root);
  EXPECT_EQ(a->root, a_.blocks[0]->parent);
  EXPECT_EQ(a->tokens, 5 * kTestBlockTokens);
  EXPECT_EQ(a->restorable_tokens, 5 * kTestBlockTokens);
  EXPECT_EQ(a->blocks, 5);
  EXPECT_EQ(a->snapshots, 5);
  EXPECT_EQ(b->tokens, 4 * kTestBlockTokens);
  EXPECT_EQ(b->root, a->root);
  uint64_t ram_bytes = 0, ssd_bytes = 0;
  for (const auto& x : a_.all()) ram_bytes += x->payload_bytes(), ssd_bytes += encoded_size(*x);
  ASSERT_EQ(a->tiers.size(), 2u);
  EXPECT_EQ(a->tiers[0].tier, "ram");
  EXPECT_EQ(a->tiers[0].objects, 10u);
  EXPECT_EQ(a->tiers[0].bytes, ram_bytes);
  EXPECT_EQ(a->tiers[1].tier, "ssd");
  EXPECT_EQ(a->tiers[1].bytes, ssd_bytes);
  EXPECT_EQ(a->bytes, ram_bytes + ssd_bytes);
  // Hits: the most-read block of the chain, all tiers together.
  EXPECT_EQ(a->hits, 3u);
  EXPECT_EQ(b->hits, 3u);  // its shared first block
  EXPECT_EQ(c->hits, 0u);
  EXPECT_GT(a->last_use_ms, 0);
  EXPECT_EQ(a->first_tokens, std::vector<int32_t>(a_.blocks[0]->tokens.begin(), a_.blocks[0]->tokens.begin() + 5));
  EXPECT_EQ(a->pinned_until_ms, 0);

  // Reading for the list is no use: nothing changed.
  EXPECT_EQ(bank_->prefixes(true, 5)[0].hits, a->hits);

  // Without the snapshot at 3B..5B, a restores only two blocks; with a hole
  // in it, it has no root and restores nothing.
  for (int i = 2; i < 5; ++i) {
    ASSERT_TRUE(ram_.discard(ObjectKind::kSnapshot, a_.snapshots[i]->key).is_ok());
    ASSERT_TRUE(ssd_->discard(ObjectKind::kSnapshot, a_.snapshots[i]->key).is_ok());
  }
  EXPECT_EQ(find(bank_->prefixes(true, 0), a_.blocks.back()->key)->restorable_tokens, 2 * kTestBlockTokens);
  EXPECT_EQ(find(bank_->prefixes(false, 0), a_.blocks.back()->key)->restorable_tokens, 5 * kTestBlockTokens);
  ASSERT_TRUE(ram_.discard(ObjectKind::kBlock, a_.blocks[3]->key).is_ok());
  ASSERT_TRUE(ssd_->discard(ObjectKind::kBlock, a_.blocks[3]->key).is_ok());
  const auto holed = bank_->prefixes(true, 5);
  const PrefixInfo* rest = find(holed, a_.blocks.back()->key);
  ASSERT_TRUE(rest);
  EXPECT_FALSE(rest->has_root);
  EXPECT_EQ(rest->blocks, 1);
  EXPECT_EQ(rest->restorable_tokens, 0);
  EXPECT_TRUE(rest->first_tokens.empty());
  EXPECT_TRUE(find(holed, a_.blocks[2]->key));  // a's third block is a leaf now
}

TEST_F(BankAdmin, FlushingANamespaceRemovesItsChainsInEveryTierAndNothingElse) {
  Pin pin;
  ASSERT_TRUE(bank_->pin_chain(a_.blocks.back()->key, 60'000, &pin).is_ok());
  Pin other;
  ASSERT_TRUE(bank_->pin_chain(c_.blocks.back()->key, 60'000, &other).is_ok());
  const Key root = a_.blocks[0]->parent;
  FlushResult r;
  ASSERT_TRUE(bank_->flush(&root, &r).is_ok());
  EXPECT_EQ(r.pins, 1u);
  EXPECT_EQ(r.unattributed, 0u);
  EXPECT_EQ(r.objects, 2u * (10 + 4));  // a's 10 objects and b's own 4, in both tiers
  for (const auto& o : a_.all()) {
    EXPECT_FALSE(ram_.contains(o->kind, o->key));
    EXPECT_FALSE(ssd_->contains(o->kind, o->key));
  }
  for (const auto& o : b_.all()) EXPECT_FALSE(ssd_->contains(o->kind, o->key));
  for (const auto& o : c_.all()) {
    EXPECT_TRUE(ram_.contains(o->kind, o->key));
    EXPECT_TRUE(ssd_->contains(o->kind, o->key));
  }
  ASSERT_EQ(bank_->pins().size(), 1u);
  EXPECT_EQ(bank_->pins()[0].id, other.id);
  // Gone from disk too: a reopened tier does not find them.
  (void)ssd_->flush();
  bank_.reset();
  ssd_.reset();
  ssd_ = open_tier(test_options(d_.bank()));
  EXPECT_EQ(ssd_->stats().blocks, 3u);
  EXPECT_EQ(ssd_->stats().snapshots, 3u);
}

TEST_F(BankAdmin, ChainsCutOffFromTheirRootAreLeftByANamespaceFlushAndCounted) {
  ASSERT_TRUE(ram_.discard(ObjectKind::kBlock, c_.blocks[0]->key).is_ok());
  ASSERT_TRUE(ssd_->discard(ObjectKind::kBlock, c_.blocks[0]->key).is_ok());
  const Key root = c_.blocks[0]->parent;
  FlushResult r;
  ASSERT_TRUE(bank_->flush(&root, &r).is_ok());
  EXPECT_EQ(r.objects, 0u);
  EXPECT_EQ(r.unattributed, 2u * 5);  // c's blocks 2 and 3 and its three snapshots, in both tiers
  // Flushing everything takes them too.
  ASSERT_TRUE(bank_->flush(nullptr, &r).is_ok());
  EXPECT_EQ(ram_.stats().bytes, 0u);
  EXPECT_EQ(ssd_->stats().bytes, 0u);
  EXPECT_EQ(r.objects, 2u * (10 + 4 + 5));
  EXPECT_TRUE(bank_->prefixes(true, 0).empty());
}

}  // namespace
}  // namespace sb
