// Engine: serves completion requests (token ids in, tokens and logprobs out)
// through the bank (docs/bank.md, "Lookup, restore, continue"), many at once
// in one forward pass per step (continuous batching).
//
// Thread safety: submit() and complete() may be called from many threads at once.
// The promise: for any request, a completion in mode kDefault or kReadOnly gives
// the same tokens and bit-identical logprobs as in mode kBypass, and the same
// as it gives alone, whatever else runs in the same steps.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bank/bank.h"
#include "bank/key.h"
#include "bank/miss_reason.h"
#include "bank/restore_mode.h"
#include "common/status.h"
#include "engine/logits_processor.h"
#include "engine/speculation.h"
#include "runtime/state.h"

namespace sb {

enum class CacheMode { kDefault, kBypass, kReadOnly };

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  float top_p = 1.0f;
  int top_k = 0;  // 0: off
  uint64_t seed = 0;
  float min_p = 0.0f;  // 0: off; else drop tokens below min_p times the most likely one's probability
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct GeneratedToken {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;  // top_logprobs alternatives, best first
};

// The restore record of one request (docs/interface.md).
struct RestoreRecord {
  RestoreMode mode;  // cold, a tier (ram, ssd, ...), mixed, bypass; mode.name() in JSON
  int64_t restore_point = 0;
  int64_t matched_tokens = 0;
  int64_t common_prefix_tokens = 0;
  int64_t snapshot_position = 0;
  int64_t blocks = 0;
  uint64_t bytes_read = 0;
  std::vector<TierUse> tiers;  // objects and bytes per tier that served them
  int64_t checks = 0;
  int64_t check_failures = 0;
  int64_t prefill_tokens = 0;
  double lookup_ms = 0;
  double restore_ms = 0;
  double prefill_ms = 0;
  // Steps the prompt's prefill ran in (its chunks; how the step budget
  // spread it beside other sequences: docs/batching.md).
  int64_t prefill_steps = 0;
  // Prompt tokens in the new full blocks this request handed to the bank
  // (publish, kDefault only; a tier may still refuse or later evict one).
  int64_t stored_tokens = 0;
  // Why restore_point is below the longest usable prefix, floor((n-1)/B)*B
  // (bank/miss_reason.h); kNone when it is not. Never kOtherNamespace: that
  // is the operator-only flag below (operator_miss_reason()).
  MissReason miss_reason = MissReason::kNone;
  int64_t diverged_at = -1;  // kDiverged: the first prompt token that differs from the stored chain
  bool stored_in_other_namespace = false;
};

struct CompletionRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  SamplingParams sampling;
  std::vector<int32_t> stop_tokens;  // generation ends after emitting one of these
  int top_logprobs = 0;              // alternatives per generated token
  bool echo = false;                 // also return logprobs of prompt tokens
  CacheMode cache_mode = CacheMode::kDefault;
  std::string name_space;  // tenant; never shares state with another
  // A namespace this request may also restore from, never publish to (the
  // operator's shared system-prompt namespace); empty: none.
  std::string shared_name_space;
  int64_t message_boundary = -1;  // first token of a chat's final user message, or -1
  // Called for each generated token, on the engine's step thread;
  // returning false cancels. Every running sequence waits for it: hand the
  // token on (TokenQueue::push, engine/token_queue.h) and do the rest
  // (text, stop strings, rendering) on the request's own thread.
  std::function<bool(const GeneratedToken&)> on_token;
  // Makes this request's logits processor (penalties, logit bias, a grammar
  // mask), one per run of the request; empty: none. Reported logprobs stay
  // those of the model's raw distribution (logits_processor.h). A grammar's
  // mask runs on the sequence's own thread beside the forward pass: a slow
  // one holds back only this request.
  std::function<std::unique_ptr<LogitsProcessor>()> make_processor;
  // Called with the whole logit vector of the model (before any logits processor)
  // for each generated token, before it is drawn (`statebank run --logits-out`, which tools/xcheck
  // compares with another implementation). Empty: not called.
  std::function<void(std::span<const float>)> on_logits;
  // Polled before every step, on the step thread (a client gone, a
  // deadline): true cancels the request there, before its prefill is done
  // too. Must be cheap and thread-safe.
  std::function<bool()> cancelled;
  // Speculative decoding (engine/speculation.h): unset fields take the
  // engine's. It never changes a token or a logprob, only how soon they come.
  SpeculativeParams speculative;
  // Tests and benches: makes this request's drafter (the oracle), used
  // whatever the mode; empty: the mode's own.
  std::function<std::unique_ptr<Drafter>()> make_drafter;
};

// Why a completion ended. kNone: not ended by the step loop (an error before
// it ran). The wire names ("stop", "length", ...) come from finish_reason_name().
enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };

constexpr const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
    case FinishReason::kNone:
      break;
  }
  return "";
}

struct CompletionResult {
  std::vector<GeneratedToken> tokens;
  std::vector<float> prompt_logprobs;  // echo: logprob of prompt token i given tokens < i (first is 0)
  FinishReason finish_reason = FinishReason::kNone;
  RestoreRecord restore;
  // The objects the restore installed (blocks 1..k, then the snapshot), for
  // the audit (server/backend/audit.h); empty when nothing was restored.
  std::vector<ObjectId> restored_objects;
  std::vector<Key> restored_chain;  // K0..Kk of the restore (the audit's log line)
  double queue_ms = 0;              // from submit() to the first step it ran in (restore included)
  double ttft_ms = 0;               // from submit() to its first token (queue included)
  SpeculativeRecord speculative;
};

// How Engine::submit() answered: accepted, or refused because the queue is
// full, the request's tenant holds its share, or the engine is closed.
// kInvalid: the request fails Engine::check() (never queued).
enum class Admit { kOk, kFull, kTenantFull, kClosed, kInvalid };

// A submitted request's end: its status (a validation or bank error, or ok)
// and result (finish_reason kCancelled when it was cancelled, also before it
// started). Called exactly once per accepted request, on an engine thread.
using CompletionDone = std::function<void(Status, CompletionResult)>;

class Model;

struct EngineOptions {
  uint32_t block_tokens = 256;    // B: a multiple of kGrid and of every pooled ratio
  int64_t snapshot_every = 2048;  // S in tokens: a multiple of B; 0 = no interval snapshots
  // Continuous batching: at most max_running sequences in flight (each holds
  // its State in memory); each step consumes at most batch_tokens tokens:
  // one decode token per running sequence, the rest prefill chunks.
  // REQUIRES batch_tokens > max_running, so a prefill always moves.
  int max_running = 8;
  int64_t batch_tokens = 512;
  // Beside running decodes a step's prefill rows are held to what fits in
  // about itl_ratio times a decode-only step (measured, engine/step_budget.h),
  // so a long prompt stretches their inter-token latency by about that much;
  // 0 = only batch_tokens bounds a step.
  double itl_ratio = 2.0;
  // Speculative decoding (engine/speculation.h): kAuto is what the checkpoint
  // allows (mtp with an MTP head loaded, else ngram); draft_max the
  // longest draft, 1..kMaxDraftTokens. A request may choose its own.
  SpeculativeMode speculative = SpeculativeMode::kAuto;
  int draft_max = 4;
  // kRejection: speculative sampling, not bit-identical to plain decoding
  // (engine/speculation.h); a request may choose its own.
  SpeculativeAcceptance speculative_acceptance = SpeculativeAcceptance::kExact;
  // > 0: the verify-row cost draft depths assume, fixed (tests, benches);
  // 0: measured while serving (engine/row_cost.h).
  double verify_row_cost = 0.0;
  // Admission (Engine::submit): beyond the max_running requests being
  // restored or run, at most max_queue wait; one more is refused.
  size_t max_queue = 64;
  // With tenants (submit's `tenant` not empty): one tenant holds at most
  // ceil(tenant_share x (max_running + max_queue)) requests, at least one,
  // waiting and running together; 1: no share.
  double tenant_share = 0.5;
  // Threads that restore admitted requests from the bank (engine/admission.h).
  int restore_threads = 2;

  // Whether these options can run any model: every rule above that does
  // not depend on the checkpoint (Engine::create adds the model's own). The
  // message names the option by its `statebank` flag (--block-tokens, ...),
  // since that is where a user sets it.
  Status validate() const;
};

// Test-only ways to break a restore on purpose, so a test can prove that the
// equivalence harness sees a broken restore. Never set outside tests.
struct EngineTestHooks {
  // Called with the composed State after a restore passed every check,
  // before the rest of the prompt is prefilled.
  std::function<void(State& restored)> tamper_restored_state;
  // Speculation: keep the state of rejected draft rows instead of rolling
  // it back (the equality tests must then fail).
  bool keep_rejected_rows = false;
};

struct EngineStats {
  uint64_t requests = 0;
  uint64_t prompt_tokens = 0;
  uint64_t cached_tokens = 0;                            // sum of restore_point
  std::array<uint64_t, RestoreMode::kCount> restores{};  // requests by RestoreMode::index()
  uint64_t check_failures = 0;
  // The step loop: forward steps run, tokens they consumed (decode and
  // prefill), the most sequences that ran in one step.
  uint64_t steps = 0, step_tokens = 0, peak_batch = 0;
  // Steps of decode rows only (no prompt rows): how many, their wall time
  // (sampling included) and the tokens drawn in them, the decode rate the
  // batch size sets apart from the prompts prefilled beside it.
  uint64_t decode_only_steps = 0, decode_only_tokens = 0;
  double decode_only_ms = 0.0;
  // Speculative decoding: decode steps of sequences and the tokens they
  // emitted (tokens per step), draft tokens verified and accepted.
  uint64_t spec_decode_steps = 0, spec_decode_tokens = 0, spec_drafted = 0, spec_accepted = 0;
  uint64_t spec_switched_off = 0;  // sequences' pauses below break-even
  double verify_row_cost = 0.0;    // the step loop's estimate now (engine/row_cost.h)
};

// Serves requests through the bank (docs/bank.md, "Lookup, restore,
// continue"). submit() admits a request into the engine's one queue
// (engine/admission.h: bounded by max_running + max_queue, a tenant's share,
// cancellation and deadlines before start) and returns at once; then:
//  1. restore (engine/restore.cpp), on one of the restore threads once a
//     slot is free (restore_threads of them: a long SSD restore never stalls
//     the step loop, and never runs ahead of a free slot, so at most
//     max_running States exist): chain keys of the
//     prompt's full blocks under the root of (format version, model
//     fingerprint, request namespace, B); Bank::plan_restore over at most
//     (n - 1) / B blocks, so at least one prompt token is prefilled and the
//     first sampled token has logits; compose a new State from the plan and
//     check it (a failure quarantines every planned object in every tier,
//     Bank::quarantine, and the request goes cold, so it publishes them
//     afresh); with a shared namespace, each position may also come from
//     the shared chain;
//  2. the step loop (engine/step_loop.h) admits it when fewer than
//     max_running sequences run, prefills the rest of the prompt in chunks
//     (any length: a PrefillCarry keeps them equal to one unsplit prefill
//     from the restore point, which B puts on the absolute kGrid grid)
//     alongside the other sequences' decode tokens, capturing snapshots at
//     snapshot_positions();
//  3. publish (engine/publish.cpp, kDefault only), right after its first
//     token: every new full block of the prompt and the captured snapshots;
//     only prefill-produced state is ever banked;
//  4. sample and decode (engine/next_token.cpp), one token per step, or with
//     a draft (engine/speculation.h) its k + 1 rows in one step and every
//     token up to the first draft token that differs from the sampler's draw,
//     the rejected rows rolled back (Model::roll_back(), model/model.h), until a
//     stop token, max_tokens, or cancellation (on_token returning false,
//     cancelled() true), which frees its slot at the next step; its
//     on_done runs on the step thread.
// Every sequence's rows in a step get the bits they get alone (batch
// invariance, model/model.h), so batching never changes a result.
// Echo requests need the logits of every prompt row, which a restored prefix
// does not have: they skip the restore (lookup included) and prefill cold,
// at most kGrid rows per step so that memory stays kGrid x vocabulary
// floats; in kDefault they still publish.
// Thread safety: submit() and complete() may run on many threads at once;
// set_test_hooks() only before any request. The destructor abandons what is
// queued or running (each still ends through its on_done) and waits for it.
class StepLoop;
class Admission;
struct EngineContext;
struct Ticket;

class Engine {
 public:
  // bank may be null: every request is then served as bypass.
  static Status create(const Model& model, Bank* bank, const EngineOptions& options, std::unique_ptr<Engine>* out);
  ~Engine();

  // Every rule a request must keep (a prompt inside the vocabulary,
  // sampling ranges, a speculative mode the checkpoint runs), checked before
  // it is admitted: an invalid request never takes a place in the queue.
  Status check(const CompletionRequest& request) const;
  // Admits a request that passes check() (else kInvalid); on_done gets its
  // end, exactly once when admitted (never when refused). `tenant` (empty:
  // none) is what tenant_share limits. Returns at once, on any thread.
  Admit submit(CompletionRequest request, CompletionDone on_done, std::string tenant = "") const;
  // The synchronous form, for callers that wait for the result (tools,
  // tests, the audit): check(), submit() and wait. Never refused for a full
  // queue (it waits in it); a closed engine is kUnsupported. *out is set
  // when ok.
  Status complete(const CompletionRequest& request, CompletionResult* out) const;
  // The queue itself: its counts (queued: waiting for a slot; running:
  // restoring or in the step loop), and close/drain at shutdown.
  Admission& admission() const;

  const EngineOptions& options() const;
  // K0 of a namespace's chains: H(format version, model fingerprint,
  // namespace, B) (docs/bank.md, "Keys").
  Key namespace_root(const std::string& name_space) const;
  const Model& model() const;
  Bank* bank() const;
  EngineStats stats() const;
  // Test-only: defined in test code (tests/util/engine_test_hooks.cpp), so
  // the shipped binary has no way to break a restore.
  void set_test_hooks(EngineTestHooks hooks);

 private:
  Engine() = default;
  void count(const CompletionRequest& request, const CompletionResult& result) const;
  // The restore stage of an admitted request, on a restore thread: restore,
  // then hand it to the step loop.
  void start(const std::shared_ptr<Ticket>& ticket) const;

  std::unique_ptr<EngineContext> context_;
  std::unique_ptr<StepLoop> loop_;
  std::unique_ptr<Admission> admission_;  // after loop_: destroyed first, it waits for the loop's sequences
  struct Counters {
    std::atomic<uint64_t> requests{0}, prompt_tokens{0}, cached_tokens{0};
    std::atomic<uint64_t> check_failures{0};
    std::atomic<uint64_t> spec_steps{0}, spec_tokens{0}, spec_drafted{0}, spec_accepted{0}, spec_switched_off{0};
    std::array<std::atomic<uint64_t>, RestoreMode::kCount> by_mode{};
  };
  mutable Counters counters_;
};

// Why a snapshot is taken at a position; the engine maps it to the bank's
// retention class (bank/tier.h). Kept here so tests can check the placement
// rules.
enum class SnapshotReason { kInterval, kPromptEnd, kBranch, kMessage };
struct SnapshotPlace {
  int64_t position = 0;
  SnapshotReason reason = SnapshotReason::kInterval;
  bool operator==(const SnapshotPlace&) const = default;
};
// Where a prompt of n tokens takes snapshots, in increasing order, positions
// in (0, n]: every multiple of snapshot_every; the last full block boundary
// floor(n / B) * B and the last boundary a replay of the same prompt can
// restore, floor((n - 1) / B) * B; when message_boundary >= 0, the boundary
// floor(message_boundary / B) * B; and, when branch_point > 0, the branch
// point itself (a multiple of B: the end of the stored blocks the prompt
// matched, where another conversation went on differently and no snapshot
// was stored). A position with several reasons takes the strongest
// (message > branch > prompt end > interval).
std::vector<SnapshotPlace> snapshot_positions(int64_t n, int64_t message_boundary, int64_t block_tokens,
                                              int64_t snapshot_every, int64_t branch_point);

}  // namespace sb
