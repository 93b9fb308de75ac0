// The drafters and the draft depth control of engine/speculation.h as pure
// functions: what the n-gram drafter proposes, the oracle's corruption rate,
// the depth chosen from acceptance, the pause below break-even and the probe
// after it. (That no draft changes a result is
// engine_speculative_equivalence_test.)
#include "engine/speculation.h"

#include <gtest/gtest.h>

#include <vector>

namespace sb {
namespace {

std::vector<int32_t> ngram(const std::vector<int32_t>& prompt, const std::vector<int32_t>& generated, int k) {
  NgramDrafter d;
  std::vector<int32_t> out;
  d.draft(DraftContext{prompt, generated, {}}, k, &out);
  return out;
}

TEST(Speculation, NgramProposesWhatFollowedTheLatestMatch) {
  // "5 6" occurred twice; the latest occurrence is followed by 9 10.
  EXPECT_EQ(ngram({5, 6, 7, 8, 5, 6, 9, 10, 1}, {5, 6}, 4), (std::vector<int32_t>{9, 10, 1, 5}));
  // The longest suffix wins: "1 5 6" occurred once, followed by 7.
  EXPECT_EQ(ngram({1, 5, 6, 7, 3, 5, 6, 8}, {1, 5, 6}, 2), (std::vector<int32_t>{7, 3}));
  // A match inside the output.
  EXPECT_EQ(ngram({1, 2}, {3, 4, 5, 3, 4}, 3), (std::vector<int32_t>{5, 3, 4}));
  // A match near the end reads on into its own proposal: a loop goes on.
  EXPECT_EQ(ngram({9}, {7, 7, 7}, 4), (std::vector<int32_t>{7, 7, 7, 7}));
  EXPECT_EQ(ngram({1, 2, 1, 2}, {}, 5), (std::vector<int32_t>{1, 2, 1, 2, 1}));
  // Nothing to match: a single token (n >= 2), unseen bigrams, too short.
  EXPECT_TRUE(ngram({1, 2, 3, 4}, {3, 9}, 4).empty());
  EXPECT_TRUE(ngram({}, {7}, 4).empty());
  EXPECT_TRUE(ngram({1, 2, 1}, {2}, 0).empty());
}

TEST(Speculation, OracleCorruptsItsShareAndNothingElse) {
  std::vector<int32_t> recorded(4000);
  for (size_t i = 0; i < recorded.size(); ++i) recorded[i] = static_cast<int32_t>(i % 97);
  for (double share : {0.0, 0.2, 0.5}) {
    OracleDrafter oracle(recorded, share, 3, 100);
    std::vector<int32_t> out;
    const std::vector<int32_t> none;
    int corrupted = 0;
    for (size_t at = 0; at < recorded.size(); at += 4) {
      out.clear();
      const std::vector<int32_t> generated(at, 0);
      oracle.draft(DraftContext{none, generated, {}}, 4, &out);
      ASSERT_EQ(out.size(), 4u);
      for (size_t j = 0; j < 4; ++j) {
        ASSERT_GE(out[j], 0);
        ASSERT_LT(out[j], 100);
        corrupted += out[j] != recorded[at + j];
      }
    }
    EXPECT_NEAR(corrupted / 4000.0, share, 0.03) << share;
  }
  // Past the recording's end there is nothing to propose.
  OracleDrafter oracle({1, 2, 3}, 0, 1, 10);
  std::vector<int32_t> out;
  const std::vector<int32_t> none, generated = {1, 2};
  oracle.draft(DraftContext{none, generated, {}}, 4, &out);
  EXPECT_EQ(out, std::vector<int32_t>{3});
}

TEST(Speculation, DepthFollowsAcceptance) {
  // At the prior (0.5) a short draft pays best; high acceptance earns the
  // longest draft allowed.
  DraftControl c(8, true);
  EXPECT_EQ(c.depth(), 2);
  for (int i = 0; i < 20; ++i) c.observe(c.depth(), c.depth(), c.depth() + 1);
  EXPECT_EQ(c.depth(), 8);
  EXPECT_GT(c.acceptance(), 0.99);
  // Fixed depth: draft_max whatever the acceptance, and never paused.
  DraftControl fixed(3, false);
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(fixed.observe(3, 0, 1));
  EXPECT_EQ(fixed.depth(), 3);
  EXPECT_EQ(DraftControl(0, true).depth(), 0);
}

TEST(Speculation, BelowBreakEvenDraftingPausesThenProbes) {
  DraftControl c(4, true);
  int steps = 0;
  while (!c.observe(c.depth(), 0, 1)) ASSERT_LT(++steps, 20);
  EXPECT_LE(draft_gain(c.acceptance(), 1), 1.0);
  EXPECT_EQ(c.depth(), 0);
  // Plain steps count the pause down; then one draft token a step again.
  for (int64_t i = 0; i < DraftControl::kPauseTokens - 1; ++i) {
    c.observe(0, 0, 1);
    ASSERT_EQ(c.depth(), 0) << i;
  }
  c.observe(0, 0, 1);
  EXPECT_EQ(c.depth(), 1);
  // Acceptance above break-even keeps it drafting.
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(c.observe(1, 1, 2));
  EXPECT_GE(c.depth(), 1);
}

TEST(Speculation, ModeNames) {
  for (SpeculativeMode m :
       {SpeculativeMode::kOff, SpeculativeMode::kAuto, SpeculativeMode::kNgram, SpeculativeMode::kMtp}) {
    SpeculativeMode back = SpeculativeMode::kOff;
    EXPECT_TRUE(parse_speculative_mode(speculative_mode_name(m), &back));
    EXPECT_EQ(back, m);
  }
  SpeculativeMode m;
  EXPECT_FALSE(parse_speculative_mode("eagle", &m));
  EXPECT_FALSE(parse_speculative_mode("", &m));
}

}  // namespace
}  // namespace sb
