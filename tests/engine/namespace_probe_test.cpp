// Issue 34, finding 7: the operator's other-namespace probe (does another
// tenant store this prompt? MissReason::kOtherNamespace) must tell the
// client nothing. It used to run inside the lookup and stop at its first
// hit, so restore.lookup_ms was shorter when another tenant had stored the
// same prompt. Now it runs after the client-visible timings are taken, and
// asks the same questions whether or not it finds something.
//
// A real engine and bank; the RAM tier is wrapped to count the presence
// questions and to take 400 ms over the question the probe asks (the other
// tenant's first block): a probe timed inside lookup_ms shows there.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "bank/bank.h"
#include "bank/chain.h"
#include "bank/ram_tier.h"
#include "engine/engine.h"
#include "tests/engine/equivalence.h"
#include "tests/util/models.h"

namespace sb {
namespace {

constexpr uint32_t kB = 64;
constexpr auto kSlow = std::chrono::milliseconds(400);
constexpr double kSlowMs = 400.0;

class WatchedRamTier : public RamTier {
 public:
  using RamTier::RamTier;
  bool contains(ObjectKind kind, const Key& key) const override {
    ++questions;
    wait_if_watched(key);
    return RamTier::contains(kind, key);
  }
  void contains_many(std::span<TierProbe> probes) const override {
    questions += probes.size();
    for (auto& p : probes) {
      wait_if_watched(p.key);
      p.present = RamTier::contains(p.kind, p.key);
    }
  }
  mutable std::atomic<uint64_t> questions{0};
  Key watched;

 private:
  void wait_if_watched(const Key& key) const {
    if (key == watched) std::this_thread::sleep_for(kSlow);
  }
};

std::vector<int32_t> tokens(uint32_t seed, size_t n) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = static_cast<int32_t>(rng() % 151936);
  return v;
}

struct Fixture : testing::RamBankEngine<WatchedRamTier> {
  Fixture() : RamBankEngine(testing::shared_model(Arch::kQwen3Next), testing::block_options(kB)) {}
  CompletionResult run(const std::string& ns, const std::vector<int32_t>& prompt) {
    CompletionRequest r;
    r.prompt = prompt;
    r.max_tokens = 1;
    r.name_space = ns;
    CompletionResult out;
    const Status s = engine->complete(r, &out);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return out;
  }
  Key first_block(const std::string& ns, const std::vector<int32_t>& prompt) const {
    return chain_key(root_key(kBankFormatVersion, model.fingerprint(), ns, kB),
                     std::span<const int32_t>(prompt).first(kB));
  }
};

TEST(NamespaceProbe, LookupMsExcludesTheOtherNamespaceProbe) {
  Fixture f;
  const auto prompt = tokens(1, 2 * kB + 5);
  f.run("tenant-a", prompt);  // stores the prompt under tenant a
  f.ram.watched = f.first_block("tenant-a", prompt);
  const CompletionResult b = f.run("tenant-b", prompt);
  EXPECT_EQ(b.restore.restore_point, 0);
  EXPECT_EQ(b.restore.miss_reason, MissReason::kNoEntry);
  EXPECT_TRUE(b.restore.stored_in_other_namespace) << "the operator still learns it";
  // The probe took 400 ms, after the timings the client sees.
  EXPECT_LT(b.restore.lookup_ms, kSlowMs);
  EXPECT_LT(b.restore.restore_ms, kSlowMs);
}

TEST(NamespaceProbe, TheProbeAsksTheSameQuestionsWhetherOrNotItFinds) {
  Fixture f;
  const auto stored = tokens(2, 2 * kB + 5), unstored = tokens(3, 2 * kB + 5);
  f.run("tenant-a", tokens(4, 2 * kB + 5));  // roots seen: a, then c (most recent first: c, a)
  f.run("tenant-c", stored);
  const uint64_t q0 = f.ram.questions.load();
  const CompletionResult hit = f.run("tenant-b", stored);
  const uint64_t q1 = f.ram.questions.load();
  // tenant-b's first request noted its root: the second asks about the same other roots.
  const CompletionResult miss = f.run("tenant-b", unstored);
  const uint64_t q2 = f.ram.questions.load();
  EXPECT_TRUE(hit.restore.stored_in_other_namespace);
  EXPECT_FALSE(miss.restore.stored_in_other_namespace);
  EXPECT_EQ(q1 - q0, q2 - q1) << "a hit must not end the probe early";
}

}  // namespace
}  // namespace sb
