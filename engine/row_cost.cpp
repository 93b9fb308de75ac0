#include "engine/row_cost.h"

#include <algorithm>

#include "engine/speculation.h"

namespace sb {

RowCostEstimate::RowCostEstimate(double pinned)
    : pinned_(pinned > 0.0), value_(pinned > 0.0 ? std::clamp(pinned, kMin, kMax) : DraftControl::kRowCost) {}

void RowCostEstimate::observe(int64_t rows, double ms) {
  if (pinned_ || rows <= 0 || rows > kMaxRows || !(ms >= 0.0)) return;
  const size_t r = static_cast<size_t>(rows);
  double& m = ms_[r];
  m = seen_[r]++ == 0 ? ms : m + (ms < m ? kDown : kUp) * (ms - m);
  if (++steps_ >= kMinSteps) refit();
}

void RowCostEstimate::refit() {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t r = 1; r <= static_cast<size_t>(kMaxRows); ++r) {
    if (seen_[r] < 2) continue;
    const double x = static_cast<double>(r), y = ms_[r];
    n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  if (n < 2) return;
  const double per_row = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  const double one_row = (sy - per_row * sx) / n + per_row;  // base + per_row
  if (!(per_row > 0.0) || !(one_row > 0.0)) return;
  value_ = std::clamp(per_row / one_row, kMin, kMax);
  one_row_ms_ = one_row;
}

}  // namespace sb
