// StepBudget: how many prefill rows a step may take beside running decodes,
// so that their inter-token latency stays within `itl_ratio` decode-only
// steps, measured on the loop's own steps (docs/batching.md, `--itl-ratio`).
// Contract (BoundRule names each case):
//  - no decode row in the step, or itl_ratio 0: all of max_rows (kUnbounded);
//  - else the rows whose estimated cost fits (itl_ratio - 1) decode-only
//    steps, within [kMinRows, max_rows] (kMeasured); kGrid rows until both
//    costs are measured (kUnmeasured);
//  - after kRefreshAfter mixed steps in a row, one step with decodes takes
//    no prefill row, to measure a decode-only step again (kRefresh);
//  - a decode-only step's estimate falls fast and rises slowly, so a step
//    the OS preempted barely widens the bound.
// Which rows a step takes never changes a result, only when tokens come.
// The arithmetic is pure (BudgetState, prefill_bound()); StepBudget keeps
// the measures current. Thread safety: none; the step thread owns it.
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

// Which rule set a step's prefill rows.
enum class BoundRule {
  kUnbounded,   // no decode in the step, or the ratio is off
  kRefresh,     // a decode-only step, 0 rows
  kUnmeasured,  // costs not measured yet, kGrid rows
  kMeasured,    // what fits the ratio
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
