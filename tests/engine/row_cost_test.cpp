// The verify-row cost measured while serving (engine/row_cost.h) as a pure
// function of the steps reported, and how DraftControl's depth and pause
// follow it (engine/speculation.h).
#include "engine/row_cost.h"

#include <gtest/gtest.h>

#include "engine/speculation.h"

namespace sb {
namespace {

TEST(RowCost, FitsBasePlusPerRow) {
  RowCostEstimate e;
  // 10 ms a step plus 2 ms a row: one more row costs 2 / 12 of a one-row step.
  for (int i = 0; i < 40; ++i) {
    const int64_t rows = 1 + i % 5;
    e.observe(rows, 10.0 + 2.0 * static_cast<double>(rows));
  }
  EXPECT_NEAR(e.value(), 2.0 / 12.0, 1e-9);
  EXPECT_NEAR(e.one_row_ms(), 12.0, 1e-9);
  // The machine gets slower per row; the recent steps win.
  for (int i = 0; i < 1000; ++i) {
    const int64_t rows = 1 + i % 5;
    e.observe(rows, 10.0 + 10.0 * static_cast<double>(rows));
  }
  EXPECT_NEAR(e.value(), 0.5, 5e-3);
}

TEST(RowCost, APreemptedStepNowAndThenBarelyMovesIt) {
  RowCostEstimate e;
  for (int i = 0; i < 400; ++i) {
    const int64_t rows = 1 + i % 5;
    // Every 7th step the OS took the core away for 50 ms.
    e.observe(rows, 10.0 + 2.0 * static_cast<double>(rows) + (i % 7 == 6 ? 50.0 : 0.0));
  }
  EXPECT_NEAR(e.value(), 2.0 / 12.0, 0.03);
}

TEST(RowCost, ThePriorUntilASlopeIsMeasurable) {
  RowCostEstimate e;
  for (int i = 0; i < RowCostEstimate::kMinSteps - 1; ++i) e.observe(1 + i % 3, 10.0 + 5.0 * (1 + i % 3));
  EXPECT_EQ(e.value(), DraftControl::kRowCost);  // too few steps
  RowCostEstimate same;
  for (int i = 0; i < 50; ++i) same.observe(3, 10.0 + i % 2);
  EXPECT_EQ(same.value(), DraftControl::kRowCost);  // one row count: no slope
  RowCostEstimate noisy;
  for (int i = 0; i < 50; ++i) noisy.observe(1 + i % 4, 20.0 - static_cast<double>(i % 4));  // faster with rows
  EXPECT_EQ(noisy.value(), DraftControl::kRowCost);
  // Bad measures are ignored.
  e.observe(0, 5.0);
  e.observe(2, -1.0);
  EXPECT_EQ(e.steps(), RowCostEstimate::kMinSteps - 1);
}

TEST(RowCost, APinnedValueNeverMoves) {
  RowCostEstimate e(0.25);
  for (int i = 0; i < 50; ++i) e.observe(1 + i % 4, 10.0 + 8.0 * (1 + i % 4));
  EXPECT_EQ(e.value(), 0.25);
  EXPECT_EQ(e.one_row_ms(), 0.0);  // a pin fixes the drafting cost too (at 0)
  EXPECT_EQ(RowCostEstimate(7.0).value(), RowCostEstimate::kMax);
  // Steps that cost nothing per row clamp to the floor.
  RowCostEstimate flat;
  for (int i = 0; i < 50; ++i) flat.observe(1 + i % 4, 10.0 + 1e-6 * (1 + i % 4));
  EXPECT_EQ(flat.value(), RowCostEstimate::kMin);
}

TEST(RowCost, DearerRowsMeanShallowerDraftsAndAnEarlierPause) {
  DraftControl cheap(8, true), dear(8, true);
  cheap.set_row_cost(0.02);
  dear.set_row_cost(0.4);
  for (int i = 0; i < 10; ++i) {
    cheap.observe(2, 1, 2);  // acceptance 0.5
    dear.observe(2, 1, 2);
  }
  EXPECT_GT(cheap.depth(), dear.depth());
  EXPECT_GE(dear.depth(), 1);  // 0.5 still beats a row at 0.4
  // Acceptance 0.3 pays at a row cost of 0.1 but not at 0.4.
  DraftControl a(4, true), b(4, true);
  a.set_row_cost(0.1);
  b.set_row_cost(0.4);
  bool paused_a = false, paused_b = false;
  for (int i = 0; i < 30; ++i) {
    if (a.depth() > 0) paused_a |= a.observe(10, 3, 4);
    if (b.depth() > 0) paused_b |= b.observe(10, 3, 4);
  }
  EXPECT_FALSE(paused_a);
  EXPECT_TRUE(paused_b);
  EXPECT_GT(draft_gain(0.3, 1, 0.1), 1.0);
  EXPECT_LT(draft_gain(0.3, 1, 0.4), 1.0);
}

TEST(RowCost, ADrafterThatCostsTimeIsChargedPerDraftToken) {
  // Rows at 0.05 of a 10 ms step; acceptance 0.3 pays with a free drafter
  // but not with one that takes 4 ms (0.4 of a step) per draft token.
  DraftControl free_drafter(4, true), dear_drafter(4, true), unmeasured(4, true);
  free_drafter.set_row_cost(0.05, 10.0);
  dear_drafter.set_row_cost(0.05, 10.0);
  unmeasured.set_row_cost(0.05, 0.0);
  bool paused_free = false, paused_dear = false, paused_unmeasured = false;
  for (int i = 0; i < 30; ++i) {
    if (free_drafter.depth() > 0) {
      free_drafter.observe_draft(0.0, 2);
      paused_free |= free_drafter.observe(10, 3, 4);
    }
    if (dear_drafter.depth() > 0) {
      dear_drafter.observe_draft(8.0, 2);
      paused_dear |= dear_drafter.observe(10, 3, 4);
    }
    if (unmeasured.depth() > 0) {
      unmeasured.observe_draft(8.0, 2);  // no one-row time yet: not charged
      paused_unmeasured |= unmeasured.observe(10, 3, 4);
    }
  }
  EXPECT_FALSE(paused_free);
  EXPECT_TRUE(paused_dear);
  EXPECT_FALSE(paused_unmeasured);
  EXPECT_NEAR(dear_drafter.draft_cost(), 0.4, 1e-9);
  EXPECT_EQ(free_drafter.draft_cost(), 0.0);
  EXPECT_EQ(unmeasured.draft_cost(), 0.0);
  // At acceptance 0.5 a cheap drafter drafts deeper than a dear one.
  DraftControl cheap(8, true), dear(8, true);
  cheap.set_row_cost(0.02, 10.0);
  dear.set_row_cost(0.02, 10.0);
  cheap.observe_draft(0.1, 1);
  dear.observe_draft(3.0, 1);
  for (int i = 0; i < 10; ++i) {
    cheap.observe(2, 1, 2);
    dear.observe(2, 1, 2);
  }
  EXPECT_GT(cheap.depth(), dear.depth());
}

}  // namespace
}  // namespace sb
