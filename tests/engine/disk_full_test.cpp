// The bank on a disk that fills up and fails while it serves (issue 17):
// an SSD-only bank on a small disk (FaultFs capacity) serves a seeded
// workload; on the way another program takes the free space, appends fail
// with ENOSPC, and single operations fail with EIO. Every response equals
// the same request with the bank bypassed, no published object is lost
// except by the eviction order, the free-space reserve holds, and the bank
// opens afterwards (with the real file system) and serves every object it
// listed.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <set>

#include "bank/bank.h"
#include "bank/key.h"
#include "bank/ssd_tier.h"
#include "engine/engine.h"
#include "tests/bank/ssd_test_util.h"
#include "tests/engine/equivalence.h"
#include "tests/engine/workload.h"
#include "tests/util/fault_fs.h"
#include "tests/util/models.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

constexpr uint32_t kBlock = 64;

SsdOptions bank_options(const Model& model, const std::string& dir, Fs* fs) {
  SsdOptions o;
  o.dir = dir;
  o.fs = fs;
  o.budget_bytes = 1ull << 40;  // the disk binds, not the budget
  o.schema = model.schema();
  o.verify_block = [](const Object& b) { return chain_key(b.parent, b.tokens) == b.key; };
  o.log = [](const std::string&) {};
  return o;
}

// Bytes of one block object and one snapshot of this model, as written.
uint64_t block_and_snapshot_bytes(const StateSchema& schema) {
  uint64_t floats = 0;
  for (const auto& c : schema.components)
    floats += c.kind == ComponentKind::kRecurrent ? c.row_elems : (c.rows_at(kBlock) - c.rows_at(0)) * c.row_elems;
  return 2 * kObjectHeaderBytes + 4 * floats + 4 * kBlock + 8 * schema.components.size();
}

using Name = std::pair<ObjectKind, Key>;
std::set<Name> names(const SsdTier& t) {
  std::set<Name> out;
  for (const auto& e : t.list()) out.insert({e.kind, e.key});
  return out;
}

TEST(DiskFull, ServingWhileTheDiskFillsAndFailsKeepsEveryPromise) {
  const Model& model = testing::shared_model(Arch::kQwen3Next);
  testing::TempDir dir(/*in_memory=*/true);
  FaultFs fs;
  const uint64_t capacity = 14 * block_and_snapshot_bytes(model.schema());
  fs.set_capacity(capacity);
  std::unique_ptr<SsdTier> ssd;
  ASSERT_TRUE(SsdTier::open(bank_options(model, dir.bank(), &fs), &ssd).is_ok());
  const uint64_t reserve = ssd->ssd_stats().reserve_bytes;
  ASSERT_EQ(reserve, capacity / 10);
  auto bank = std::make_unique<Bank>(std::vector<Tier*>{ssd.get()});
  EngineOptions eo;
  eo.block_tokens = kBlock;
  eo.snapshot_every = 2 * kBlock;
  std::unique_ptr<Engine> engine;
  ASSERT_TRUE(Engine::create(model, bank.get(), eo, &engine).is_ok());

  testing::WorkloadOptions w;
  w.seed = 17;
  w.n_requests = 40;
  w.block_tokens = kBlock;
  w.vocab_size = model.vocab_size();
  w.evict_probability = 0;
  const auto steps = testing::make_workload(w);

  std::mt19937_64 rng(17);
  testing::HarnessReport total;
  std::set<Name> listed = names(*ssd);
  uint64_t evictions = 0, quarantined = 0, lost = 0;
  bool other_program = false;
  int request = 0;
  for (const auto& step : steps) {
    if (step.kind != testing::WorkloadStep::Kind::kRequest) continue;
    ++request;
    // The faults, each for a stretch of the run.
    if (request == 12) {
      // Another program takes most of what is free: the bank gives up its
      // own least recently used objects to write new ones.
      SpaceInfo space;
      ASSERT_TRUE(fs.space(dir.bank(), &space).is_ok());
      ASSERT_TRUE(write_whole_file(&fs, dir.path() + "/other", std::string(space.free_bytes * 9 / 10, 'x')).is_ok());
      other_program = true;
    }
    if (request == 20 && other_program) {
      ASSERT_TRUE(fs.remove(dir.path() + "/other").is_ok());
      other_program = false;
    }
    if (request >= 24 && request < 29) fs.set_disk_full(true);  // every append fails (ENOSPC)
    if (request == 29) fs.set_disk_full(false);
    if (request % 5 == 3) fs.fail_at(1 + rng() % 40);  // one operation fails (EIO), read or write

    const auto report = testing::run_equivalence(*engine, {step}, nullptr);
    total.requests += report.requests;
    total.restored += report.restored;
    total.mismatches += report.mismatches;
    total.errors += report.errors;
    for (const auto& f : report.failures)
      if (total.failures.size() < 8) total.failures.push_back("request " + std::to_string(request) + ": " + f);
    (void)ssd->flush();  // write failures are expected here

    // Nothing published is lost but by eviction or quarantine, and what is
    // listed is readable.
    fs.clear_faults();
    const TierStats st = ssd->stats();
    const std::set<Name> now = names(*ssd);
    uint64_t gone = 0;
    for (const auto& n : listed) gone += now.count(n) == 0;
    EXPECT_LE(gone, (st.evictions - evictions) + (st.quarantined - quarantined)) << "request " << request;
    lost += gone;
    evictions = st.evictions;
    quarantined = st.quarantined;
    listed = now;
    EXPECT_LE(fs.used_bytes() + (other_program ? 0 : reserve), capacity) << "request " << request;
  }
  EXPECT_EQ(total.mismatches, 0) << total.summary();
  EXPECT_EQ(total.errors, 0) << total.summary();
  EXPECT_GT(total.restored, 8) << "the bank served from disk throughout";
  const SsdStats s = ssd->ssd_stats();
  EXPECT_GT(s.tier.evictions, 0u) << "the disk filled";
  EXPECT_GT(s.write_errors, 0u) << "ENOSPC and EIO reached the writer";
  for (const auto& [kind, key] : listed) {
    ObjectRef got;
    EXPECT_TRUE(ssd->get(kind, key, &got).is_ok()) << key.hex();
  }

  // A restart on the real file system: the same objects, all readable, and
  // the promise holds for the workload replayed against them.
  engine.reset();
  bank.reset();
  ssd.reset();
  ASSERT_TRUE(SsdTier::open(bank_options(model, dir.bank(), nullptr), &ssd).is_ok());
  EXPECT_EQ(names(*ssd), listed);
  for (const auto& [kind, key] : listed) {
    ObjectRef got;
    EXPECT_TRUE(ssd->get(kind, key, &got).is_ok()) << key.hex();
  }
  EXPECT_EQ(ssd->stats().check_failures, 0u);
  bank = std::make_unique<Bank>(std::vector<Tier*>{ssd.get()});
  ASSERT_TRUE(Engine::create(model, bank.get(), eo, &engine).is_ok());
  std::vector<testing::WorkloadStep> replay(steps.end() - 20, steps.end());
  const auto again = testing::run_equivalence(*engine, replay, nullptr);
  EXPECT_EQ(again.mismatches, 0) << again.summary();
  EXPECT_EQ(again.errors, 0) << again.summary();
  EXPECT_GT(again.restored, 0);
}

}  // namespace
}  // namespace sb
