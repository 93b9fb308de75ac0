// logit_stats of one row split over threads: a 248k vocabulary is the
// largest pass of a 1-row step that is not a product, and on the step thread
// alone it left the other threads spinning.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "runtime/sampling.h"

namespace sb::cpu {

// ranges(n, fn) calls fn(begin, end) over ranges that cover [0, n) once, on
// any threads, in any order.
using BlockRanges = std::function<void(int64_t n, const std::function<void(int64_t, int64_t)>& fn)>;

// sb::logit_stats(logits), the same bits whatever ranges does: each pass
// over the vocabulary gives one value per fixed block (a block's maximum, a
// block's sum of exponentials), and the blocks' values are combined in block
// order on the calling thread.
LogitStats logit_stats(std::span<const float> logits, const BlockRanges& ranges);

}  // namespace sb::cpu
