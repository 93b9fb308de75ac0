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

}  // namespace

double StepBudget::decode_ms(int64_t rows) const {
  const int64_t n = static_cast<int64_t>(decode_ms_.size());
  for (int64_t d = 0; d < std::max(n, rows); ++d)
    for (int64_t at : {rows - d, rows + d})
      if (at >= 1 && at < n && decode_ms_[static_cast<size_t>(at)] > 0) return decode_ms_[static_cast<size_t>(at)];
  return 0;
}

int64_t StepBudget::prefill_rows(int64_t decode_rows, int64_t max_rows) const {
  if (decode_rows == 0 || itl_ratio_ <= 0) return max_rows;
  if (mixed_steps_ >= kRefreshAfter) return 0;
  const double decode = decode_ms(decode_rows);
  if (decode <= 0 || prefill_ms_ <= 0 || prefill_rows_ <= 0) return std::min(max_rows, kGrid);
  const double fit = std::floor((itl_ratio_ - 1) * decode * prefill_rows_ / prefill_ms_);
  return std::min(max_rows, std::max(kMinRows, static_cast<int64_t>(std::min(fit, 1e9))));
}

void StepBudget::observe(int64_t decode_rows, int64_t prefill_rows, double ms) {
  mixed_steps_ = decode_rows > 0 && prefill_rows > 0 ? mixed_steps_ + 1 : 0;
  if (prefill_rows == 0) {
    if (decode_rows <= 0) return;
    if (static_cast<int64_t>(decode_ms_.size()) <= decode_rows) decode_ms_.resize(static_cast<size_t>(decode_rows) + 1, 0);
    blend(decode_ms_[static_cast<size_t>(decode_rows)], ms);
    return;
  }
  const double beside = decode_rows > 0 ? decode_ms(decode_rows) : 0;
  if (decode_rows > 0 && beside <= 0) return;  // the prefill's share is unknown
  // A prefill row costs at least a little: noise must not make it free.
  blend(prefill_ms_, std::max(ms - beside, 0.1 * ms));
  blend(prefill_rows_, static_cast<double>(prefill_rows));
}

}  // namespace sb
