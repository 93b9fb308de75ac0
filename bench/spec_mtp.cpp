#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench/spec_mtp.h"

namespace sb {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

Status measure_mtp_cost(const Model& model, const Model& headless, std::span<const int32_t> prompt, int tokens,
                        MtpCost* out) {
  if (!model.has_mtp()) return Status::invalid("the model has no MTP head");
  if (prompt.empty() || tokens < 1) return Status::invalid("measure_mtp_cost needs a prompt and a token");
  constexpr double kNone = 1e300;
  *out = MtpCost{kNone, kNone, static_cast<int64_t>(prompt.size()), kNone, kNone, kNone};
  // A prefill and `tokens` decode steps; the state is left after them.
  auto run = [&](const Model& m, State* state, double* prefill_ms, double* step_ms) -> Status {
    PrefillOutput first;
    const Clock::time_point p0 = Clock::now();
    SB_RETURN_IF_ERROR(m.prefill(*state, prompt, PrefillOptions{}, &first));
    const Clock::time_point p1 = Clock::now();
    std::vector<float> logits;
    const int32_t token = first.stats.back().argmax;
    for (int i = 0; i < tokens; ++i) SB_RETURN_IF_ERROR(m.decode(*state, token, &logits));
    *prefill_ms = std::min(*prefill_ms, ms_between(p0, p1));
    *step_ms = std::min(*step_ms, ms_between(p1, Clock::now()) / tokens);
    return Status::ok();
  };
  for (int rep = 0; rep < 2; ++rep) {
    State plain = headless.new_state(), state = model.new_state();
    SB_RETURN_IF_ERROR(run(headless, &plain, &out->headless_prefill_ms, &out->headless_step_ms));
    SB_RETURN_IF_ERROR(run(model, &state, &out->prefill_ms, &out->step_ms));
    // A draft row over the head's keys and values of every position so far.
    State kv = model.new_mtp_state();
    std::vector<float> hidden;
    SB_RETURN_IF_ERROR(model.mtp_sync(state, 0, &kv, &hidden));
    MtpOutput o;
    const int32_t token = prompt[0];
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < tokens; ++i) {
      const MtpStep step{&kv, state.position(), state.position(), hidden, {&token, 1}};
      SB_RETURN_IF_ERROR(model.mtp_forward(step, &o));
    }
    out->draft_ms = std::min(out->draft_ms, ms_between(t0, Clock::now()) / tokens);
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
  const auto more = [](double with, double without) { return without > 0 ? 100 * (with / without - 1) : 0.0; };
  std::snprintf(buf, sizeof buf,
                "- the head's rows (its keys and values over every position, docs/model-spec.md 2.9): a prefill of "
                "%lld tokens %.1f ms beside %.1f ms without the head (%+.1f%%), a decode step %.2f ms beside %.2f ms "
                "(%+.1f%%)\n",
                static_cast<long long>(cost.prompt_tokens), cost.prefill_ms, cost.headless_prefill_ms,
                more(cost.prefill_ms, cost.headless_prefill_ms), cost.step_ms, cost.headless_step_ms,
                more(cost.step_ms, cost.headless_step_ms));
  return out + buf;
}

}  // namespace sb
