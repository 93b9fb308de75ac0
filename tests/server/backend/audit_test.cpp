// The audit (--audit RATE, server/backend/audit.h) on a real engine and bank:
//  - a valid-looking wrong object (right key, tokens, parent and shapes,
//    wrong numbers) injected into the tier is served once, caught by the
//    audit, quarantined with every object of its restore, and the next
//    identical request is served cold and equal to bypass;
//  - the audit never delays the audited response: the response is in the
//    caller's hands and the engine has not run the audit when offer()
//    returns; the job starts only when the audit thread is let go.
#include "server/backend/audit.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "bank/chain.h"
#include "bank/ram_tier.h"
#include "tests/engine/equivalence.h"
#include "tests/util/models.h"
#include "tests/util/state_edit.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

constexpr uint32_t kB = 64;

struct Fixture : testing::RamBankEngine<> {
  Fixture() : RamBankEngine(testing::shared_model(Arch::kQwen3Next), testing::block_options(kB)) {}
  CompletionResult run(CompletionRequest r) {
    CompletionResult out;
    const Status s = engine->complete(r, &out);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return out;
  }
};

CompletionRequest request(uint32_t seed, size_t n) {
  std::mt19937 rng(seed);
  CompletionRequest r;
  r.prompt.resize(n);
  for (auto& t : r.prompt) t = static_cast<int32_t>(rng() % 151936);
  r.max_tokens = 4;
  r.top_logprobs = 3;
  return r;
}

CompletionRequest bypass(CompletionRequest r) {
  r.cache_mode = CacheMode::kBypass;
  return r;
}

TEST(Audit, CatchesAValidLookingWrongObjectQuarantinesTheChainAndTheNextRequestIsCold) {
  Fixture f;
  std::vector<std::string> lines;
  std::mutex lines_mu;
  AuditOptions ao;
  ao.rate = 1.0;
  ao.log = [&](const std::string& l) {
    std::lock_guard<std::mutex> g(lines_mu);
    lines.push_back(l);
  };
  Auditor auditor(*f.engine, &f.bank, ao);

  const CompletionRequest req = request(1, 3 * kB + 5);
  const CompletionResult cold = f.run(bypass(req));
  f.run(req);  // publishes blocks 1..3 and snapshots
  const auto keys = chain_keys(root_key(kBankFormatVersion, f.model.fingerprint(), "", kB), req.prompt, kB, 3);

  // The test hook: replace block 1 in the tier by a copy with other numbers.
  // It passes every check a restore makes (key, parent, position, tokens,
  // part sizes, compose, verify_state): only recomputing can tell.
  ObjectRef good;
  ASSERT_TRUE(f.ram.get(ObjectKind::kBlock, keys[1], &good).is_ok());
  auto wrong = std::make_shared<Object>(*good);
  for (auto& part : wrong->parts) testing::add_to_every_nth_value(part, wrong->dtype, 3, 0.5f);
  ASSERT_TRUE(f.ram.quarantine(ObjectKind::kBlock, keys[1], "test: replaced"));
  ASSERT_TRUE(f.ram.put(wrong, Retention::kBlock).is_ok());

  const CompletionResult served = f.run(req);
  ASSERT_EQ(served.restore.restore_point, 3 * kB);
  ASSERT_EQ(served.restore.check_failures, 0) << "the wrong object looks valid to every check";
  ASSERT_NE(testing::compare_results(served, cold), "") << "the injected object must change the result";
  ASSERT_EQ(served.restored_objects.size(), 4u);  // blocks 1..3 and the snapshot at 3B

  auditor.offer(req, served);
  auditor.drain();
  const AuditStats st = auditor.stats();
  EXPECT_EQ(st.audits, 1u);
  EXPECT_EQ(st.mismatches, 1u);
  EXPECT_EQ(st.quarantined, 4u);
  for (int k = 1; k <= 3; ++k) EXPECT_FALSE(f.ram.contains(ObjectKind::kBlock, keys[k])) << k;
  EXPECT_FALSE(f.ram.contains(ObjectKind::kSnapshot, keys[3]));
  {
    std::lock_guard<std::mutex> g(lines_mu);
    ASSERT_EQ(lines.size(), 1u) << "logged once";
    EXPECT_NE(lines[0].find("AUDIT MISMATCH"), std::string::npos);
    EXPECT_NE(lines[0].find(keys[0].hex()), std::string::npos) << "the line names the chain";
    EXPECT_NE(lines[0].find(keys[3].hex()), std::string::npos);
  }

  // The next identical request is served cold, equal to bypass, and
  // publishes correct objects; the one after restores them and is equal too.
  const CompletionResult next = f.run(req);
  EXPECT_EQ(next.restore.restore_point, 0);
  EXPECT_EQ(testing::compare_results(next, cold), "");
  const CompletionResult healed = f.run(req);
  EXPECT_EQ(healed.restore.restore_point, 3 * kB);
  EXPECT_EQ(testing::compare_results(healed, cold), "");
  auditor.offer(req, healed);
  auditor.drain();
  EXPECT_EQ(auditor.stats().audits, 2u);
  EXPECT_EQ(auditor.stats().mismatches, 1u);
}

TEST(Audit, NeverDelaysTheAuditedResponse) {
  Fixture f;
  std::mutex mu;
  std::condition_variable cv;
  bool release = false, started = false;
  AuditOptions ao;
  ao.rate = 1.0;
  ao.before_job = [&] {
    std::unique_lock<std::mutex> l(mu);
    started = true;
    cv.notify_all();
    cv.wait(l, [&] { return release; });
  };
  Auditor auditor(*f.engine, &f.bank, ao);
  const CompletionRequest req = request(2, 2 * kB + 3);
  f.run(req);
  const CompletionResult served = f.run(req);
  ASSERT_GT(served.restore.restore_point, 0);
  const uint64_t engine_requests = f.engine->stats().requests;

  // offer() is all the response path does; it returns with the audit queued,
  // not run: the engine served nothing more, and the caller holds its
  // complete response while the audit thread is held before the job.
  auditor.offer(req, served);
  EXPECT_EQ(f.engine->stats().requests, engine_requests);
  EXPECT_EQ(auditor.stats().offered, 1u);
  EXPECT_EQ(auditor.stats().audits, 0u);
  EXPECT_EQ(served.tokens.size(), 4u);
  {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return started; });  // the job starts only now, on its own thread
    EXPECT_EQ(auditor.stats().audits, 0u);
    release = true;
  }
  cv.notify_all();
  auditor.drain();
  EXPECT_EQ(auditor.stats().audits, 1u);
  EXPECT_EQ(auditor.stats().mismatches, 0u);
  EXPECT_EQ(f.engine->stats().requests, engine_requests + 1);
}

TEST(Audit, WaitsForIdleTimeSamplesByCounterAndAuditsStoppedRequests) {
  Fixture f;
  std::atomic<bool> idle{false};
  AuditOptions ao;
  ao.rate = 0.5;
  ao.held = [&] { return idle.load() ? size_t{0} : size_t{1}; };  // one client request, or none
  Auditor auditor(*f.engine, &f.bank, ao);
  CompletionRequest req = request(3, 2 * kB + 9);
  f.run(req);
  CompletionResult served = f.run(req);
  ASSERT_GT(served.restore.restore_point, 0);
  // A request that a stop (here: a stop token the model emitted) ended early.
  CompletionRequest stopped = req;
  stopped.stop_tokens = {served.tokens[1].token};
  CompletionResult ended = f.run(stopped);
  ASSERT_EQ(ended.finish_reason, FinishReason::kStop);
  ASSERT_EQ(ended.tokens.size(), 2u);
  for (int i = 0; i < 4; ++i) auditor.offer(i % 2 ? stopped : req, i % 2 ? ended : served);
  // Not idle: nothing runs.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(auditor.stats().audits, 0u);
  idle = true;
  auditor.drain();
  const AuditStats st = auditor.stats();
  EXPECT_EQ(st.offered, 4u);
  EXPECT_EQ(st.audits, 2u) << "every second offer at rate 0.5";
  EXPECT_EQ(st.mismatches, 0u);
  // Not eligible: bypass, nothing restored, nothing generated.
  auditor.offer(bypass(req), served);
  CompletionResult nothing = served;
  nothing.restore.restore_point = 0;
  auditor.offer(req, nothing);
  EXPECT_EQ(auditor.stats().offered, 4u);
}

// Issue 34, finding 6: a streamed response's request carries callbacks into
// the server's job (cancelled(), on_token); the job is cancelled when its
// stream closes and freed soon after, before the audit runs. The audit must
// run on what it owns: today's copy asked the dead job's cancelled(), the
// cold run stopped at 0 tokens, was called a mismatch and quarantined the
// good chain.
TEST(Audit, ARequestWhoseCallbacksDiedWithItsResponseIsAuditedOnItsOwnAndQuarantinesNothing) {
  Fixture f;
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  AuditOptions ao;
  ao.rate = 1.0;
  ao.before_job = [&] {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return release; });
  };
  Auditor auditor(*f.engine, &f.bank, ao);
  const CompletionRequest plain = request(4, 3 * kB + 7);
  f.run(plain);  // publishes
  struct ServerJob {
    std::atomic<bool> cancelled{false};
    std::vector<float> seen;
  };
  auto job = std::make_unique<ServerJob>();
  CompletionRequest streamed = plain;
  ServerJob* raw = job.get();
  streamed.cancelled = [raw] { return raw->cancelled.load(); };
  streamed.on_token = [raw](const GeneratedToken&) { return !raw->cancelled.load(); };
  streamed.on_logits = [raw](std::span<const float> l) { raw->seen.assign(l.begin(), l.end()); };
  const CompletionResult served = f.run(streamed);
  ASSERT_GT(served.restore.restore_point, 0);
  ASSERT_EQ(served.tokens.size(), 4u);
  auditor.offer(streamed, served);
  // The stream closed: the server cancels the job (a no-op for a finished
  // one) and frees it, all before the audit thread gets to the job.
  job->cancelled = true;
  job.reset();
  {
    std::lock_guard<std::mutex> l(mu);
    release = true;
  }
  cv.notify_all();
  auditor.drain();
  const AuditStats st = auditor.stats();
  EXPECT_EQ(st.audits, 1u);
  EXPECT_EQ(st.mismatches, 0u);
  EXPECT_EQ(st.quarantined, 0u);
  EXPECT_EQ(st.interrupted, 0u);
  // The chain is still there: the next identical request restores as much.
  const CompletionResult again = f.run(plain);
  EXPECT_EQ(again.restore.restore_point, served.restore.restore_point);
  EXPECT_EQ(testing::compare_results(again, served), "");
}

// A cold run cut short for any reason but its own end is evidence of
// nothing: counted as interrupted, never compared, never quarantines.
TEST(Audit, AColdRunCutShortIsInterruptedNotAMismatch) {
  Fixture f;
  std::atomic<bool> busy{false};
  AuditOptions ao;
  ao.rate = 1.0;
  ao.held = [&] { return busy.load() ? size_t{2} : size_t{0}; };  // the audit's own and a client's
  ao.before_job = [&] { busy = true; };  // a request arrives as the job starts
  Auditor auditor(*f.engine, &f.bank, ao);
  const CompletionRequest req = request(5, 2 * kB + 11);
  f.run(req);
  const CompletionResult served = f.run(req);
  ASSERT_GT(served.restore.restore_point, 0);
  auditor.offer(req, served);
  auditor.drain();
  const AuditStats st = auditor.stats();
  EXPECT_EQ(st.interrupted, 1u);
  EXPECT_EQ(st.audits, 0u);
  EXPECT_EQ(st.mismatches, 0u);
  EXPECT_EQ(st.quarantined, 0u);
  EXPECT_EQ(f.run(req).restore.restore_point, served.restore.restore_point);
}

}  // namespace
}  // namespace sb
