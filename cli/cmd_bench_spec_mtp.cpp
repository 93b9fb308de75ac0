#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "cli/bench_spec_mtp.h"

namespace sb {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

Status measure_mtp_cost(const Model& model, std::span<const int32_t> prompt, int tokens, MtpCost* out) {
  if (!model.has_mtp()) return Status::invalid("the model has no MTP head");
  if (prompt.empty() || tokens < 1) return Status::invalid("measure_mtp_cost needs a prompt and a token");
  *out = MtpCost{1e300, 1e300, static_cast<int64_t>(prompt.size()), 1e300, 1e300};
  for (int rep = 0; rep < 2; ++rep) {
    State state = model.new_state();
    PrefillOutput first;
    const Clock::time_point p0 = Clock::now();
    SB_RETURN_IF_ERROR(model.prefill(state, prompt, PrefillOptions{}, &first));
    const Clock::time_point p1 = Clock::now();
    // The head's rows over the prompt alone (any hidden rows cost the same).
    State rows = model.new_mtp_state();
    const std::vector<float> pairs(prompt.size() * static_cast<size_t>(model.config().hidden_size), 0.5f);
    MtpOutput prompt_rows;
    SB_RETURN_IF_ERROR(model.mtp_forward(MtpStep{&rows, 0, 0, pairs, prompt}, &prompt_rows));
    const Clock::time_point p2 = Clock::now();
    out->prefill_ms = std::min(out->prefill_ms, ms_between(p0, p1));
    out->prefill_head_ms = std::min(out->prefill_head_ms, ms_between(p1, p2));
    std::vector<float> logits;
    int32_t token = first.stats.back().argmax;
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < tokens; ++i) SB_RETURN_IF_ERROR(model.decode(state, token, &logits));
    const Clock::time_point t1 = Clock::now();
    // A draft row over the head's keys and values of every position so far.
    State kv = model.new_mtp_state();
    std::vector<float> hidden;
    SB_RETURN_IF_ERROR(model.mtp_sync(state, 0, &kv, &hidden));
    MtpOutput o;
    for (int i = 0; i < tokens; ++i) {
      const MtpStep step{&kv, state.position(), state.position(), hidden, {&token, 1}};
      SB_RETURN_IF_ERROR(model.mtp_forward(step, &o));
    }
    const Clock::time_point t2 = Clock::now();
    out->step_ms = std::min(out->step_ms, ms_between(t0, t1) / tokens);
    out->draft_ms = std::min(out->draft_ms, ms_between(t1, t2) / tokens);
  }
  return Status::ok();
}

std::string mtp_cost_lines(const MtpCost& cost) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "- one MTP draft token: %.2f ms beside a %.2f ms decode step: %.0f%% of a step (target at most "
                "25%%: %s)\n",
                cost.draft_ms, cost.step_ms, 100 * cost.share(), cost.share() <= 0.25 ? "met" : "not met");
  std::string out = buf;
  std::snprintf(buf, sizeof buf,
                "- the head's rows in a prefill (its keys and values over the prompt, docs/model-spec.md 2.9): "
                "%.1f ms of a %.1f ms prefill of %lld tokens, +%.0f%% over the model's own layers\n",
                cost.prefill_head_ms, cost.prefill_ms, static_cast<long long>(cost.prompt_tokens),
                100 * cost.prefill_share());
  return out + buf;
}

}  // namespace sb
