#include "engine/step_budget.h"

#include <algorithm>
#include <cmath>

#include "model/model.h"

namespace sb {
namespace {

// Weight of the newest step in the moving averages: a few steps follow a
// change, one slow step (a page fault, a busy machine) does not decide.
constexpr double kNewest = 0.25;

void blend(double& average, double sample) {
  average = average == 0 ? sample : (1 - kNewest) * average + kNewest * sample;
}

// A decode-only step's wall time is its cost plus whatever the OS gave other
// threads meanwhile (a busy machine, a request thread parsing a large body):
// the average falls fast and rises slowly, so it follows the uncontended cost
// and a preempted step moves it little. Were it inflated, the bound would
// grant more rows and the rows' own cost (a step's time less this) would
// look smaller: both errors in the direction that slows the decodes.
constexpr double kFalling = 0.3, kRising = 0.05;

void blend_lower(double& average, double sample) {
  if (average == 0) {
    average = sample;
    return;
  }
  const double w = sample < average ? kFalling : kRising;
  average = (1 - w) * average + w * sample;
}

}  // namespace

double BudgetState::decode_step_ms(int64_t rows) const {
  const int64_t n = static_cast<int64_t>(decode_ms.size());
  for (int64_t d = 0; d < std::max(n, rows); ++d)
    for (int64_t at : {rows - d, rows + d})
      if (at >= 1 && at < n && decode_ms[static_cast<size_t>(at)] > 0) return decode_ms[static_cast<size_t>(at)];
  return 0;
}

PrefillBound prefill_bound(const BudgetState& s, int64_t decode_rows, int64_t max_rows) {
  max_rows = std::max<int64_t>(max_rows, 0);
  if (decode_rows == 0 || s.itl_ratio <= 0) return {max_rows, BoundRule::kUnbounded};
  if (s.mixed_steps >= StepBudget::kRefreshAfter) return {0, BoundRule::kRefresh};
  const double decode = s.decode_step_ms(decode_rows);
  if (decode <= 0 || s.prefill_ms <= 0 || s.prefill_rows <= 0)
    return {std::min(max_rows, kGrid), BoundRule::kUnmeasured};
  const double fit = std::floor((s.itl_ratio - 1) * decode * s.prefill_rows / s.prefill_ms);
  return {std::min(max_rows, std::max(StepBudget::kMinRows, static_cast<int64_t>(std::min(fit, 1e9)))),
          BoundRule::kMeasured};
}

void StepBudget::observe(int64_t decode_rows, int64_t prefill_rows, double ms) {
  BudgetState& s = state_;
  s.mixed_steps = decode_rows > 0 && prefill_rows > 0 ? s.mixed_steps + 1 : 0;
  if (prefill_rows == 0) {
    if (decode_rows <= 0) return;
    if (static_cast<int64_t>(s.decode_ms.size()) <= decode_rows)
      s.decode_ms.resize(static_cast<size_t>(decode_rows) + 1, 0);
    blend_lower(s.decode_ms[static_cast<size_t>(decode_rows)], ms);
    return;
  }
  const double beside = decode_rows > 0 ? s.decode_step_ms(decode_rows) : 0;
  if (decode_rows > 0 && beside <= 0) return;  // the prefill's share is unknown
  // A prefill row costs at least a little: noise must not make it free.
  blend(s.prefill_ms, std::max(ms - beside, 0.1 * ms));
  blend(s.prefill_rows, static_cast<double>(prefill_rows));
}

}  // namespace sb
