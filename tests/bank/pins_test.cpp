// Pins (bank/pins.h): a pinned prefix survives a RAM and an SSD budget
// squeeze that evicts everything else, still restores whole, and is evicted
// once its TTL is over. Time is a ManualClock: nothing here sleeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "bank/bank.h"
#include "bank/chain.h"
#include "bank/pins.h"
#include "bank/ram_tier.h"
#include "tests/bank/ssd_test_util.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

using namespace sb::testing;

constexpr int kBlocks = 4;
constexpr int64_t kTtlMs = 60'000;

void publish(Bank& bank, const TestChain& c) {
  for (const auto& b : c.blocks) ASSERT_TRUE(bank.publish(b, Retention::kBlock).is_ok());
  for (const auto& s : c.snapshots) ASSERT_TRUE(bank.publish(s, Retention::kKeep).is_ok());
}

std::vector<Key> chain_of(const TestChain& c) {
  std::vector<Key> keys = {c.blocks.front()->parent};
  for (const auto& b : c.blocks) keys.push_back(b->key);
  return keys;
}

std::vector<int32_t> tokens_of(const TestChain& c) {
  std::vector<int32_t> t;
  for (const auto& b : c.blocks) t.insert(t.end(), b->tokens.begin(), b->tokens.end());
  return t;
}

uint64_t ram_bytes(const TestChain& c) {
  uint64_t n = 0;
  for (const auto& o : c.all()) n += o->payload_bytes();
  return n;
}

uint64_t ssd_bytes(const TestChain& c) {
  uint64_t n = 0;
  for (const auto& o : c.all()) n += encoded_size(*o);
  return n;
}

// Which objects of `c` a tier holds.
size_t held(const Tier& t, const TestChain& c) {
  size_t n = 0;
  for (const auto& o : c.all()) n += t.contains(o->kind, o->key) ? 1 : 0;
  return n;
}

// The pinned prefix restores whole (every block and the last snapshot),
// from the tier that kept it.
void expect_restores_whole(Bank& bank, const TestChain& c) {
  auto prompt = tokens_of(c);
  prompt.push_back(1);  // one token left to prefill
  RestorePlan plan;
  ASSERT_TRUE(bank.plan_restore(ssd_test_schema(), chain_of(c), prompt, kTestBlockTokens, &plan).is_ok());
  EXPECT_EQ(plan.restore_point, kBlocks * kTestBlockTokens);
  EXPECT_EQ(plan.miss_reason, MissReason::kNone);
  ASSERT_EQ(plan.blocks.size(), c.blocks.size());
  for (size_t i = 0; i < c.blocks.size(); ++i) EXPECT_TRUE(same_object(*plan.blocks[i], *c.blocks[i]));
  ASSERT_TRUE(plan.snapshot);
  EXPECT_TRUE(same_object(*plan.snapshot, *c.snapshots.back()));
}

TEST(Pins, APinnedPrefixSurvivesARamSqueezeAndGoesAfterItsTtl) {
  ManualClock clock;
  RamTier ram(1 << 30);
  Bank bank({&ram}, &clock);
  const TestChain pinned = make_chain(1, kBlocks);
  std::vector<TestChain> others;
  for (uint64_t seed = 2; seed < 8; ++seed) others.push_back(make_chain(seed, kBlocks));
  publish(bank, pinned);
  for (const auto& c : others) publish(bank, c);
  Pin pin;
  ASSERT_TRUE(bank.pin_prefix(chain_of(pinned), kBlocks * kTestBlockTokens, kTtlMs, &pin).is_ok());
  EXPECT_EQ(pin.id, pinned.blocks.back()->key.hex());

  // A squeeze to exactly the pinned bytes evicts everything else; one below
  // them evicts nothing more (pins may hold a tier above its budget).
  ram.set_budget(ram_bytes(pinned));
  EXPECT_EQ(held(ram, pinned), pinned.all().size());
  for (const auto& c : others) EXPECT_EQ(held(ram, c), 0u);
  EXPECT_EQ(ram.stats().bytes, ram_bytes(pinned));
  ram.set_budget(ram_bytes(pinned) / 2);
  EXPECT_EQ(held(ram, pinned), pinned.all().size());
  // A new object does not fit beside the pins: it is the one evicted.
  publish(bank, others[0]);
  EXPECT_EQ(held(ram, others[0]), 0u);
  EXPECT_EQ(held(ram, pinned), pinned.all().size());
  expect_restores_whole(bank, pinned);

  // One millisecond before the end of the TTL it still holds...
  clock.advance_ms(kTtlMs - 1);
  bank.sweep_pins();
  ram.set_budget(ram_bytes(pinned) / 2);
  EXPECT_EQ(held(ram, pinned), pinned.all().size());
  EXPECT_EQ(bank.pins().size(), 1u);
  // ...and at its end the tier evicts down to its budget at once.
  clock.advance_ms(1);
  bank.sweep_pins();
  EXPECT_TRUE(bank.pins().empty());
  EXPECT_LE(ram.stats().bytes, ram_bytes(pinned) / 2);
  EXPECT_LT(held(ram, pinned), pinned.all().size());
}

TEST(Pins, APinnedPrefixSurvivesAnSsdSqueezeAndGoesAfterItsTtl) {
  TempDir d;
  ManualClock clock;
  const TestChain pinned = make_chain(11, kBlocks);
  auto o = test_options(d.bank());
  o.budget_bytes = ssd_bytes(pinned);  // room for the pinned prefix and nothing else
  auto ssd = open_tier(o);
  Bank bank({ssd.get()}, &clock);
  publish(bank, pinned);
  ASSERT_TRUE(ssd->flush().is_ok());
  Pin pin;
  ASSERT_TRUE(bank.pin_prefix(chain_of(pinned), kBlocks * kTestBlockTokens, kTtlMs, &pin).is_ok());
  // Other conversations come and go; none of them can push the pin out.
  std::vector<TestChain> others;
  for (uint64_t seed = 12; seed < 16; ++seed) others.push_back(make_chain(seed, kBlocks));
  for (const auto& c : others) publish(bank, c);
  EXPECT_EQ(ssd->flush().code(), Code::kResourceExhausted);  // "the SSD budget is held by pinned objects"
  EXPECT_EQ(held(*ssd, pinned), pinned.all().size());
  for (const auto& c : others) EXPECT_EQ(held(*ssd, c), 0u);
  EXPECT_EQ(ssd->stats().bytes, ssd_bytes(pinned));
  expect_restores_whole(bank, pinned);
  // gc to a smaller budget passes over the pins too.
  uint64_t n = 0, b = 0;
  ASSERT_TRUE(ssd->evict_to(ssd_bytes(pinned) / 2, &n, &b).is_ok());
  EXPECT_EQ(n, 0u);

  // After the TTL, the next conversation pushes the old prefix out.
  clock.advance_ms(kTtlMs);
  bank.sweep_pins();
  publish(bank, others[0]);
  ASSERT_TRUE(ssd->flush().is_ok());
  EXPECT_EQ(held(*ssd, others[0]), others[0].all().size());
  EXPECT_EQ(held(*ssd, pinned), 0u);
}

TEST(Pins, RamAndSsdTogetherKeepThePinnedPrefixAndNothingElse) {
  TempDir d;
  ManualClock clock;
  const TestChain pinned = make_chain(21, kBlocks);
  auto o = test_options(d.bank());
  o.budget_bytes = ssd_bytes(pinned);
  auto ssd = open_tier(o);
  RamTier ram(ram_bytes(pinned));
  Bank bank({&ram, ssd.get()}, &clock);
  // Pinned before it is computed: the names are protected as they arrive.
  Pin pin;
  ASSERT_TRUE(bank.pin_prefix(chain_of(pinned), kBlocks * kTestBlockTokens, kTtlMs, &pin).is_ok());
  publish(bank, pinned);
  for (uint64_t seed = 22; seed < 28; ++seed) publish(bank, make_chain(seed, kBlocks));
  (void)ssd->flush();
  EXPECT_EQ(held(ram, pinned), pinned.all().size());
  EXPECT_EQ(held(*ssd, pinned), pinned.all().size());
  EXPECT_EQ(ram.stats().bytes, ram_bytes(pinned));
  EXPECT_EQ(ssd->stats().bytes, ssd_bytes(pinned));
  expect_restores_whole(bank, pinned);
  // What each tier holds under the pin.
  const auto share = bank.pinned_share(pin);
  ASSERT_EQ(share.size(), 2u);
  EXPECT_EQ(share[0].tier, "ram");
  EXPECT_EQ(share[0].bytes, ram_bytes(pinned));
  EXPECT_EQ(share[1].tier, "ssd");
  EXPECT_EQ(share[1].objects, pinned.all().size());
  EXPECT_EQ(share[1].bytes, ssd_bytes(pinned));

  // Unpinning releases it at once where the tier is over budget.
  ram.set_budget(ram_bytes(pinned) / 2);
  EXPECT_EQ(held(ram, pinned), pinned.all().size());
  EXPECT_TRUE(bank.unpin(pin.id));
  EXPECT_FALSE(bank.unpin(pin.id));
  EXPECT_LE(ram.stats().bytes, ram_bytes(pinned) / 2);
}

// Issue 47, finding 6: pinned objects stood above a tier's budget (360 pins
// held an 8 MiB RAM tier at 189 MiB). Pinned bytes count in the budget: a
// pinned prefix that does not fit beside the pinned ones already stored is
// not stored, in RAM and on SSD, and the tier stays within its budget.
TEST(Pins, PinnedObjectsCountInEachTiersBudget) {
  TempDir d;
  ManualClock clock;
  const TestChain first = make_chain(41, kBlocks), second = make_chain(42, kBlocks);
  auto o = test_options(d.bank());
  o.budget_bytes = ssd_bytes(first) + ssd_bytes(second) / 2;
  auto ssd = open_tier(o);
  RamTier ram(ram_bytes(first) + ram_bytes(second) / 2);
  Bank bank({&ram, ssd.get()}, &clock);
  // Both pinned before they are computed (an operator's pins: no count limit).
  Pin pin;
  ASSERT_TRUE(bank.pin_prefix(chain_of(first), kBlocks * kTestBlockTokens, kTtlMs, &pin).is_ok());
  ASSERT_TRUE(bank.pin_prefix(chain_of(second), kBlocks * kTestBlockTokens, kTtlMs, &pin).is_ok());
  publish(bank, first);
  for (const auto& b : second.blocks) (void)bank.publish(b, Retention::kBlock);
  for (const auto& s : second.snapshots) (void)bank.publish(s, Retention::kKeep);
  (void)ssd->flush();
  EXPECT_EQ(held(ram, first), first.all().size());
  EXPECT_EQ(held(*ssd, first), first.all().size());
  EXPECT_LT(held(ram, second), second.all().size());
  EXPECT_LT(held(*ssd, second), second.all().size());
  EXPECT_LE(ram.stats().bytes, ram.stats().budget_bytes) << "pins held the RAM tier over its budget";
  EXPECT_LE(ssd->stats().bytes, ssd->stats().budget_bytes) << "pins held the SSD tier over its budget";
  expect_restores_whole(bank, first);
}

TEST(Pins, APinByChainWalksBackToTheRootAndANewPinReplacesTheTtl) {
  ManualClock clock;
  RamTier ram(1 << 30);
  Bank bank({&ram}, &clock);
  const TestChain c = make_chain(31, kBlocks);
  publish(bank, c);
  Pin pin;
  ASSERT_TRUE(bank.pin_chain(c.blocks.back()->key, kTtlMs, &pin).is_ok());
  EXPECT_TRUE(pin.has_root);
  EXPECT_EQ(pin.root, c.blocks.front()->parent);
  const auto chain = chain_of(c);
  EXPECT_EQ(pin.keys, std::vector<Key>(chain.begin() + 1, chain.end()));
  EXPECT_EQ(pin.tokens, kBlocks * kTestBlockTokens);
  EXPECT_EQ(bank.pin_chain(Key{1, 2}, kTtlMs, &pin).code(), Code::kNotFound);
  EXPECT_EQ(bank.pin_chain(c.blocks.back()->key, 0, &pin).code(), Code::kInvalidArgument);

  clock.advance_ms(kTtlMs / 2);
  ASSERT_TRUE(bank.pin_chain(c.blocks.back()->key, kTtlMs, &pin).is_ok());  // the same prefix again: a new TTL
  ASSERT_EQ(bank.pins().size(), 1u);
  EXPECT_EQ(bank.pins()[0].expires_ms, clock.now_ms() + kTtlMs);
  clock.advance_ms(kTtlMs / 2 + 1);  // past the first TTL, inside the second
  ram.set_budget(0);
  EXPECT_EQ(held(ram, c), c.all().size());

  // A hole: the walk stops at the first absent block.
  ram.set_budget(1 << 30);
  EXPECT_TRUE(bank.unpin(pin.id));
  ASSERT_TRUE(ram.erase(ObjectKind::kBlock, c.blocks[1]->key));
  ASSERT_TRUE(bank.pin_chain(c.blocks.back()->key, kTtlMs, &pin).is_ok());
  EXPECT_FALSE(pin.has_root);
  EXPECT_EQ(pin.keys, (std::vector<Key>{c.blocks[2]->key, c.blocks[3]->key}));
}

// Issue 47: the names' expiries are kept per pin, not rebuilt from every
// pin, and stay exact: two pins sharing names (a prefix and its extension),
// one removed, one replaced by a shorter TTL, one expired.
TEST(Pins, PinsSharingNamesKeepEachOthersProtectionExactly) {
  ManualClock clock;
  PinSet pins(clock);
  const Key a{1, 1}, b{2, 2}, c{3, 3};
  auto pin = [&](const std::string& id, std::vector<Key> keys, int64_t ttl) {
    Pin p;
    p.id = id;
    p.keys = std::move(keys);
    p.expires_ms = clock.now_ms() + ttl;
    pins.add(std::move(p));
  };
  pin("short", {a, b}, 1000);
  pin("long", {a, b, c}, 5000);
  EXPECT_TRUE(pins.protects(ObjectKind::kBlock, a));
  EXPECT_TRUE(pins.protects(ObjectKind::kBlock, c));
  // The longer pin gone, the shorter still holds its own names, not c.
  ASSERT_TRUE(pins.remove("long"));
  EXPECT_TRUE(pins.protects(ObjectKind::kBlock, b));
  EXPECT_FALSE(pins.protects(ObjectKind::kBlock, c));
  // Both again; then the long one replaced by one shorter than "short".
  pin("long", {a, b, c}, 5000);
  pin("long", {a, b, c}, 500);
  ASSERT_EQ(pins.list().size(), 2u);
  clock.advance_ms(600);  // past the new "long", inside "short"
  EXPECT_TRUE(pins.any_expired());
  EXPECT_TRUE(pins.protects(ObjectKind::kBlock, a));
  EXPECT_FALSE(pins.protects(ObjectKind::kBlock, c));
  EXPECT_EQ(pins.purge_expired(), 1u);
  EXPECT_FALSE(pins.any_expired());
  Pin found;
  EXPECT_TRUE(pins.find("short", &found));
  EXPECT_FALSE(pins.find("long", &found));
  clock.advance_ms(400);  // "short" ends
  EXPECT_FALSE(pins.protects(ObjectKind::kBlock, a));
  EXPECT_FALSE(pins.find("short", &found));
  EXPECT_EQ(pins.purge_expired(), 1u);
  EXPECT_TRUE(pins.list().empty());
  // remove_root and clear leave nothing protected either.
  pin("x", {a}, 1000);
  EXPECT_EQ(pins.clear(), 1u);
  EXPECT_FALSE(pins.protects(ObjectKind::kBlock, a));
}

}  // namespace
}  // namespace sb
