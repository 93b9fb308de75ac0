// Many requests at once against one bank and one engine: overlapping
// prefixes, the same blocks computed by several threads (published once,
// first wins), objects shared read-only. Every result equals bypass. Run it
// under ThreadSanitizer: tools/build.sh tsan engine_concurrency_test, then
// ctest -L tsan in build/tsan.
#include <gtest/gtest.h>

#include <random>
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
constexpr int kThreads = 8;

TEST(Concurrency, EightThreadsWithOverlappingPrefixesAllEqualBypass) {
  const Model& model = testing::shared_model(Arch::kQwen3Next);
  // A budget that forces evictions while the threads run.
  RamTier ram(8 * (model.schema().block_bytes(kB) + model.schema().snapshot_bytes()));
  Bank bank({&ram});
  std::unique_ptr<Engine> engine;
  EngineOptions options;
  options.block_tokens = kB;
  options.snapshot_every = kB;
  ASSERT_TRUE(Engine::create(model, &bank, options, &engine).is_ok());

  std::mt19937 rng(5);
  const std::vector<int32_t> shared = testing::random_tokens(rng, 3 * kB);

  std::vector<int> mismatches(kThreads, 0), restored(kThreads, 0), errors(kThreads, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      std::mt19937 r(100 + static_cast<uint32_t>(i));
      // Threads come in pairs with the same conversation, so the same blocks
      // are computed and published by two threads at about the same time.
      std::mt19937 conv(1000 + static_cast<uint32_t>(i / 2));
      std::vector<int32_t> prompt = shared;
      for (int turn = 0; turn < 4; ++turn) {
        const int extra = 20 + static_cast<int>(conv() % 50);
        for (int t = 0; t < extra; ++t) prompt.push_back(static_cast<int32_t>(conv() % 151936));
        CompletionRequest req;
        req.prompt = prompt;
        req.max_tokens = 2;
        req.cache_mode = r() % 4 == 0 ? CacheMode::kReadOnly : CacheMode::kDefault;
        CompletionResult served, bypass;
        const Status s1 = engine->complete(req, &served);
        req.cache_mode = CacheMode::kBypass;
        const Status s2 = engine->complete(req, &bypass);
        if (!s1.is_ok() || !s2.is_ok()) {
          ++errors[i];
          continue;
        }
        if (!testing::compare_results(served, bypass).empty() ||
            served.restore.restore_point > served.restore.common_prefix_tokens)
          ++mismatches[i];
        if (served.restore.restore_point > 0) ++restored[i];
      }
    });
  }
  for (auto& t : threads) t.join();
  int total_restored = 0;
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_EQ(errors[i], 0) << "thread " << i;
    EXPECT_EQ(mismatches[i], 0) << "thread " << i;
    total_restored += restored[i];
  }
  EXPECT_GT(total_restored, kThreads);
  EXPECT_GT(ram.stats().evictions, 0u);
}

}  // namespace
}  // namespace sb
