// How the step loop shares a step between running decodes and prompts
// (engine/step_loop.h, docs/batching.md "The plan's rules"): beside a decode, the latency bound spreads
// a prompt over steps, except its first grid chunk, which runs in one step.
// Steps are counted by the engine's own counter; every result is also
// compared with the same request run alone with the bank bypassed (one
// unsplit prefill), so a split that changed a bit would show.
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
  StepPlan() : model_(testing::shared_model(Arch::kQwen3Next)), ram_(1ULL << 30), bank_({&ram_}) {
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

  struct Served {
    CompletionResult result;
  };
  // Serves `prompt` while the decoder runs beside it.
  Served serve_beside(const std::vector<int32_t>& prompt, CacheMode mode) {
    Served out;
    EXPECT_TRUE(engine_->complete(request(prompt, mode), &out.result).is_ok());
    return out;
  }
  // The same request alone (no decoder beside it) with the bank bypassed:
  // one unsplit prefill, whatever steps the served one was split into.
  void expect_equals_alone(const Served& served, const std::vector<int32_t>& prompt) {
    CompletionResult alone;
    EXPECT_TRUE(engine_->complete(request(prompt, CacheMode::kBypass), &alone).is_ok());
    EXPECT_EQ(testing::compare_results(served.result, alone), "");
  }
  static CompletionRequest request(const std::vector<int32_t>& prompt, CacheMode mode) {
    CompletionRequest r;
    r.prompt = prompt;
    r.max_tokens = 2;
    r.cache_mode = mode;
    return r;
  }

  const Model& model_;
  RamTier ram_;
  Bank bank_;
  std::unique_ptr<Engine> engine_;
};

// One chunk runs in one step (the step in flight when it arrives aside);
// what comes after the first chunk still goes a row or so a step.
TEST_F(StepPlan, APromptsFirstChunkRunsInOneStepAndTheRestIsSpread) {
  const std::vector<std::vector<int32_t>> prompts = {tokens(2, kGrid), tokens(3, 20), tokens(4, kGrid + 40)};
  std::vector<Served> served;
  {
    Decoder decoder(*engine_, tokens(1, 16));
    for (const auto& p : prompts) served.push_back(serve_beside(p, CacheMode::kBypass));
  }
  // Counted from the prefill's first step: the admission before it runs on
  // another thread, which a loaded machine may hold back for some steps.
  EXPECT_EQ(served[0].result.restore.prefill_steps, 1);
  EXPECT_EQ(served[1].result.restore.prefill_steps, 1);
  EXPECT_GE(served[2].result.restore.prefill_steps, 14);
  for (size_t i = 0; i < prompts.size(); ++i) expect_equals_alone(served[i], prompts[i]);
}

// After a restored prefix the first chunk is the rows up to the next grid
// boundary: a short turn on a stored conversation answers in one step.
TEST_F(StepPlan, AShortTurnAfterARestoredPrefixRunsInOneStep) {
  const std::vector<int32_t> prefix = tokens(5, 2 * kB);
  CompletionResult stored;
  ASSERT_TRUE(engine_->complete(request(prefix, CacheMode::kDefault), &stored).is_ok());
  std::vector<int32_t> turn = prefix;
  for (int32_t t : tokens(6, 30)) turn.push_back(t);
  Served served;
  {
    Decoder decoder(*engine_, tokens(1, 16));
    served = serve_beside(turn, CacheMode::kDefault);
  }
  EXPECT_EQ(served.result.restore.prefill_steps, 1);
  EXPECT_EQ(served.result.restore.restore_point, 2 * kB);
  expect_equals_alone(served, turn);
}

}  // namespace
}  // namespace sb
