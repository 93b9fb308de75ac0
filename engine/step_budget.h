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
// Thread safety: none; the step thread owns it.
#pragma once

#include <cstdint>
#include <vector>

namespace sb {

class StepBudget {
 public:
  static constexpr int64_t kMinRows = 1;  // so that a prompt always moves
  static constexpr int kRefreshAfter = 16;
  // The ratios it takes: 0 (off), or more than 1 (a ratio of 1 or less would
  // leave no room for a prefill) and at most 1000; kRatioRule says so.
  static bool valid_ratio(double r) { return r == 0 || (r > 1 && r <= 1000); }
  static constexpr const char* kRatioRule = "0 (off) or more than 1 (and at most 1000)";

  explicit StepBudget(double itl_ratio) : itl_ratio_(itl_ratio) {}

  // Prefill rows allowed in a step with `decode_rows` decode rows, at most
  // max_rows (what the token budget leaves).
  int64_t prefill_rows(int64_t decode_rows, int64_t max_rows) const;

  // Reports a step that ran: its decode and prefill rows and its wall time.
  void observe(int64_t decode_rows, int64_t prefill_rows, double ms);

 private:
  // A decode-only step of n rows, from the nearest n measured; 0 = none yet.
  double decode_ms(int64_t rows) const;

  double itl_ratio_;
  std::vector<double> decode_ms_;  // by decode rows; 0 = not measured
  double prefill_ms_ = 0, prefill_rows_ = 0;  // per step; 0 = not measured yet
  int mixed_steps_ = 0;  // steps in a row with prefill rows beside decodes
};

}  // namespace sb
