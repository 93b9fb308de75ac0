// Rejection acceptance (engine/speculation.h, SpeculativeAcceptance): greedy
// requests with n-gram and oracle drafts equal plain decoding bit for bit (tokens,
// logprobs, alternatives), with the verify-row cost measured, not pinned;
// seeded sampling keeps plain decoding's distribution: over a fixed set of
// seeds the token drawn against a draft is distributed as plain decoding's
// token at that position, and its acceptance rate matches exact acceptance's
// on the same workload (for a point-mass draft both accept with probability
// p(draft)). Deterministic: the same seeds give the same counts every run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>

#include "engine/engine.h"
#include "server/protocols/decoding_rules.h"
#include "tests/engine/equivalence.h"
#include "tests/util/models.h"

namespace sb {
namespace {

struct Fixture {
  Fixture() : model(testing::shared_model(Arch::kQwen3Next)) {
    EngineOptions o;
    o.block_tokens = 64;
    o.snapshot_every = 128;
    EXPECT_TRUE(Engine::create(model, nullptr, o, &engine).is_ok());
  }
  CompletionResult run(const CompletionRequest& r) const {
    CompletionResult out;
    const Status s = engine->complete(r, &out);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return out;
  }
  const Model& model;
  std::unique_ptr<Engine> engine;
};

std::vector<int32_t> random_tokens(uint64_t seed, size_t n, int64_t vocab) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> out(n);
  for (auto& t : out) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return out;
}

TEST(SpeculativeRejection, GreedyEqualsPlainDecodingBitForBit) {
  Fixture f;
  const int64_t V = f.model.vocab_size();
  int64_t drafted = 0, accepted = 0;
  for (uint64_t i = 0; i < 4; ++i) {
    // A repeated prompt. Odd requests: biased towards one of its tokens, so
    // the output is that token over and over and n-gram drafts are all
    // accepted; even ones: the oracle's drafts (the plain run's tokens, half
    // corrupted), so some are rejected.
    const std::vector<int32_t> piece = random_tokens(200 + i, 16, V);
    CompletionRequest r;
    for (int rep = 0; rep < 4; ++rep) r.prompt.insert(r.prompt.end(), piece.begin(), piece.end());
    r.max_tokens = 24;
    r.top_logprobs = 2;
    r.cache_mode = CacheMode::kBypass;
    if (i % 2 == 1) {
      DecodingRules rules;
      rules.logit_bias.emplace_back(piece[0], 60.0f);
      auto shared = std::make_shared<const DecodingRules>(std::move(rules));
      r.make_processor = [shared] { return shared->make(); };
    }
    r.speculative.mode = SpeculativeMode::kOff;
    const CompletionResult plain = f.run(r);
    r.speculative.mode = SpeculativeMode::kNgram;
    r.speculative.acceptance = SpeculativeAcceptance::kRejection;
    if (i % 2 == 0) {
      std::vector<int32_t> recorded;
      for (const GeneratedToken& g : plain.tokens) recorded.push_back(g.token);
      r.make_drafter = [recorded, V] { return std::make_unique<OracleDrafter>(recorded, 0.5, 3, V); };
    }
    const CompletionResult got = f.run(r);
    EXPECT_EQ(testing::compare_results(got, plain), "") << "request " << i;
    EXPECT_EQ(got.speculative.acceptance_mode, "rejection");
    EXPECT_GT(got.speculative.row_cost, 0.0);
    drafted += got.speculative.drafted;
    accepted += got.speculative.accepted;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(drafted, accepted);
}

// Proposes, after the first generated token t, the greedy continuation
// g(t): a function of the context alone (never of the seed), so the draft
// is a point mass q the theorem covers.
class TableDrafter final : public Drafter {
 public:
  explicit TableDrafter(std::map<int32_t, int32_t> next) : next_(std::move(next)) {}
  void draft(const DraftContext& context, int max_tokens, std::vector<int32_t>* out) override {
    if (max_tokens < 1 || context.generated.size() != 1) return;
    const auto it = next_.find(context.generated.back());
    if (it != next_.end()) out->push_back(it->second);
  }

 private:
  std::map<int32_t, int32_t> next_;
};

TEST(SpeculativeRejection, SeededSamplingKeepsPlainDecodingsDistribution) {
  Fixture f;
  const int64_t V = f.model.vocab_size();
  CompletionRequest base;
  base.prompt = random_tokens(77, 12, V);
  base.cache_mode = CacheMode::kBypass;
  base.sampling.temperature = 1.0f;
  base.sampling.top_k = 3;
  // The three first tokens sampling can draw, and the greedy token after each.
  CompletionRequest probe = base;
  probe.sampling = SamplingParams{};
  probe.max_tokens = 1;
  probe.top_logprobs = 3;
  probe.speculative.mode = SpeculativeMode::kOff;
  const CompletionResult first = f.run(probe);
  ASSERT_EQ(first.tokens.size(), 1u);
  std::map<int32_t, int32_t> table;
  for (const TokenLogprob& alt : first.tokens[0].top) {
    CompletionRequest next = probe;
    next.prompt.push_back(alt.token);
    table[alt.token] = f.run(next).tokens.at(0).token;
  }
  ASSERT_EQ(table.size(), 3u);

  // 800 seeds; each frequency's standard deviation is at most
  // sqrt(0.25 / 800) = 0.018, a difference of two at most 0.025: 0.12 is
  // nearly five of them.
  constexpr int kSeeds = 800;
  constexpr double kBound = 0.12;
  std::map<int32_t, double> plain_freq, rejection_freq;
  int64_t exact_accepted = 0, rejection_accepted = 0, drafted = 0;
  for (int seed = 0; seed < kSeeds; ++seed) {
    CompletionRequest r = base;
    r.max_tokens = 3;  // the first token, then one step verifying a draft of one
    r.sampling.seed = static_cast<uint64_t>(seed);
    r.speculative.mode = SpeculativeMode::kOff;
    const CompletionResult plain = f.run(r);
    r.speculative.mode = SpeculativeMode::kNgram;
    r.speculative.draft_max = 1;
    r.speculative.adaptive = false;
    r.make_drafter = [table] { return std::make_unique<TableDrafter>(table); };
    r.speculative.acceptance = SpeculativeAcceptance::kRejection;
    const CompletionResult rejection = f.run(r);
    ASSERT_EQ(plain.tokens.size(), 3u);
    ASSERT_EQ(rejection.tokens.size(), 3u);
    // Same first token (no draft before it), so the drafts were the same.
    ASSERT_EQ(rejection.tokens[0].token, plain.tokens[0].token);
    ASSERT_EQ(rejection.speculative.drafted, 1);
    plain_freq[plain.tokens[1].token] += 1.0 / kSeeds;
    rejection_freq[rejection.tokens[1].token] += 1.0 / kSeeds;
    // Exact acceptance is plain decoding's draw (bit for bit,
    // engine_speculative_equivalence_test): it accepts where that draw is the draft.
    exact_accepted += plain.tokens[1].token == table.at(plain.tokens[0].token);
    rejection_accepted += rejection.speculative.accepted;
    drafted += rejection.speculative.drafted;
  }
  for (const auto& [token, p] : plain_freq) {
    EXPECT_NEAR(rejection_freq[token], p, kBound) << token;
    std::printf("token %d: plain %.3f, rejection %.3f\n", token, p, rejection_freq[token]);
  }
  for (const auto& [token, p] : rejection_freq) EXPECT_NEAR(plain_freq[token], p, kBound) << token;
  const double exact_rate = static_cast<double>(exact_accepted) / drafted;
  const double rejection_rate = static_cast<double>(rejection_accepted) / drafted;
  std::printf("acceptance: exact %.3f, rejection %.3f over %lld drafts\n", exact_rate, rejection_rate,
              static_cast<long long>(drafted));
  // Not vacuous: drafts were both accepted and rejected.
  EXPECT_GT(rejection_rate, 0.1);
  EXPECT_LT(rejection_rate, 0.9);
  // Equal in expectation for a point mass; the bound is over five standard deviations.
  EXPECT_GE(rejection_rate, exact_rate - kBound);
}

}  // namespace
}  // namespace sb
