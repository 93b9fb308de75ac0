// How the step loop shares a step between running decodes and prompts
// (engine/step_loop.h, promise 2): beside a decode, the latency bound spreads
// a prompt over steps, except its first grid chunk, which runs in one step.
// Steps are counted by the engine's own counter; every result is also
// compared with the same request with the bank bypassed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "bank/bank.h"
#include "bank/ram_tier.h"
#include "engine/engine.h"
#include "tests/engine/equivalence.h"
#include "tests/util/models.h"
#include "tests/util/tokens.h"

namespace sb {
namespace {

constexpr uint32_t kB = 64;

// A request that decodes beside the others until the test ends.
class Decoder {
 public:
  Decoder(Engine& engine, std::vector<int32_t> prompt) {
    request_.prompt = std::move(prompt);
    request_.max_tokens = 100000;
    request_.cache_mode = CacheMode::kBypass;
    request_.on_token = [this](const GeneratedToken&) {
      ++tokens_;
      return !stop_.load();
    };
    thread_ = std::thread([this, &engine] {
      EXPECT_TRUE(engine.complete(request_, &result_).is_ok());
      ended_ = true;
    });
    while (tokens_.load() < 4 && !ended_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_FALSE(ended_.load()) << "the decoder ended before the test";
  }
  ~Decoder() {
    stop_ = true;
    thread_.join();
  }

 private:
  CompletionRequest request_;
  CompletionResult result_;
  std::atomic<int> tokens_{0};
  std::atomic<bool> stop_{false}, ended_{false};
  std::thread thread_;
};

class StepPlan : public ::testing::Test {
 protected:
  StepPlan() : model_(testing::shared_model(Arch::kQwen35)), ram_(1ULL << 30), bank_({&ram_}) {
    EngineOptions o;
    o.block_tokens = kB;
    o.snapshot_every = 2 * kB;
    // About no prompt row fits beside a decode: the bound alone would take
    // one row a step.
    o.itl_ratio = 1.001;
    EXPECT_TRUE(Engine::create(model_, &bank_, o, &engine_).is_ok());
  }

  std::vector<int32_t> tokens(uint32_t seed, int64_t n) const {
    return testing::random_tokens(seed, n, model_.vocab_size());
  }

  // Serves `prompt` beside the decoder; returns the steps from its
  // submission to its first token, and checks it against bypass.
  uint64_t steps_to_first_token(const std::vector<int32_t>& prompt, CacheMode mode) {
    CompletionRequest r;
    r.prompt = prompt;
    r.max_tokens = 2;
    r.cache_mode = mode;
    std::atomic<uint64_t> at_first{0};
    r.on_token = [&](const GeneratedToken&) {
      if (at_first.load() == 0) at_first = engine_->stats().steps;
      return true;
    };
    const uint64_t before = engine_->stats().steps;
    CompletionResult served, bypass;
    EXPECT_TRUE(engine_->complete(r, &served).is_ok());
    r.on_token = nullptr;
    r.cache_mode = CacheMode::kBypass;
    EXPECT_TRUE(engine_->complete(r, &bypass).is_ok());
    EXPECT_EQ(testing::compare_results(served, bypass), "");
    return at_first.load() - before;
  }

  const Model& model_;
  RamTier ram_;
  Bank bank_;
  std::unique_ptr<Engine> engine_;
};

// One chunk runs in one step (the step in flight when it arrives aside);
// what comes after the first chunk still goes a row or so a step.
TEST_F(StepPlan, APromptsFirstChunkRunsInOneStepAndTheRestIsSpread) {
  Decoder decoder(*engine_, tokens(1, 16));
  EXPECT_LE(steps_to_first_token(tokens(2, kGrid), CacheMode::kBypass), 3u);
  EXPECT_LE(steps_to_first_token(tokens(3, 20), CacheMode::kBypass), 3u);
  EXPECT_GE(steps_to_first_token(tokens(4, kGrid + 40), CacheMode::kBypass), 14u);
}

// After a restored prefix the first chunk is the rows up to the next grid
// boundary: a short turn on a stored conversation answers in one step.
TEST_F(StepPlan, AShortTurnAfterARestoredPrefixRunsInOneStep) {
  const std::vector<int32_t> prefix = tokens(5, 2 * kB);
  CompletionRequest first;
  first.prompt = prefix;
  first.max_tokens = 1;
  CompletionResult stored;
  ASSERT_TRUE(engine_->complete(first, &stored).is_ok());
  Decoder decoder(*engine_, tokens(1, 16));
  std::vector<int32_t> turn = prefix;
  for (int32_t t : tokens(6, 30)) turn.push_back(t);
  EXPECT_LE(steps_to_first_token(turn, CacheMode::kDefault), 3u);
  EXPECT_EQ(engine_->stats().cached_tokens, 2 * kB);
}

}  // namespace
}  // namespace sb
