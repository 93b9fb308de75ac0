// Speculative decoding that changes no bit (docs/batching.md, "Speculative
// decoding"): a drafter proposes the next tokens of a sequence, one step
// verifies them in the model's verify form, and a draft token is accepted only
// when it equals the token the sequence's own sampler draws at that position
// from the row plain decoding would have computed with the same bits. So
// greedy and seeded sampling, logits processors included, give exactly plain
// decoding's tokens and logprobs; speculation changes only how many tokens a
// step emits.
// Drafters implement Drafter: NgramDrafter (n-gram lookup over the prompt and
// the output so far), OracleDrafter (tests and benches: a recorded run with a
// share corrupted); the MTP head's is engine/mtp_drafter.h (DraftContext).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sb {

class State;

enum class SpeculativeMode { kOff, kAuto, kNgram, kMtp };

// "off", "auto", "ngram", "mtp".
const char* speculative_mode_name(SpeculativeMode mode);
// False for any other name.
bool parse_speculative_mode(std::string_view name, SpeculativeMode* out);
inline constexpr const char* kSpeculativeModes = "off, auto, ngram, mtp";

// How a verify row judges its draft token (docs/batching.md, "Acceptance").
// kExact: the token the sequence's sampler draws must equal it, so results
// are plain decoding's bit for bit. kRejection: speculative sampling
// (Leviathan et al. 2023, Chen et al. 2023; Sampler::sample_draft): the draft
// token is accepted with probability min(1, p/q), else the row draws from the
// residual (p - q)+; each token keeps plain decoding's distribution but not
// its bits (the rng stream differs). Greedy requests are identical in both.
enum class SpeculativeAcceptance { kExact, kRejection };
// "exact", "rejection".
const char* speculative_acceptance_name(SpeculativeAcceptance acceptance);
// False for any other name.
bool parse_speculative_acceptance(std::string_view name, SpeculativeAcceptance* out);
inline constexpr const char* kSpeculativeAcceptances = "exact, rejection";
// The longest draft a step verifies (--draft-max, a request's draft_max).
inline constexpr int kMaxDraftTokens = 16;
// Whether a speculative mode and draft length can run on a checkpoint: an
// error naming the field otherwise (mtp without an MTP head, a draft_max
// outside 1..kMaxDraftTokens). has_mtp: whether the checkpoint has a head;
// unset where no model is at hand (request parsing; the engine checks again).
Status check_speculative(SpeculativeMode mode, int draft_max, std::optional<bool> has_mtp = std::nullopt);

// A request's choice; unset fields take the engine's (EngineOptions).
struct SpeculativeParams {
  std::optional<SpeculativeMode> mode;
  std::optional<int> draft_max;  // 1..kMaxDraftTokens
  bool adaptive = true;          // false: always draft_max (benches measure a fixed depth)
  std::optional<SpeculativeAcceptance> acceptance;
};

// What speculation did for one request (its response's `speculative`
// object, docs/interface.md).
struct SpeculativeRecord {
  std::string mode = "off";  // what ran: off, ngram, mtp, or a request's own drafter ("custom")
  int64_t steps = 0;         // decode steps of the sequence (with a draft or without)
  int64_t tokens = 0;        // tokens those steps emitted
  int64_t drafted = 0;       // draft tokens verified
  int64_t accepted = 0;      // of them, accepted
  int64_t switched_off = 0;  // times acceptance fell below break-even (drafting paused)
  // How draft tokens were judged (SpeculativeAcceptance): exact, rejection.
  std::string acceptance_mode = "exact";
  // The verify-row cost the depth choices last used (a share of a one-row
  // step, measured while serving: engine/row_cost.h); 0 without a drafter.
  // Timing-dependent: never part of what equality tests compare.
  double row_cost = 0.0;
  // The drafter's own cost per draft token, the same share
  // (DraftControl::draft_cost); 0 when not measured. Timing-dependent too.
  double draft_cost = 0.0;

  double acceptance() const { return drafted > 0 ? static_cast<double>(accepted) / drafted : 0.0; }
  double tokens_per_step() const { return steps > 0 ? static_cast<double>(tokens) / steps : 0.0; }
};

// What a drafter sees of a sequence: its prompt and the tokens generated so
// far (the last one is what the next step consumes; the draft proposes the
// tokens after it).
struct DraftContext {
  std::span<const int32_t> prompt;
  std::span<const int32_t> generated;
  // The sequence's model State, at the position of generated.back() (what
  // the MTP drafter reads the head's keys and values and carried row from).
  const State* state = nullptr;
};

// Proposes draft tokens. Any proposal is safe: a wrong token is rejected by
// verification and costs one row of a step, never a bit of the result.
// One object per sequence, called on the step thread only.
class Drafter {
 public:
  virtual ~Drafter() = default;
  // Appends up to max_tokens proposed tokens to *out (possibly none).
  virtual void draft(const DraftContext& context, int max_tokens, std::vector<int32_t>* out) = 0;
  // The distribution (over the vocabulary, summing to 1) that token i of the
  // last draft was drawn from, read by rejection acceptance (min(1, p/q),
  // residual (p - q)+); valid until the next draft(). Empty: a point mass on
  // the token, as for every lookup drafter here; a model-side drafter (MTP)
  // returns its softmax row.
  virtual std::span<const float> draft_probs(size_t /*i*/) const { return {}; }
};

// The most recent earlier occurrence of the context's last n tokens (n from
// max_n down to min_n, over the prompt then the output) proposes the tokens
// that followed it (read on into the proposal itself when the match ends
// near the end, so a loop goes on): agents' outputs repeat their inputs
// (file contents, code), which this catches for nothing.
class NgramDrafter final : public Drafter {
 public:
  static constexpr int kMaxN = 4, kMinN = 2;
  void draft(const DraftContext& context, int max_tokens, std::vector<int32_t>* out) override;
};

// Tests and benches: proposes `recorded` (a plain run's output for the same
// request) from the current position, each token replaced by another with
// probability `corrupt` (a hash of seed and position decides, so a rerun
// drafts the same), which sets the acceptance rate to about 1 - corrupt.
class OracleDrafter final : public Drafter {
 public:
  OracleDrafter(std::vector<int32_t> recorded, double corrupt, uint64_t seed, int64_t vocab)
      : recorded_(std::move(recorded)), corrupt_(corrupt), seed_(seed), vocab_(vocab) {}
  void draft(const DraftContext& context, int max_tokens, std::vector<int32_t>* out) override;

 private:
  std::vector<int32_t> recorded_;
  double corrupt_;
  uint64_t seed_;
  int64_t vocab_;
};

// One sequence's draft depth: adapted to its measured acceptance, and zero
// (drafting paused) while acceptance is below break-even.
//
// Model: draft tokens are accepted independently with probability a (a
// moving average of each verify step's accepted / drafted), so a draft of k
// emits (1 - a^(k+1)) / (1 - a) tokens, and a verify row costs row_cost of a
// one-row step (a row's matrix products share the step's weight reads): the
// step loop's running measure (engine/row_cost.h), kRowCost until it has
// one. Drafting itself costs draft_cost per draft token (the drafter's own
// time, e.g. the MTP head's forward, as a share of a one-row step: measured
// per sequence, 0 until the step loop has a one-row step time or while the
// row cost is pinned), so a draft token costs row_cost + draft_cost. The
// depth is the k in 1..draft_max with the most tokens per cost; when no k
// beats plain decoding (a below about that cost) drafting pauses for
// kPauseTokens tokens, then probes again at depth 1 from an acceptance just
// above break-even.
class DraftControl {
 public:
  static constexpr double kRowCost = 0.1;
  static constexpr double kNewest = 0.3;  // weight of a verify step in the average
  static constexpr int64_t kPauseTokens = 48;
  static constexpr double kPrior = 0.5;  // acceptance assumed before any verify

  DraftControl() = default;
  DraftControl(int draft_max, bool adaptive) : draft_max_(draft_max), adaptive_(adaptive) {}

  // Tokens to draft for the next step (0: none).
  int depth() const;
  // After a step of this sequence: `drafted` draft tokens verified (0 for a
  // plain step), `accepted` of them, `emitted` tokens emitted. True when
  // this step paused drafting (acceptance below break-even).
  bool observe(int drafted, int accepted, int emitted);
  double acceptance() const { return acceptance_; }
  // The cost of a verify row the next depth() and observe() assume, in
  // (0, 1]; kRowCost until set. one_row_ms: a one-row step's time
  // (RowCostEstimate::one_row_ms), what observe_draft() divides by; 0 keeps
  // the draft cost at 0.
  void set_row_cost(double row_cost, double one_row_ms = 0.0) {
    row_cost_ = row_cost;
    one_row_ms_ = one_row_ms;
  }
  double row_cost() const { return row_cost_; }
  // A draft() call that proposed `tokens` tokens took `ms`: folds ms per
  // token over a one-row step into draft_cost() (a moving average).
  void observe_draft(double ms, int tokens);
  double draft_cost() const { return draft_cost_; }

 private:
  int draft_max_ = 0;
  bool adaptive_ = true;
  double acceptance_ = kPrior;
  double row_cost_ = kRowCost;
  double one_row_ms_ = 0.0;
  double draft_cost_ = 0.0;
  bool draft_seen_ = false;
  int64_t paused_for_ = 0;  // tokens left of a pause

  double token_cost() const { return row_cost_ + draft_cost_; }
};

// Tokens per unit of cost of a draft of k at acceptance a, a draft token
// (its verify row and its drafting) costing row_cost of a one-row step
// (DraftControl's model).
double draft_gain(double acceptance, int k, double row_cost = DraftControl::kRowCost);

}  // namespace sb
