// RowCostEstimate: what one more verify row adds to a decode step, as a share
// of a one-row step: the row_cost DraftControl weighs draft depths with
// (engine/speculation.h), measured while the step loop serves (the fit and
// why: docs/batching.md, "Speculative decoding").
// Contract:
//  - only decode-only steps are fitted: step time = base + per_row * rows by
//    least squares over per-row-count averages that fall fast and rise
//    slowly; value() = per_row / (base + per_row), clamped to [kMin, kMax];
//  - before kMinSteps steps over two row counts, or while the slope is not
//    positive, value() is the last good value (first DraftControl::kRowCost);
//  - a pinned value (EngineOptions::verify_row_cost > 0) is value() always;
//  - it moves only depth choices, never a token or a logit.
// Thread safety: none; the step thread owns it.
#pragma once

#include <array>
#include <cstdint>

namespace sb {

class RowCostEstimate {
 public:
  static constexpr double kDown = 0.3, kUp = 0.05;
  static constexpr int kMinSteps = 8;
  static constexpr int64_t kMaxRows = 255;  // steps of more rows are not fitted
  static constexpr double kMin = 0.01, kMax = 1.0;

  explicit RowCostEstimate(double pinned = 0.0);
  // A decode-only step of `rows` rows that took `ms`.
  void observe(int64_t rows, double ms);
  double value() const { return value_; }
  // The fitted time of a one-row step (base + per_row), what a drafter's own
  // time is weighed against (DraftControl::observe_draft); 0 before the
  // first good fit and always while pinned (a pin fixes every depth choice).
  double one_row_ms() const { return one_row_ms_; }
  int64_t steps() const { return steps_; }

 private:
  void refit();

  bool pinned_ = false;
  double value_;
  double one_row_ms_ = 0.0;
  int64_t steps_ = 0;
  std::array<double, kMaxRows + 1> ms_{};     // by row count
  std::array<int64_t, kMaxRows + 1> seen_{};  // steps of that many rows
};

}  // namespace sb
