#include "engine/speculation.h"

#include <algorithm>
#include <cmath>

#include "runtime/sampling.h"

namespace sb {

Status check_speculative(SpeculativeMode mode, int draft_max, std::optional<bool> has_mtp) {
  if (mode == SpeculativeMode::kMtp && has_mtp == false)
    return Status::invalid(
        "speculative mode mtp needs a checkpoint with an MTP head; this one has none (use ngram or auto)");
  if (draft_max < 1 || draft_max > kMaxDraftTokens)
    return Status::invalid("speculative draft_max must be in 1.." + std::to_string(kMaxDraftTokens) + ", not " +
                           std::to_string(draft_max));
  return Status::ok();
}

const char* speculative_mode_name(SpeculativeMode mode) {
  switch (mode) {
    case SpeculativeMode::kOff:
      return "off";
    case SpeculativeMode::kAuto:
      return "auto";
    case SpeculativeMode::kNgram:
      return "ngram";
    case SpeculativeMode::kMtp:
      return "mtp";
  }
  return "?";
}

bool parse_speculative_mode(std::string_view name, SpeculativeMode* out) {
  for (SpeculativeMode m :
       {SpeculativeMode::kOff, SpeculativeMode::kAuto, SpeculativeMode::kNgram, SpeculativeMode::kMtp})
    if (name == speculative_mode_name(m)) {
      *out = m;
      return true;
    }
  return false;
}

const char* speculative_acceptance_name(SpeculativeAcceptance acceptance) {
  return acceptance == SpeculativeAcceptance::kRejection ? "rejection" : "exact";
}

bool parse_speculative_acceptance(std::string_view name, SpeculativeAcceptance* out) {
  for (SpeculativeAcceptance a : {SpeculativeAcceptance::kExact, SpeculativeAcceptance::kRejection})
    if (name == speculative_acceptance_name(a)) {
      *out = a;
      return true;
    }
  return false;
}

void NgramDrafter::draft(const DraftContext& context, int max_tokens, std::vector<int32_t>* out) {
  const int64_t np = static_cast<int64_t>(context.prompt.size());
  const int64_t len = np + static_cast<int64_t>(context.generated.size());
  auto at = [&](int64_t i) { return i < np ? context.prompt[i] : context.generated[i - np]; };
  for (int64_t n = kMaxN; n >= kMinN; --n) {
    if (len <= n) continue;
    // The latest start j < len - n whose n tokens equal the last n.
    for (int64_t j = len - n - 1; j >= 0; --j) {
      int64_t m = 0;
      while (m < n && at(j + m) == at(len - n + m)) ++m;
      if (m < n) continue;
      // What followed the match, read on into the proposal itself where the
      // match ends near the context's end (a loop goes on looping).
      const size_t first = out->size();
      for (int64_t i = j + n; static_cast<int64_t>(out->size() - first) < max_tokens; ++i)
        out->push_back(i < len ? at(i) : (*out)[first + static_cast<size_t>(i - len)]);
      return;
    }
  }
}

void OracleDrafter::draft(const DraftContext& context, int max_tokens, std::vector<int32_t>* out) {
  const int64_t from = static_cast<int64_t>(context.generated.size());
  for (int64_t i = from; i < from + max_tokens && i < static_cast<int64_t>(recorded_.size()); ++i) {
    int32_t token = recorded_[static_cast<size_t>(i)];
    const uint64_t h = splitmix64(seed_ ^ splitmix64(static_cast<uint64_t>(i)));
    if (static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0) < corrupt_ && vocab_ > 1)
      token = static_cast<int32_t>((token + 1 + static_cast<int64_t>(splitmix64(h) % static_cast<uint64_t>(vocab_ - 1))) %
                                   vocab_);
    out->push_back(token);
  }
}

double draft_gain(double a, int k, double row_cost) {
  const double tokens = a >= 1.0 ? k + 1.0 : (1.0 - std::pow(a, k + 1)) / (1.0 - a);
  return tokens / (1.0 + row_cost * k);
}

int DraftControl::depth() const {
  if (draft_max_ <= 0 || paused_for_ > 0) return 0;
  if (!adaptive_) return draft_max_;
  int best = 1;
  for (int k = 2; k <= draft_max_; ++k)
    if (draft_gain(acceptance_, k, token_cost()) > draft_gain(acceptance_, best, token_cost())) best = k;
  return best;
}

bool DraftControl::observe(int drafted, int accepted, int emitted) {
  if (drafted <= 0) {
    paused_for_ = std::max<int64_t>(paused_for_ - emitted, 0);
    if (paused_for_ == 0 && acceptance_ < token_cost()) acceptance_ = std::min(2 * token_cost(), 0.9);  // probe again
    return false;
  }
  acceptance_ = (1 - kNewest) * acceptance_ + kNewest * static_cast<double>(accepted) / drafted;
  if (!adaptive_ || draft_gain(acceptance_, 1, token_cost()) > 1.0) return false;
  paused_for_ = kPauseTokens;
  return true;
}

void DraftControl::observe_draft(double ms, int tokens) {
  if (!(one_row_ms_ > 0.0) || tokens <= 0 || !(ms >= 0.0)) return;
  const double share = std::min(ms / tokens / one_row_ms_, 1.0);
  draft_cost_ = draft_seen_ ? (1 - kNewest) * draft_cost_ + kNewest * share : share;
  draft_seen_ = true;
}

}  // namespace sb
