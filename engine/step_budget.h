// StepBudget: how many prefill rows a step may take beside running decodes,
// so that their inter-token latency stays within a ratio of a decode-only
// step's. A budget in tokens alone cannot do that: on a CPU one prefill row
// costs as much as a whole decode step's weight read shared by all its rows,
// and a row late in a long prompt costs more than an early one (attention
// reads every key before it). So the loop measures its own steps.
//
// Promises:
//  1. With no decode row in the step, or itl_ratio 0, the prefill may take
//     all of max_rows (the token budget alone).
//  2. Otherwise the rows allowed are those whose estimated cost fits in
//     (itl_ratio - 1) decode-only steps, at least kMinRows and at most
//     max_rows. Until both costs have been measured, kGrid rows.
//  3. Estimates are moving averages of the steps the loop reports: a
//     decode-only step's time, and a prefill row's time: the average of the
//     steps' prefill time (a step's time less a decode-only step when
//     decodes ran beside it) over the average of their prefill rows, so a
//     step of a few rows moves it by what those rows are worth, not by the
//     noise of a whole step; they follow a prompt as it grows. A decode-only
//     step's time is kept per number of decode rows (the nearest measured
//     number stands in for the others).
//  4. After kRefreshAfter steps in a row with prefill rows beside decodes,
//     the next step with decodes takes no prefill row: beside a long prompt
//     no step is decode-only by itself, and without a fresh measure a
//     slower machine would be charged to the prompt's rows alone (fewer and
//     fewer of them would fit).
// Which rows a step takes never changes a result (a PrefillCarry makes any
// split equal to an unsplit prefill), only when each token comes.
// The arithmetic is a pure function of the measures (BudgetState,
// prefill_bound()), which the step plan takes as its input
// (engine/step_plan.h); StepBudget keeps them up to date.
// Thread safety: none; the step thread owns it.
#pragma once

#include <cstdint>
#include <vector>

namespace sb {

// What the budget has measured: all prefill_bound() reads.
struct BudgetState {
  double itl_ratio = 0;            // 0: the bound is off
  std::vector<double> decode_ms;   // decode-only step by decode rows; 0 = not measured
  double prefill_ms = 0, prefill_rows = 0;  // averages per step; 0 = not measured yet
  int mixed_steps = 0;  // steps in a row with prefill rows beside decodes

  // A decode-only step of n rows, from the nearest n measured; 0 = none yet.
  double decode_step_ms(int64_t rows) const;
};

// Which of promises 1, 2 and 4 set a step's prefill rows.
enum class BoundRule {
  kUnbounded,   // promise 1: no decode in the step, or the ratio is off
  kRefresh,     // promise 4: a decode-only step, 0 rows
  kUnmeasured,  // promise 2: costs not measured yet, kGrid rows
  kMeasured,    // promise 2: what fits the ratio
};

struct PrefillBound {
  int64_t rows = 0;  // >= 0; 0 only for kRefresh (or max_rows 0)
  BoundRule rule = BoundRule::kUnbounded;
};

// Prefill rows allowed beside `decode_rows` decode rows, at most max_rows
// (what the token budget leaves).
PrefillBound prefill_bound(const BudgetState& state, int64_t decode_rows, int64_t max_rows);

class StepBudget {
 public:
  static constexpr int64_t kMinRows = 1;  // so that a prompt always moves
  static constexpr int kRefreshAfter = 16;
  // The ratios it takes: 0 (off), or more than 1 (a ratio of 1 or less would
  // leave no room for a prefill) and at most 1000; kRatioRule says so.
  static bool valid_ratio(double r) { return r == 0 || (r > 1 && r <= 1000); }
  static constexpr const char* kRatioRule = "0 (off) or more than 1 (and at most 1000)";

  explicit StepBudget(double itl_ratio) { state_.itl_ratio = itl_ratio; }

  // Prefill rows allowed in a step with `decode_rows` decode rows, at most
  // max_rows (what the token budget leaves): prefill_bound(state(), ...).rows.
  int64_t prefill_rows(int64_t decode_rows, int64_t max_rows) const {
    return prefill_bound(state_, decode_rows, max_rows).rows;
  }

  // Reports a step that ran: its decode and prefill rows and its wall time.
  void observe(int64_t decode_rows, int64_t prefill_rows, double ms);

  const BudgetState& state() const { return state_; }

 private:
  BudgetState state_;
};

}  // namespace sb
