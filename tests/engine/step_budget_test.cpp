// StepBudget (engine/step_budget.h): the prefill rows a step may take beside
// running decodes follow the measured costs of the loop's own steps.
#include "engine/step_budget.h"

#include <gtest/gtest.h>

#include "model/model.h"

namespace sb {
namespace {

TEST(StepBudgetTest, WithoutDecodesOrWithTheRatioOffOnlyTheTokenBudgetCounts) {
  StepBudget on(2.5), off(0);
  for (StepBudget* b : {&on, &off}) {
    b->observe(4, 0, 100);
    b->observe(4, 60, 700);
  }
  EXPECT_EQ(on.prefill_rows(0, 500), 500);
  EXPECT_EQ(off.prefill_rows(4, 508), 508);
}

TEST(StepBudgetTest, UnmeasuredCostsGiveOneGridChunk) {
  StepBudget b(2.5);
  EXPECT_EQ(b.prefill_rows(3, 509), kGrid);
  EXPECT_EQ(b.prefill_rows(3, 20), 20);
  b.observe(3, 0, 90);  // the decode step is known, a prefill row is not
  EXPECT_EQ(b.prefill_rows(3, 509), kGrid);
}

TEST(StepBudgetTest, RowsFitTheRatioOfADecodeOnlyStep) {
  StepBudget b(3.0);
  b.observe(4, 0, 100);   // decode-only step: 100 ms
  b.observe(4, 50, 600);  // 500 ms for 50 prefill rows beside them: 10 ms a row
  // (3 - 1) x 100 ms of prefill at 10 ms a row.
  EXPECT_EQ(b.prefill_rows(4, 508), 20);
  EXPECT_EQ(b.prefill_rows(4, 15), 15);
  // A prefill-only step counts its whole time per row.
  StepBudget alone(3.0);
  alone.observe(4, 0, 100);
  alone.observe(0, 64, 640);
  EXPECT_EQ(alone.prefill_rows(4, 508), 20);
}

TEST(StepBudgetTest, ExpensiveRowsStillMoveByTheMinimum) {
  StepBudget b(1.5);
  b.observe(8, 0, 100);
  b.observe(8, 10, 10100);  // a row costs 1 s: 50 ms of room fits none
  EXPECT_EQ(b.prefill_rows(8, 504), StepBudget::kMinRows);
}

TEST(StepBudgetTest, EstimatesFollowGrowingRowCosts) {
  StepBudget b(2.0);
  b.observe(2, 0, 100);
  b.observe(2, 20, 100 + 20 * 5.0);
  EXPECT_EQ(b.prefill_rows(2, 510), 20);
  // Rows late in a long prompt cost twice as much: the allowance halves.
  for (int i = 0; i < 30; ++i) {
    if (b.prefill_rows(2, 510) == 0)
      b.observe(2, 0, 100);  // the decode-only step that comes now and then
    else
      b.observe(2, 10, 100 + 10 * 10.0);
  }
  b.observe(2, 0, 100);
  EXPECT_EQ(b.prefill_rows(2, 510), 10);
}

// With a floor of one row, steps of a row or two happen; the noise of such a
// step's time must not pass for the cost of a row (and shrink the next steps).
TEST(StepBudgetTest, AShortStepCountsAsMuchAsItsRows) {
  StepBudget b(2.0);
  b.observe(2, 0, 100);
  b.observe(2, 20, 200);  // 5 ms a row: 20 rows fit
  EXPECT_EQ(b.prefill_rows(2, 510), 20);
  b.observe(2, 1, 160);  // one row in a step 55 ms slower than its share
  // (0.75 x 100 + 0.25 x 60) ms over (0.75 x 20 + 0.25 x 1) rows: 5.9 ms a row.
  EXPECT_EQ(b.prefill_rows(2, 510), 16);
}

// Beside a long prompt every step has prompt rows; now and then one has none,
// so that the decode-only time the prompt's share is reckoned against
// follows the machine.
TEST(StepBudgetTest, ALongPrefillLetsADecodeOnlyStepThroughNowAndThen) {
  StepBudget b(2.0);
  b.observe(4, 0, 100);
  for (int i = 0; i < StepBudget::kRefreshAfter; ++i) {
    if (i > 0) {
      EXPECT_EQ(b.prefill_rows(4, 508), 10) << "step " << i;
    }
    b.observe(4, 10, 200);  // 10 ms a row
  }
  EXPECT_EQ(b.prefill_rows(4, 508), 0);
  EXPECT_EQ(b.prefill_rows(0, 508), 508);  // nothing to measure without decodes
  // A slower step rises the estimate slowly (it may be one the OS preempted):
  // 0.95 x 100 + 0.05 x 180 = 104 ms.
  b.observe(4, 0, 180);
  EXPECT_EQ(b.prefill_rows(4, 508), 10);
  for (int i = 0; i < 40; ++i) b.observe(4, 0, 180);  // the machine stays slower: it follows
  EXPECT_EQ(b.prefill_rows(4, 508), 17);
}

// A decode-only step the OS preempted (a busy machine, another thread's work)
// must not pass for the cost of one: the bound would grant more rows, and each
// row, reckoned against it, would look cheaper.
TEST(StepBudgetTest, APreemptedDecodeStepMovesTheEstimateLittle) {
  StepBudget b(2.0);
  b.observe(4, 0, 100);
  b.observe(4, 10, 200);  // 10 ms a row: 10 rows fit
  EXPECT_EQ(b.prefill_rows(4, 508), 10);
  b.observe(4, 0, 1100);  // preempted for a second: 0.95 x 100 + 0.05 x 1100 = 150 ms
  EXPECT_EQ(b.prefill_rows(4, 508), 15);  // an even average (0.25) would say 350 ms: 35 rows
  b.observe(4, 0, 100);  // a faster step counts at once: 0.7 x 150 + 0.3 x 100 = 135 ms
  EXPECT_EQ(b.prefill_rows(4, 508), 13);
}

TEST(StepBudgetTest, DecodeStepsAreKeptPerRowCountWithTheNearestStandingIn) {
  StepBudget b(2.0);
  b.observe(1, 0, 100);
  b.observe(8, 0, 200);
  b.observe(8, 10, 300);  // 10 ms a row
  EXPECT_EQ(b.prefill_rows(1, 510), 10);
  EXPECT_EQ(b.prefill_rows(8, 510), 20);
  EXPECT_EQ(b.prefill_rows(2, 510), 10);  // nearest measured: 1 row
  EXPECT_EQ(b.prefill_rows(7, 510), 20);  // nearest measured: 8 rows
  EXPECT_EQ(b.prefill_rows(30, 510), 20);
}

}  // namespace
}  // namespace sb
