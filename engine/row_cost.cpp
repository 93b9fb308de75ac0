#include "engine/row_cost.h"

#include <algorithm>

#include "engine/speculation.h"

namespace sb {

RowCostEstimate::RowCostEstimate(double pinned)
    : pinned_(pinned > 0.0), value_(pinned > 0.0 ? std::clamp(pinned, kMin, kMax) : DraftControl::kRowCost) {}

void RowCostEstimate::observe(int64_t rows, double ms) {
  if (pinned_ || rows <= 0 || !(ms >= 0.0)) return;
  const double x = static_cast<double>(rows);
  w_ = kDecay * w_ + 1.0;
  x_ = kDecay * x_ + x;
  y_ = kDecay * y_ + ms;
  xx_ = kDecay * xx_ + x * x;
  xy_ = kDecay * xy_ + x * ms;
  ++steps_;
  if (steps_ >= kMinSteps) refit();
}

void RowCostEstimate::refit() {
  // Weighted variance of the row counts: below a tenth of a row squared the
  // steps were all (nearly) the same size and the slope is noise.
  const double mean_x = x_ / w_, mean_y = y_ / w_;
  const double var_x = xx_ / w_ - mean_x * mean_x;
  if (var_x < 0.1) return;
  const double per_row = (xy_ / w_ - mean_x * mean_y) / var_x;
  const double one_row = mean_y + per_row * (1.0 - mean_x);  // base + per_row
  if (!(per_row > 0.0) || !(one_row > 0.0)) return;
  value_ = std::clamp(per_row / one_row, kMin, kMax);
}

}  // namespace sb
