// Engine behaviour around the bank: modes, namespaces, snapshot placement,
// echo, stops, holes, bad input. Every served result is also compared with
// bypass.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <random>

#include "bank/bank.h"
#include "bank/chain.h"
#include "bank/key.h"
#include "bank/ram_tier.h"
#include "engine/admission.h"
#include "tests/engine/equivalence.h"
#include "tests/util/models.h"
#include "tests/util/tokens.h"

namespace sb {
namespace {

constexpr uint32_t kB = 64;

struct Fixture {
  explicit Fixture(Arch arch, int64_t snapshot_every = 2 * kB) : model(testing::shared_model(arch)), ram(1ULL << 30), bank({&ram}) {
    EngineOptions o;
    o.block_tokens = kB;
    o.snapshot_every = snapshot_every;
    const Status s = Engine::create(model, &bank, o, &engine);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
  CompletionResult serve(CompletionRequest r) {
    CompletionResult served, bypass;
    const Status s = engine->complete(r, &served);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    r.cache_mode = CacheMode::kBypass;
    EXPECT_TRUE(engine->complete(r, &bypass).is_ok());
    EXPECT_EQ(testing::compare_results(served, bypass), "");
    EXPECT_LE(served.restore.restore_point, served.restore.common_prefix_tokens);
    return served;
  }
  std::vector<Key> keys(const std::vector<int32_t>& prompt, const std::string& ns = "") {
    return chain_keys(root_key(kBankFormatVersion, model.fingerprint(), ns, kB), prompt, kB,
                      static_cast<int64_t>(prompt.size()) / kB);
  }
  const Model& model;
  RamTier ram;
  Bank bank;
  std::unique_ptr<Engine> engine;
};

// Over the tiny models' whole vocabulary (151936 ids, special tokens
// included): the negative tests below move one recurrent value by one ulp,
// and whether that reaches the first token's logits depends on the prompt;
// these prompts are known to show it.
constexpr int64_t kTinyVocab = 151936;
std::vector<int32_t> random_prompt(size_t n, uint32_t seed) {
  return testing::random_tokens(seed, static_cast<int64_t>(n), kTinyVocab);
}

CompletionRequest request(std::vector<int32_t> prompt, CacheMode mode = CacheMode::kDefault, std::string ns = "") {
  CompletionRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = 3;
  r.cache_mode = mode;
  r.name_space = std::move(ns);
  return r;
}

TEST(Engine, ADifferentNamespaceNeverHitsTheSameOneDoes) {
  Fixture f(Arch::kQwen3Next);
  const auto prompt = random_prompt(3 * kB + 10, 1);
  EXPECT_STREQ(f.serve(request(prompt, CacheMode::kDefault, "alice")).restore.mode.name(), "cold");
  const auto other = f.serve(request(prompt, CacheMode::kDefault, "bob"));
  EXPECT_STREQ(other.restore.mode.name(), "cold");
  EXPECT_EQ(other.restore.matched_tokens, 0);
  EXPECT_EQ(f.serve(request(prompt, CacheMode::kReadOnly, "")).restore.restore_point, 0);
  const auto same = f.serve(request(prompt, CacheMode::kDefault, "alice"));
  EXPECT_STREQ(same.restore.mode.name(), "ram");
  EXPECT_EQ(same.restore.restore_point, 3 * kB);
  EXPECT_EQ(same.restore.prefill_tokens, 10);
  EXPECT_EQ(same.restore.snapshot_position, 3 * kB);
  EXPECT_EQ(same.restore.blocks, 3);
  EXPECT_GT(same.restore.bytes_read, 0u);
}

TEST(Engine, ReadOnlyLooksUpButStoresNothingAndBypassDoesNeither) {
  Fixture f(Arch::kQwen3Next);
  const auto prompt = random_prompt(2 * kB + 1, 2);
  EXPECT_EQ(f.serve(request(prompt, CacheMode::kReadOnly)).restore.stored_tokens, 0);
  EXPECT_EQ(f.ram.stats().blocks, 0u);
  const uint64_t lookups = f.bank.stats().lookups;
  CompletionResult r;
  ASSERT_TRUE(f.engine->complete(request(prompt, CacheMode::kBypass), &r).is_ok());
  EXPECT_STREQ(r.restore.mode.name(), "bypass");
  EXPECT_EQ(r.restore.stored_tokens, 0);
  EXPECT_EQ(f.bank.stats().lookups, lookups);
  EXPECT_EQ(f.ram.stats().blocks, 0u);
  // stored_tokens: the new full blocks a request handed to the bank (Messages' cache_creation_input_tokens).
  EXPECT_EQ(f.serve(request(prompt, CacheMode::kDefault)).restore.stored_tokens, 2 * kB);
  EXPECT_EQ(f.ram.stats().blocks, 2u);
  const CompletionResult again = f.serve(request(prompt, CacheMode::kReadOnly));
  EXPECT_EQ(again.restore.restore_point, 2 * kB);
  EXPECT_EQ(again.restore.stored_tokens, 0);
  EXPECT_EQ(f.serve(request(prompt, CacheMode::kDefault)).restore.stored_tokens, 0);  // nothing new
}

TEST(Engine, SnapshotPlacement) {
  using R = SnapshotReason;
  // Interval every 128, prompt end at 256, the message boundary 150 floors to 128.
  EXPECT_EQ(snapshot_positions(300, 150, 64, 128, 0),
            (std::vector<SnapshotPlace>{{128, R::kMessage}, {256, R::kPromptEnd}}));
  // A prompt of exactly 4 blocks: its end and the last boundary a replay can restore.
  EXPECT_EQ(snapshot_positions(256, -1, 64, 0, 0), (std::vector<SnapshotPlace>{{192, R::kPromptEnd}, {256, R::kPromptEnd}}));
  EXPECT_EQ(snapshot_positions(600, 70, 64, 256, 0),
            (std::vector<SnapshotPlace>{{64, R::kMessage}, {256, R::kInterval}, {512, R::kInterval}, {576, R::kPromptEnd}}));
  EXPECT_TRUE(snapshot_positions(63, 10, 64, 128, 0).empty());
  // A branch point at 384 between the intervals; one at 256 takes the interval's place.
  EXPECT_EQ(snapshot_positions(600, -1, 64, 256, 384),
            (std::vector<SnapshotPlace>{{256, R::kInterval}, {384, R::kBranch}, {512, R::kInterval}, {576, R::kPromptEnd}}));
  EXPECT_EQ(snapshot_positions(600, 300, 64, 256, 256),
            (std::vector<SnapshotPlace>{{256, R::kMessage}, {512, R::kInterval}, {576, R::kPromptEnd}}));
}

// Three conversations share a prefix of 3 blocks and a bit; no interval or
// message snapshot falls on its end. The first stores the blocks, the second
// finds them without a snapshot (served cold) and stores one at the branch
// point, and the third restores there. Every answer equals bypass (serve()).
TEST(Engine, ASecondConversationOnASharedPrefixLeavesASnapshotAtTheBranchPoint) {
  Fixture f(Arch::kQwen35, /*snapshot_every=*/0);
  const auto shared = random_prompt(3 * kB + 20, 11);
  auto conversation = [&](uint32_t seed) {
    auto p = shared;
    const auto own = random_prompt(2 * kB + 7, seed);
    p.insert(p.end(), own.begin(), own.end());
    return p;
  };
  const auto first = f.serve(request(conversation(12)));
  EXPECT_STREQ(first.restore.mode.name(), "cold");
  const auto second = f.serve(request(conversation(13)));
  EXPECT_EQ(second.restore.restore_point, 0);
  EXPECT_EQ(second.restore.matched_tokens, 3 * kB);
  const auto keys = f.keys(shared);
  EXPECT_TRUE(f.ram.contains(ObjectKind::kSnapshot, keys[3]));
  const auto third = f.serve(request(conversation(14)));
  EXPECT_STREQ(third.restore.mode.name(), "ram");
  EXPECT_EQ(third.restore.restore_point, 3 * kB);
  EXPECT_EQ(third.restore.snapshot_position, 3 * kB);

  // Negative: the same restore from the branch snapshot with one recurrent
  // value moved by one ulp of bf16 (2^-8 relative; the default bf16
  // precision can absorb a one-ulp fp32 change in its rounding) must differ
  // from bypass, so the equality above is evidence.
  EngineTestHooks hooks;
  hooks.tamper_restored_state = [](State& st) {
    for (size_t c = 0; c < st.n_components(); ++c)
      if (st.schema().components[c].kind == ComponentKind::kRecurrent && !st.f32(c).empty()) {
        st.f32(c)[0] = std::bit_cast<float>(std::bit_cast<uint32_t>(st.f32(c)[0]) + 0x10000u);
        return;
      }
  };
  f.engine->set_test_hooks(hooks);
  auto broken = request(conversation(15));
  broken.max_tokens = 1;
  broken.top_logprobs = 5;
  CompletionResult tampered, bypass;
  ASSERT_TRUE(f.engine->complete(broken, &tampered).is_ok());
  EXPECT_EQ(tampered.restore.snapshot_position, 3 * kB);
  broken.cache_mode = CacheMode::kBypass;
  ASSERT_TRUE(f.engine->complete(broken, &bypass).is_ok());
  EXPECT_NE(testing::compare_results(tampered, bypass), "");
}

TEST(Engine, PublishesBlocksAndSnapshotsWherePlacedAndReplaysRestoreAtTheLastBoundary) {
  Fixture f(Arch::kQwen3Next, /*snapshot_every=*/0);
  auto prompt = random_prompt(4 * kB, 3);
  auto r = request(prompt);
  r.message_boundary = kB + 5;
  f.serve(r);
  const auto k = f.keys(prompt);
  for (int b = 1; b <= 4; ++b) EXPECT_TRUE(f.ram.contains(ObjectKind::kBlock, k[b])) << b;
  EXPECT_TRUE(f.ram.contains(ObjectKind::kSnapshot, k[1]));   // message boundary
  EXPECT_FALSE(f.ram.contains(ObjectKind::kSnapshot, k[2]));  // no interval snapshots
  EXPECT_TRUE(f.ram.contains(ObjectKind::kSnapshot, k[3]));   // last boundary a replay can use
  EXPECT_TRUE(f.ram.contains(ObjectKind::kSnapshot, k[4]));   // prompt end
  // The same prompt again keeps one token to prefill: restores 3 blocks.
  const auto replay = f.serve(request(prompt));
  EXPECT_EQ(replay.restore.restore_point, 3 * kB);
  EXPECT_EQ(replay.restore.prefill_tokens, kB);
  // One token more restores all 4.
  prompt.push_back(17);
  EXPECT_EQ(f.serve(request(prompt)).restore.restore_point, 4 * kB);
}

TEST(Engine, AnEvictedMiddleBlockEndsTheWalkThere) {
  Fixture f(Arch::kQwen3Next, /*snapshot_every=*/kB);
  const auto prompt = random_prompt(5 * kB + 3, 4);
  f.serve(request(prompt));
  ASSERT_TRUE(f.ram.erase(ObjectKind::kBlock, f.keys(prompt)[3]));
  const auto r = f.serve(request(prompt));
  EXPECT_EQ(r.restore.matched_tokens, 2 * kB);
  EXPECT_EQ(r.restore.restore_point, 2 * kB);
  // The request re-publishes the missing block; the next one restores all.
  EXPECT_EQ(f.serve(request(prompt)).restore.restore_point, 5 * kB);
}

TEST(Engine, AttentionOnlyModelRestoresWithoutSnapshots) {
  Fixture f(Arch::kQwen3);
  const auto prompt = random_prompt(3 * kB + 1, 5);
  f.serve(request(prompt));
  EXPECT_EQ(f.ram.stats().snapshots, 0u);
  const auto r = f.serve(request(prompt));
  EXPECT_EQ(r.restore.restore_point, 3 * kB);
  EXPECT_EQ(r.restore.snapshot_position, 0);
}

TEST(Engine, EchoPrefillsColdButStillPublishes) {
  Fixture f(Arch::kQwen3Next);
  const auto prompt = random_prompt(kB + 9, 6);
  f.serve(request(prompt));
  auto echo = request(prompt);
  echo.echo = true;
  const auto e = f.serve(echo);
  EXPECT_STREQ(e.restore.mode.name(), "cold");
  EXPECT_EQ(e.restore.restore_point, 0);
  ASSERT_EQ(e.prompt_logprobs.size(), prompt.size());
  EXPECT_EQ(e.prompt_logprobs[0], 0.0f);
  for (size_t i = 1; i < prompt.size(); ++i) EXPECT_LT(e.prompt_logprobs[i], 0.0f);
  // An echo request in a fresh namespace publishes for the next one.
  echo.name_space = "fresh";
  f.serve(echo);
  EXPECT_EQ(f.serve(request(prompt, CacheMode::kDefault, "fresh")).restore.restore_point, kB);
}

TEST(Engine, StopTokensCancellationAndTopLogprobs) {
  Fixture f(Arch::kQwen3Next);
  auto r = request(random_prompt(70, 7));
  r.max_tokens = 4;
  r.top_logprobs = 3;
  const auto full = f.serve(r);
  ASSERT_EQ(full.tokens.size(), 4u);
  EXPECT_EQ(full.finish_reason, FinishReason::kLength);
  ASSERT_EQ(full.tokens[0].top.size(), 3u);
  EXPECT_EQ(full.tokens[0].top[0].token, full.tokens[0].token);  // greedy: the best alternative is the token
  EXPECT_GE(full.tokens[0].top[0].logprob, full.tokens[0].top[1].logprob);

  r.stop_tokens = {full.tokens[1].token};
  const auto stopped = f.serve(r);
  EXPECT_EQ(stopped.finish_reason, FinishReason::kStop);
  EXPECT_EQ(stopped.tokens.size(), 2u);

  int seen = 0;
  r.stop_tokens.clear();
  r.on_token = [&seen](const GeneratedToken&) { return ++seen < 2; };
  CompletionResult cancelled;
  ASSERT_TRUE(f.engine->complete(r, &cancelled).is_ok());
  EXPECT_EQ(cancelled.finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(cancelled.tokens.size(), 2u);
}

TEST(Engine, RejectsBadRequestsAndBadOptions) {
  Fixture f(Arch::kQwen3Next);
  CompletionResult r;
  EXPECT_EQ(f.engine->complete(request({}), &r).code(), Code::kInvalidArgument);
  EXPECT_EQ(f.engine->complete(request({1, 2, 151936}), &r).code(), Code::kInvalidArgument);
  EXPECT_EQ(f.engine->complete(request({1, -2}), &r).code(), Code::kInvalidArgument);
  auto bad = request({1, 2});
  bad.top_logprobs = 21;
  EXPECT_EQ(f.engine->complete(bad, &r).code(), Code::kInvalidArgument);
  // Checked before admission: refused at submit, never queued, never ended.
  std::atomic<int> ended{0};
  const auto count_end = [&](Status, CompletionResult) { ++ended; };
  EXPECT_EQ(f.engine->check(request({1, 2, 151936})).code(), Code::kInvalidArgument);
  EXPECT_EQ(f.engine->submit(request({1, 2, 151936}), count_end), Admit::kInvalid);
  EXPECT_EQ(f.engine->submit(bad, count_end), Admit::kInvalid);
  EXPECT_EQ(f.engine->admission().held(), 0u);
  EXPECT_EQ(ended.load(), 0);
  EXPECT_TRUE(f.engine->check(request({1, 2})).is_ok());
  EXPECT_EQ(f.ram.stats().blocks, 0u);

  std::unique_ptr<Engine> e;
  EngineOptions o;
  o.block_tokens = 100;
  EXPECT_EQ(Engine::create(f.model, &f.bank, o, &e).code(), Code::kInvalidArgument);
  o.block_tokens = 128;
  o.snapshot_every = 192;
  EXPECT_EQ(Engine::create(f.model, &f.bank, o, &e).code(), Code::kInvalidArgument);
  o.snapshot_every = 256;
  for (double ratio : {1.0, 0.5, -1.0, 1001.0}) {
    o.itl_ratio = ratio;  // no room for a prefill beside decodes, or out of range
    EXPECT_EQ(Engine::create(f.model, &f.bank, o, &e).code(), Code::kInvalidArgument) << ratio;
  }
  o.itl_ratio = 0;  // off
  EXPECT_TRUE(Engine::create(f.model, &f.bank, o, &e).is_ok());
  o.itl_ratio = 2;
  EXPECT_TRUE(Engine::create(f.model, &f.bank, o, &e).is_ok());
  EXPECT_TRUE(Engine::create(f.model, nullptr, o, &e).is_ok());
  ASSERT_TRUE(e->complete(request({1, 2, 3}), &r).is_ok());
  EXPECT_STREQ(r.restore.mode.name(), "bypass");
}

}  // namespace
}  // namespace sb
