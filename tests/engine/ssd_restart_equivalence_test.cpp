// The bank's promise across restarts: the bank (a RAM tier over the SSD
// tier) is closed and reopened before every request of a seeded workload, so
// every restore comes from disk, and every response equals the same request
// with the bank bypassed, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include "bank/bank_factory.h"
#include "bank/key.h"
#include "engine/engine.h"
#include "tests/bank/ssd_test_util.h"
#include "tests/engine/equivalence.h"
#include "tests/engine/workload.h"
#include "tests/util/models.h"

namespace sb {
namespace {

constexpr uint32_t kBlock = 64;

// Everything a server process holds (testing::EngineStack): RAM over SSD.
struct Server : testing::EngineStack {
  Server(const Model& model, const std::string& dir) : EngineStack(model, options(dir), kBlock, 2 * kBlock) {}
  static BankOptions options(const std::string& dir) {
    BankOptions o;
    o.ram_bytes = 64ull << 20;
    o.ssd_mode = SsdMode::kOn;
    o.ssd_dir = dir;
    return o;
  }
};

// rot_every > 0: after every rot_every-th request, while the server is
// down, one byte in the middle of one object file (chosen by a seeded
// generator) is flipped.
void expect_equivalent_across_restarts(Arch arch, int requests, uint64_t seed, int rot_every = 0) {
  const Model& model = testing::shared_model(arch);
  testing::TempDir dir(/*in_memory=*/true);
  testing::WorkloadOptions w;
  w.seed = seed;
  w.n_requests = requests;
  w.block_tokens = kBlock;
  w.vocab_size = model.vocab_size();
  w.evict_probability = 0;  // a restart drops the whole RAM tier instead
  const auto steps = testing::make_workload(w);
  int served_requests = 0, from_ssd = 0, mismatches = 0;
  uint64_t check_failures = 0;
  int rotted = 0;
  std::mt19937_64 rng(seed);
  std::vector<std::string> failures;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind != testing::WorkloadStep::Kind::kRequest) continue;
    auto server = std::make_unique<Server>(model, dir.bank());
    ASSERT_NE(server->engine, nullptr);
    CompletionResult served, bypass;
    CompletionRequest cold = steps[i].request;
    cold.cache_mode = CacheMode::kBypass;
    ASSERT_TRUE(server->engine->complete(steps[i].request, &served).is_ok()) << steps[i].what;
    ASSERT_TRUE(server->engine->complete(cold, &bypass).is_ok()) << steps[i].what;
    ++served_requests;
    if (served.restore.restore_point > 0) {
      ++from_ssd;
      EXPECT_STREQ(served.restore.mode.name(), "ssd") << "step " << i << ": a fresh process restored from " << served.restore.mode.name();
    }
    EXPECT_LE(served.restore.restore_point, served.restore.common_prefix_tokens);
    const std::string why = testing::compare_results(served, bypass);
    if (!why.empty()) {
      ++mismatches;
      if (failures.size() < 8) failures.push_back("step " + std::to_string(i) + " [" + steps[i].what + "]: " + why);
    }
    check_failures += server->tiers->ssd()->stats().check_failures;
    if (rot_every == 0) {
      EXPECT_EQ(server->tiers->ssd()->stats().check_failures, 0u);
    }
    server.reset();
    if (rot_every > 0 && served_requests % rot_every == 0) {
      std::vector<std::string> files;
      for (const auto& e : std::filesystem::recursive_directory_iterator(dir.bank() + "/v2/objects"))
        if (e.is_regular_file()) files.push_back(e.path().string());
      std::sort(files.begin(), files.end());
      if (!files.empty()) {
        const std::string victim = files[rng() % files.size()];
        std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
        const auto size = static_cast<std::streamoff>(std::filesystem::file_size(victim));
        f.seekg(size / 2);
        char c = 0;
        f.get(c);
        f.seekp(size / 2);
        f.put(static_cast<char>(c ^ 0x20));
        ++rotted;
      }
    }
  }
  std::printf("%s across restarts: %d requests, %d restored from SSD, %d files rotted, %llu check failures, %d mismatches\n",
              arch_name(arch), served_requests, from_ssd, rotted, (unsigned long long)check_failures, mismatches);
  for (const auto& f : failures) std::printf("  %s\n", f.c_str());
  EXPECT_EQ(mismatches, 0);
  // It proved something only if restores from disk happened.
  EXPECT_GE(from_ssd, served_requests / 4);
  if (rot_every > 0) {
    EXPECT_GT(check_failures, 0u) << "the rot was never read: the test proved nothing";
  }
}

TEST(SsdRestartEquivalence, Qwen3NextEveryResponseEqualsBypass) {
  expect_equivalent_across_restarts(Arch::kQwen3Next, 40, 21);
}
TEST(SsdRestartEquivalence, Qwen3EveryResponseEqualsBypass) { expect_equivalent_across_restarts(Arch::kQwen3, 30, 22); }
TEST(SsdRestartEquivalence, Qwen4ExpEveryResponseEqualsBypass) {
  expect_equivalent_across_restarts(Arch::kQwen4Exp, 30, 24);
}
TEST(SsdRestartEquivalence, Qwen3NextWithFilesRottingBetweenRestarts) {
  expect_equivalent_across_restarts(Arch::kQwen3Next, 40, 23, /*rot_every=*/2);
}

}  // namespace
}  // namespace sb
