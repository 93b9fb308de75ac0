// Forged chain-key collisions (issue 17). With the test hook that keeps only
// 16 bits of every key (tests/util/key_bits.h), an attacker
// in another namespace finds a block of tokens whose key equals a victim's
// in a fraction of a second. Which defence stops what:
//  - a block filed under a colliding name is caught by the remaining checks:
//    check_block compares the stored tokens and parent with the request's;
//  - a snapshot filed under a colliding name is not: snapshots carry no
//    tokens, and the block beside it (the attacker's own) passes. The
//    attacker restores the victim's recurrent state. Only the key function
//    stops this: with full SHA-256 keys the same tokens name another object.
#include <gtest/gtest.h>

#include <random>

#include "bank/bank.h"
#include "bank/key.h"
#include "bank/ram_tier.h"
#include "engine/engine.h"
#include "tests/engine/equivalence.h"
#include "tests/util/key_bits.h"
#include "tests/util/models.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

constexpr uint32_t kB = 64;
constexpr int kWeakBits = 16;

struct Fixture {
  Fixture() : model(testing::shared_model(Arch::kQwen3Next)), ram(1ull << 30), bank({&ram}) {
    EngineOptions o;
    o.block_tokens = kB;
    o.snapshot_every = 0;  // snapshots only where prompts end: the attack places them
    EXPECT_TRUE(Engine::create(model, &bank, o, &engine).is_ok());
  }
  CompletionResult serve(const std::string& ns, std::vector<int32_t> prompt, CompletionResult* bypass = nullptr) {
    CompletionRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = 3;
    r.top_logprobs = 2;
    r.name_space = ns;
    CompletionResult out;
    EXPECT_TRUE(engine->complete(r, &out).is_ok());
    if (bypass) {
      r.cache_mode = CacheMode::kBypass;
      EXPECT_TRUE(engine->complete(r, bypass).is_ok());
    }
    return out;
  }
  Key root(const std::string& ns) const { return root_key(kBankFormatVersion, model.fingerprint(), ns, kB); }
  const Model& model;
  RamTier ram;
  Bank bank;
  std::unique_ptr<Engine> engine;
};

std::vector<int32_t> tokens(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % 150000);
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A block of tokens, other than `victim`, whose key under `attacker_root`
// equals the victim's key under `victim_root` (with the weakened keys).
std::vector<int32_t> forge(const Key& victim_root, const std::vector<int32_t>& victim, const Key& attacker_root) {
  const Key target = chain_key(victim_root, victim);
  // The last two tokens vary: right before the snapshot at the block's end,
  // so the victim's recurrent state is far from the attacker's (tokens
  // further back may have decayed out of it).
  std::vector<int32_t> t = victim;
  const size_t n = t.size();
  for (int32_t i = 0; i < (1 << 24); ++i) {
    t[n - 1] = i % 150000;
    t[n - 2] = i / 150000;
    if (t != victim && chain_key(attacker_root, t) == target) return t;
  }
  ADD_FAILURE() << "no collision found";
  return victim;
}

class KeyCollision : public ::testing::Test {
 protected:
  void TearDown() override { set_key_bits_for_testing(0); }
};

TEST_F(KeyCollision, ABlockUnderAForgedNameIsCaughtByItsStoredTokensAndParent) {
  Fixture f;
  set_key_bits_for_testing(kWeakBits);
  const auto victim_block = tokens(kB, 1);
  const auto forged = forge(f.root("victim"), victim_block, f.root("attacker"));
  ASSERT_EQ(chain_key(f.root("attacker"), forged), chain_key(f.root("victim"), victim_block));

  f.serve("victim", concat(victim_block, tokens(9, 2)));  // publishes the victim's block and snapshot at 64
  CompletionResult bypass;
  const CompletionResult served = f.serve("attacker", concat(forged, tokens(9, 3)), &bypass);
  // The remaining checks catch it: check_block (stored tokens, parent).
  EXPECT_EQ(served.restore.restore_point, 0);
  EXPECT_GE(served.restore.check_failures, 1);
  EXPECT_EQ(testing::compare_results(served, bypass), "");
}

TEST_F(KeyCollision, ASnapshotUnderAForgedNameIsStoppedOnlyByTheKeyFunction) {
  auto attack = [](Fixture& f, CompletionResult* served, CompletionResult* bypass) {
    const auto victim_block = tokens(kB, 11);
    const auto forged = forge(f.root("victim"), victim_block, f.root("attacker"));
    // 1. The victim's conversation: its block and the snapshot at 64.
    f.serve("victim", concat(victim_block, tokens(5, 12)));
    // 2. The attacker sends a prompt whose first block is the forged one and
    //    that takes no snapshot at 64. Its walk refuses the victim's block
    //    (and quarantines it); it goes cold and publishes its own block 1
    //    under the shared name. The victim's snapshot stays.
    f.serve("attacker", concat(forged, tokens(kB + 1, 13)));
    // 3. The attacker's short prompt: its own block 1 passes every check,
    //    and the snapshot at 64 under the same name is the victim's.
    *served = f.serve("attacker", concat(forged, tokens(5, 14)), bypass);
  };
  {
    Fixture f;
    set_key_bits_for_testing(kWeakBits);
    CompletionResult served, bypass;
    attack(f, &served, &bypass);
    // No remaining check can see it: the victim's recurrent state is
    // installed into the attacker's request.
    EXPECT_EQ(served.restore.restore_point, kB);
    EXPECT_EQ(served.restore.check_failures, 0);
    EXPECT_NE(testing::compare_results(served, bypass), "") << "the weakened key let another conversation's state in";
  }
  {
    // The same tokens with the real key function: no collision, nothing of
    // the victim's is ever found under the attacker's names.
    set_key_bits_for_testing(0);
    Fixture f;
    const auto victim_block = tokens(kB, 11);
    set_key_bits_for_testing(kWeakBits);
    const auto forged = forge(f.root("victim"), victim_block, f.root("attacker"));
    set_key_bits_for_testing(0);
    EXPECT_NE(chain_key(f.root("attacker"), forged), chain_key(f.root("victim"), victim_block));
    f.serve("victim", concat(victim_block, tokens(5, 12)));
    f.serve("attacker", concat(forged, tokens(kB + 1, 13)));
    CompletionResult bypass;
    const CompletionResult served = f.serve("attacker", concat(forged, tokens(5, 14)), &bypass);
    EXPECT_EQ(served.restore.restore_point, 0);
    EXPECT_EQ(served.restore.check_failures, 0);
    EXPECT_EQ(testing::compare_results(served, bypass), "");
  }
}

}  // namespace
}  // namespace sb
