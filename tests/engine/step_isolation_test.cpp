// Issue 48 (the step loop only steps): a request whose grammar mask or
// renderer is slow holds back only itself. The slow parts are injected here:
// a logits processor whose prepare() (the mask, engine/logits_processor.h)
// blocks on a latch, and a consumer of a TokenQueue (engine/token_queue.h)
// that reads nothing until the latch opens. Meanwhile two plain requests
// must decode to the end, one token in every step (the engine's own step
// counter, read as each token comes: no wall-clock bound), with the same
// bits as alone. A processor that does its mask on the step thread
// (prepares() false) is the negative: the plain requests are then held.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "engine/engine.h"
#include "engine/token_queue.h"
#include "tests/engine/equivalence.h"
#include "tests/util/models.h"
#include "tests/util/tokens.h"

namespace sb {
namespace {

using Clock = std::chrono::steady_clock;

class Latch {
 public:
  // Waits until open() or `limit`.
  void wait(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, limit, [this] { return open_; });
    passed_ = true;
  }
  void open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  // A waiter went on (the latch opened, or its wait ran out).
  bool passed() {
    std::lock_guard<std::mutex> lock(mu_);
    return passed_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false, passed_ = false;
};

// Bans token 0 and, from the second token on, waits for the latch in
// prepare(): a mask that takes as long as the test wants.
class SlowMask : public LogitsProcessor {
 public:
  SlowMask(Latch* latch, bool off_thread, std::chrono::milliseconds limit)
      : latch_(latch), off_thread_(off_thread), limit_(limit) {}
  bool prepares() const override { return off_thread_; }
  Status prepare(int64_t, const std::function<bool()>&) override {
    if (accepted_ > 0 && latch_) latch_->wait(limit_);
    return Status::ok();
  }
  Status process(std::span<float> logits, int64_t, const std::function<bool()>&) override {
    logits[0] = -1e30f;
    return Status::ok();
  }
  Status accept(int32_t) override {
    ++accepted_;
    return Status::ok();
  }

 private:
  Latch* latch_;
  bool off_thread_;
  std::chrono::milliseconds limit_;
  int accepted_ = 0;
};

struct Timed {
  CompletionResult result;
  std::vector<uint64_t> steps;  // the engine's step count as each token came
  double itl_ms = 0;            // mean gap between tokens
};

class StepIsolation : public ::testing::Test {
 protected:
  StepIsolation() : model_(testing::shared_model(Arch::kQwen3Next)) {
    EngineOptions o;
    o.block_tokens = 64;
    o.speculative = SpeculativeMode::kOff;  // one token a step: the count below
    EXPECT_TRUE(Engine::create(model_, nullptr, o, &engine_).is_ok());
  }

  CompletionRequest plain(uint32_t seed, int64_t max_tokens) const {
    CompletionRequest r;
    r.prompt = testing::random_tokens(seed, 40, model_.vocab_size());
    r.max_tokens = max_tokens;
    r.cache_mode = CacheMode::kBypass;
    return r;
  }

  Timed run_timed(CompletionRequest r) {
    Timed t;
    std::vector<Clock::time_point> at;
    r.on_token = [&](const GeneratedToken&) {
      t.steps.push_back(engine_->stats().steps);
      at.push_back(Clock::now());
      return true;
    };
    EXPECT_TRUE(engine_->complete(r, &t.result).is_ok());
    if (at.size() > 1)
      t.itl_ms = std::chrono::duration<double, std::milli>(at.back() - at.front()).count() / (at.size() - 1);
    return t;
  }

  // Two plain requests decode beside a masked request held at its second
  // token; returns them, and whether both ended while the mask was held.
  bool plain_beside_slow_mask(bool off_thread, std::chrono::milliseconds limit, std::vector<Timed>* out,
                              CompletionResult* masked_result, Latch* latch) {
    CompletionRequest masked = plain(3, 8);
    masked.make_processor = [latch, off_thread, limit] { return std::make_unique<SlowMask>(latch, off_thread, limit); };
    std::atomic<int> masked_tokens{0};
    masked.on_token = [&](const GeneratedToken&) {
      ++masked_tokens;
      return true;
    };
    std::thread slow([&] { EXPECT_TRUE(engine_->complete(masked, masked_result).is_ok()); });
    while (masked_tokens.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    out->resize(2);
    std::thread other([&] { (*out)[1] = run_timed(plain(2, 24)); });
    (*out)[0] = run_timed(plain(1, 24));
    other.join();
    const bool ended_while_shut = !latch->passed();
    latch->open();
    slow.join();
    return ended_while_shut;
  }

  // The two plain requests together on a quiet engine: the baseline.
  std::vector<Timed> quiet_pair() {
    std::vector<Timed> out(2);
    std::thread other([&] { out[1] = run_timed(plain(2, 24)); });
    out[0] = run_timed(plain(1, 24));
    other.join();
    return out;
  }

  const Model& model_;
  std::unique_ptr<Engine> engine_;
};

void expect_every_step(const Timed& t) {
  ASSERT_EQ(t.steps.size(), 24u);
  for (size_t i = 1; i < t.steps.size(); ++i)
    EXPECT_EQ(t.steps[i], t.steps[i - 1] + 1) << "token " << i << " was held back " << (t.steps[i] - t.steps[i - 1] - 1)
                                              << " steps";
}

TEST_F(StepIsolation, ASlowMaskHoldsBackOnlyItsOwnRequest) {
  const std::vector<Timed> quiet = quiet_pair();
  const Timed &quiet1 = quiet[0], &quiet2 = quiet[1];
  CompletionResult masked_alone;
  {
    CompletionRequest r = plain(3, 8);
    r.make_processor = [] { return std::make_unique<SlowMask>(nullptr, true, std::chrono::milliseconds(0)); };
    ASSERT_TRUE(engine_->complete(r, &masked_alone).is_ok());
  }
  Latch latch;
  std::vector<Timed> beside;
  CompletionResult masked;
  // A minute: only a mask on the step thread waits that long.
  const bool ended = plain_beside_slow_mask(true, std::chrono::milliseconds(60000), &beside, &masked, &latch);
  EXPECT_TRUE(ended) << "the plain requests waited for another request's mask";
  for (const Timed& t : beside) expect_every_step(t);
  EXPECT_EQ(testing::compare_results(beside[0].result, quiet1.result), "");
  EXPECT_EQ(testing::compare_results(beside[1].result, quiet2.result), "");
  EXPECT_EQ(testing::compare_results(masked, masked_alone), "") << "the masked request depends on its timing";
  std::printf("inter-token latency, mean ms (wall clock, a loaded machine: informative): the pair alone %.2f %.2f, "
              "beside a held mask %.2f %.2f (%.2fx)\n",
              quiet1.itl_ms, quiet2.itl_ms, beside[0].itl_ms, beside[1].itl_ms,
              (beside[0].itl_ms + beside[1].itl_ms) / std::max(1e-9, quiet1.itl_ms + quiet2.itl_ms));
}

// The measure notices: a mask computed on the step thread (the processor
// declines a thread of its own) holds the plain requests until it is done.
TEST_F(StepIsolation, AMaskOnTheStepThreadWouldHoldEveryone) {
  Latch latch;
  std::vector<Timed> beside;
  CompletionResult masked;
  const bool ended = plain_beside_slow_mask(false, std::chrono::milliseconds(300), &beside, &masked, &latch);
  EXPECT_FALSE(ended) << "the plain requests ended while the step thread waited for a mask";
}

TEST_F(StepIsolation, ASlowRendererHoldsBackOnlyItsOwnRequest) {
  const std::vector<Timed> quiet = quiet_pair();
  const Timed &quiet1 = quiet[0], &quiet2 = quiet[1];
  CompletionResult rendered_alone;
  ASSERT_TRUE(engine_->complete(plain(4, 12), &rendered_alone).is_ok());
  // The renderer reads its queue only once the latch opens, then stops the
  // request after 5 tokens (a stop string's decision, sent back as a cancellation).
  Latch latch;
  auto queue = std::make_shared<TokenQueue>();
  CompletionRequest r = plain(4, 100000);
  r.on_token = [queue](const GeneratedToken& g) { return queue->push(g); };
  r.cancelled = [queue] { return queue->stopped(); };
  std::vector<GeneratedToken> rendered;
  std::thread renderer([&] {
    latch.wait(std::chrono::milliseconds(60000));
    std::deque<GeneratedToken> got;
    for (bool closed = false; !closed;) {
      closed = queue->take(std::chrono::milliseconds(100), &got);
      for (const GeneratedToken& g : got)
        if (rendered.size() < 5) rendered.push_back(g);
      if (rendered.size() == 5) queue->stop();
    }
  });
  CompletionResult streamed;
  std::thread request([&] {
    EXPECT_TRUE(engine_->complete(r, &streamed).is_ok());
    queue->close();
  });
  std::vector<Timed> beside(2);
  std::thread other([&] { beside[1] = run_timed(plain(2, 24)); });
  beside[0] = run_timed(plain(1, 24));
  other.join();
  EXPECT_FALSE(latch.passed()) << "the renderer was not held";
  latch.open();
  request.join();
  renderer.join();
  for (const Timed& t : beside) expect_every_step(t);
  EXPECT_EQ(testing::compare_results(beside[0].result, quiet1.result), "");
  EXPECT_EQ(testing::compare_results(beside[1].result, quiet2.result), "");
  ASSERT_EQ(rendered.size(), 5u);
  EXPECT_EQ(streamed.finish_reason, FinishReason::kCancelled);
  for (size_t i = 0; i < rendered.size(); ++i) EXPECT_EQ(rendered[i].token, rendered_alone.tokens[i].token) << i;
  std::printf("inter-token latency, mean ms (wall clock, informative): the pair alone %.2f %.2f, beside a stalled "
              "renderer %.2f %.2f (%.2fx)\n",
              quiet1.itl_ms, quiet2.itl_ms, beside[0].itl_ms, beside[1].itl_ms,
              (beside[0].itl_ms + beside[1].itl_ms) / std::max(1e-9, quiet1.itl_ms + quiet2.itl_ms));
}

}  // namespace
}  // namespace sb
