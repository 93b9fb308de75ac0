// Admission (engine/admission.h): its promises with a runner the test
// drives by hand (tickets started are finished when the test says), then
// Engine::submit over a tiny model: a request cancelled before it starts
// never reaches a step, every request ends exactly once, also when the
// engine is destroyed with requests queued and running.
#include "engine/admission.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/util/models.h"

namespace sb {
namespace {

using namespace std::chrono_literals;

// Starts tickets by holding them; the test ends them with finish_all().
class HeldRunner {
 public:
  Admission::Start start() {
    return [this](const std::shared_ptr<Ticket>& t) {
      std::lock_guard<std::mutex> lock(mu_);
      held_.push_back(t);
      cv_.notify_all();
    };
  }
  bool wait_for_started(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return held_.size() + finished_ >= n; });
  }
  size_t started() {
    std::lock_guard<std::mutex> lock(mu_);
    return held_.size() + finished_;
  }
  void finish_all(Admission& admission) {
    std::vector<std::shared_ptr<Ticket>> held;
    {
      std::lock_guard<std::mutex> lock(mu_);
      held.swap(held_);
      finished_ += held.size();
    }
    for (auto& t : held) {
      CompletionResult r;
      r.finish_reason = t->stop_requested() ? FinishReason::kCancelled : FinishReason::kLength;
      admission.finish(*t, Status::ok(), std::move(r));
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Ticket>> held_;
  size_t finished_ = 0;
};

// Counts each request's ends by index.
struct Ends {
  explicit Ends(size_t n) : count(n), reason(n) {}
  CompletionDone on_done(size_t i) {
    return [this, i](Status, CompletionResult r) {
      reason[i] = r.finish_reason;
      ++count[i];
    };
  }
  std::vector<std::atomic<int>> count;
  std::vector<FinishReason> reason;
};

CompletionRequest request(std::atomic<bool>* cancel = nullptr) {
  CompletionRequest r;
  r.prompt = {1, 2, 3};
  if (cancel) r.cancelled = [cancel] { return cancel->load(); };
  return r;
}

TEST(Admission, RunsAtMostItsSlotsRefusesBeyondItsQueueAndEndsEachRequestOnce) {
  HeldRunner runner;
  Ends ends(8);
  {
    Admission a(AdmissionLimits{2, 3, 1.0, 2}, runner.start());
    for (size_t i = 0; i < 5; ++i) EXPECT_EQ(a.submit(request(), ends.on_done(i), ""), Admit::kOk) << i;
    EXPECT_EQ(a.submit(request(), ends.on_done(5), ""), Admit::kFull);
    EXPECT_EQ(a.submit(request(), ends.on_done(6), "", /*bounded=*/false), Admit::kOk);  // waits instead
    ASSERT_TRUE(runner.wait_for_started(2));
    std::this_thread::sleep_for(50ms);  // a third start would show here
    EXPECT_EQ(runner.started(), 2u);
    EXPECT_EQ(a.running(), 2u);
    EXPECT_EQ(a.queued(), 4u);
    for (size_t done = 2; done < 6; done += 2) {
      runner.finish_all(a);
      ASSERT_TRUE(runner.wait_for_started(done + 2));
    }
    runner.finish_all(a);
    EXPECT_TRUE(a.drain(10s));
    a.close();
    EXPECT_EQ(a.submit(request(), ends.on_done(7), ""), Admit::kClosed);
  }
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(ends.count[i].load(), i == 5 || i == 7 ? 0 : 1) << i;
}

TEST(Admission, ARequestCancelledBeforeItStartsNeverReachesTheRunner) {
  HeldRunner runner;
  Ends ends(3);
  std::atomic<bool> cancel{false};
  Admission a(AdmissionLimits{1, 4, 1.0, 1}, runner.start());
  ASSERT_EQ(a.submit(request(), ends.on_done(0), ""), Admit::kOk);
  ASSERT_TRUE(runner.wait_for_started(1));
  ASSERT_EQ(a.submit(request(&cancel), ends.on_done(1), ""), Admit::kOk);
  ASSERT_EQ(a.submit(request(), ends.on_done(2), ""), Admit::kOk);
  cancel = true;
  runner.finish_all(a);  // frees the slot: the cancelled one ends, the next starts
  ASSERT_TRUE(runner.wait_for_started(2));
  runner.finish_all(a);
  EXPECT_TRUE(a.drain(10s));
  EXPECT_EQ(runner.started(), 2u);
  EXPECT_EQ(ends.count[1].load(), 1);
  EXPECT_EQ(ends.reason[1], FinishReason::kCancelled);
  EXPECT_EQ(ends.count[2].load(), 1);
  EXPECT_EQ(ends.reason[2], FinishReason::kLength);
}

TEST(Admission, ATenantHoldsAtMostItsShareWhileOthersGetIn) {
  HeldRunner runner;
  Ends ends(10);
  // ceil(0.5 x (1 + 3)) = 2 per tenant, waiting and running together.
  Admission a(AdmissionLimits{1, 3, 0.5, 1}, runner.start());
  EXPECT_EQ(a.submit(request(), ends.on_done(0), "alice"), Admit::kOk);
  EXPECT_EQ(a.submit(request(), ends.on_done(1), "alice"), Admit::kOk);
  EXPECT_EQ(a.submit(request(), ends.on_done(2), "alice"), Admit::kTenantFull);
  EXPECT_EQ(a.submit(request(), ends.on_done(3), "bob"), Admit::kOk);
  EXPECT_EQ(a.submit(request(), ends.on_done(4), ""), Admit::kOk);  // no tenant: no share
  EXPECT_EQ(a.submit(request(), ends.on_done(5), "bob"), Admit::kFull);
  // Alice's requests end: her share is free again.
  for (size_t started = 1; started <= 4; ++started) {
    ASSERT_TRUE(runner.wait_for_started(started));
    runner.finish_all(a);
  }
  EXPECT_TRUE(a.drain(10s));
  EXPECT_EQ(a.submit(request(), ends.on_done(6), "alice"), Admit::kOk);
  ASSERT_TRUE(runner.wait_for_started(5));
  runner.finish_all(a);
  EXPECT_TRUE(a.drain(10s));
  for (int i : {0, 1, 3, 4, 6}) EXPECT_EQ(ends.count[static_cast<size_t>(i)].load(), 1) << i;
  for (int i : {2, 5}) EXPECT_EQ(ends.count[static_cast<size_t>(i)].load(), 0) << i;
}

TEST(Admission, DrainAtItsDeadlineAbandonsWhatIsLeftAndEachStillEndsOnce) {
  HeldRunner runner;
  Ends ends(3);
  Admission a(AdmissionLimits{1, 4, 1.0, 1}, runner.start());
  for (size_t i = 0; i < 3; ++i) ASSERT_EQ(a.submit(request(), ends.on_done(i), ""), Admit::kOk);
  ASSERT_TRUE(runner.wait_for_started(1));
  a.close();
  EXPECT_FALSE(a.drain(100ms));
  // The running one is told to stop (the engine polls this before every step).
  runner.finish_all(a);
  EXPECT_TRUE(a.drain(10s));
  EXPECT_EQ(runner.started(), 1u);  // the waiting ones never start
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ends.count[i].load(), 1) << i;
    EXPECT_EQ(ends.reason[i], FinishReason::kCancelled) << i;
  }
}

// An engine over no bank that runs one request at a time, so a second one waits.
Status create_one_slot_engine(std::unique_ptr<Engine>* engine) {
  EngineOptions o;
  o.block_tokens = 64;
  o.max_running = 1;
  return Engine::create(testing::shared_model(Arch::kQwen3Next), nullptr, o, engine);
}

// The engine: submit returns at once; what on_done gets equals complete().
TEST(EngineAdmission, SubmitEndsEachRequestOnceAndACancelledOneNeverReachesAStep) {
  std::unique_ptr<Engine> engine;
  ASSERT_TRUE(create_one_slot_engine(&engine).is_ok());
  CompletionRequest r;
  r.prompt = {11, 12, 13, 14, 15};
  r.max_tokens = 3;
  CompletionResult alone;
  ASSERT_TRUE(engine->complete(r, &alone).is_ok());
  const uint64_t steps = engine->stats().steps;

  // A held first request keeps the only slot while the second is cancelled.
  std::atomic<bool> go{false}, cancel{false};
  CompletionRequest held = r;
  held.on_token = [&](const GeneratedToken&) {
    while (!go) std::this_thread::sleep_for(1ms);
    return true;
  };
  CompletionRequest dropped = r;
  dropped.cancelled = [&] { return cancel.load(); };
  std::mutex mu;
  std::vector<std::pair<Status, CompletionResult>> ends(2);
  std::atomic<int> count[2] = {0, 0};
  auto on_done = [&](int i) {
    return [&, i](Status s, CompletionResult result) {
      std::lock_guard<std::mutex> lock(mu);
      ends[i] = {s, std::move(result)};
      ++count[i];
    };
  };
  ASSERT_EQ(engine->submit(held, on_done(0)), Admit::kOk);
  ASSERT_EQ(engine->submit(dropped, on_done(1)), Admit::kOk);
  cancel = true;
  go = true;
  EXPECT_TRUE(engine->admission().drain(60s));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(count[0].load(), 1);
  EXPECT_EQ(count[1].load(), 1);
  ASSERT_TRUE(ends[0].first.is_ok());
  ASSERT_EQ(ends[0].second.tokens.size(), alone.tokens.size());
  for (size_t i = 0; i < alone.tokens.size(); ++i) EXPECT_EQ(ends[0].second.tokens[i].token, alone.tokens[i].token);
  EXPECT_EQ(ends[1].second.finish_reason, FinishReason::kCancelled);
  EXPECT_TRUE(ends[1].second.tokens.empty());
  // Only the held request's steps ran: the same count as alone.
  EXPECT_EQ(engine->stats().steps, 2 * steps);
}

TEST(EngineAdmission, DestroyingTheEngineEndsWhatIsQueuedAndRunning) {
  std::unique_ptr<Engine> engine;
  ASSERT_TRUE(create_one_slot_engine(&engine).is_ok());
  std::atomic<int> ends{0};
  CompletionRequest r;
  r.prompt = {11, 12, 13};
  r.max_tokens = 1 << 20;  // runs until it is abandoned
  for (int i = 0; i < 3; ++i) ASSERT_EQ(engine->submit(r, [&](Status, CompletionResult) { ++ends; }), Admit::kOk);
  engine.reset();
  EXPECT_EQ(ends.load(), 3);
}

}  // namespace
}  // namespace sb
