// Sequence: one request while the engine serves it, and the named steps of
// its life (restore, next token, publish), each in its own file so that a
// change to one of them stays in one place.
//
// Internal to engine/. A Sequence belongs to the thread that made it until it
// joins the step loop, then to the step thread until it is done (the loop's
// mutex hands it over both ways).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "bank/key.h"
#include "engine/engine.h"
#include "engine/mask_worker.h"
#include "model/model.h"
#include "runtime/sampling.h"

namespace sb {

class Bank;

// What every part of the engine reads: immutable once the engine serves.
struct EngineContext {
  const Model& model;
  Bank* bank;
  EngineOptions options;
  EngineTestHooks hooks;
};

using EngineClock = std::chrono::steady_clock;
double ms_since(EngineClock::time_point t);

struct Sequence {
  Sequence(const CompletionRequest& r, EngineClock::time_point t) : request(r), submitted(t) {}

  const CompletionRequest& request;
  EngineClock::time_point submitted;
  bool use_bank = false;  // the bank is consulted (kDefault, kReadOnly)
  bool publish = false;   // and written (kDefault)

  // Prompt state: position() is how far the prompt is consumed.
  State state;
  std::vector<Key> keys;                     // chain keys K0..K(n/B) when use_bank
  int64_t restore_point = 0;                 // where the prefill started
  std::vector<SnapshotPlace> places;         // captures for the bank, in order
  std::vector<RecurrentSnapshot> snapshots;  // captured so far, in order
  PrefillCarry carry;                        // lets prefill chunks end anywhere (model/model.h)
  EngineClock::time_point prefill_started;

  // Generation.
  std::optional<Sampler> sampler;
  std::unique_ptr<LogitsProcessor> processor;  // none without make_processor
  // Runs the processor's accept() and prepare() off the step thread when it
  // prepares(); declared after `processor`, so it stops first.
  std::unique_ptr<MaskWorker> worker;
  std::vector<float> processed;                // the processor's copy of `logits`
  // The row the next token is sampled from: a row of draw.logits, which
  // holds the step's logits until the next step's rows replace them (not
  // copied out: a row is 1 MB at a 248k vocabulary).
  std::span<const float> logits;
  LogitStats logit_stats;                      // its argmax and log-normaliser, from the forward pass
  bool published = false;

  // Speculative decoding (engine/speculation.h); no drafter: off.
  std::unique_ptr<Drafter> drafter;
  DraftControl draft_control;
  SpeculativeAcceptance acceptance = SpeculativeAcceptance::kExact;
  std::vector<int32_t> generated;             // the ids of result.tokens (what drafters read)
  std::vector<int32_t> draft;                 // this step's proposal
  VerifyRollback rollback;                    // what undoes a verify step's rejected rows (reused buffers)

  // The rows of the last step whose tokens are still to be drawn: a decode
  // slice's verify rows, or a prompt's last row. They wait here while the
  // worker prepares the next mask; the sequence sits out steps meanwhile.
  struct Draw {
    bool active = false;
    bool decode = false;            // a decode slice (speculation's record counts it)
    std::vector<int32_t> tokens;    // decode: the rows' input tokens (the draft after row 0)
    StepLogits logits;              // rows x vocabulary (a prompt's: its last `rows` rows, after any others)
    std::vector<LogitStats> stats;  // per row
    size_t rows = 0, row = 0;       // rows in all; the next one to draw from
    size_t before = 0;              // generated tokens before the slice
  } draw;

  CompletionResult result;
  Status status;
  bool finished = false;  // step thread: leaves the loop at the end of this step
  bool done = false;      // guarded by the loop's mutex: it leaves the loop
  // Called on the step thread once it left the loop, just before the loop
  // deletes it (the engine ends its request there).
  std::function<void(Sequence&)> on_retired;

  int64_t prompt_tokens() const { return static_cast<int64_t>(request.prompt.size()); }
  // The processor's work for the next token is done (or there is none).
  bool mask_ready() const { return !worker || worker->idle(); }
  bool prefilling() const { return state.position() < prompt_tokens(); }
};

// Plans and applies the restore of the longest stored prefix (kDefault,
// kReadOnly; never for echo), filling seq.state, seq.keys and the restore
// record, and the snapshot places of the prefill that follows. A bank error
// is returned; a failed check is counted and leaves the request cold.
Status restore_prefix(const EngineContext& context, Sequence& seq);

// Publishes every new full block of the prompt and the snapshots captured at
// their ends (kDefault; once, before the first decode step).
void publish_prompt(const EngineContext& context, Sequence& seq);

// The next token from seq.logits: the sampler's draw (after the request's
// logits processor, if any), its logprob in the model's raw distribution and
// the top_logprobs alternatives. An error comes from the processor. With a
// draft token (a verify row under rejection acceptance) the draw is
// Sampler::sample_draft's against it. The processor is not told the token:
// that is accept_token()'s.
Status next_token(Sequence& seq, GeneratedToken* out, const DraftToken* draft = nullptr);
// Tells the processor the token drawn and, while more tokens may follow,
// prepares the next one's mask: on the sequence's worker when the processor
// prepares() (an error then surfaces through worker->take()), else here.
Status accept_token(Sequence& seq, int32_t token, bool more);

// Sets up speculation for an admitted sequence: its drafter (the request's
// own, else the mode's; none when off or for echo) and its DraftControl.
void start_speculation(const EngineContext& context, Sequence& seq);
// This step's draft into seq.draft (empty when none): at most the control's
// depth and what max_tokens leaves after the step's own token, token ids in
// the vocabulary only.
void propose_draft(const EngineContext& context, Sequence& seq);

// Echo: logprob of prompt token first_row + i + 1 from row i of out.logits
// (out.n_rows x vocab floats), into seq.result.prompt_logprobs (the first is 0).
void record_prompt_logprobs(Sequence& seq, int64_t first_row, const SequenceOutput& out, int64_t vocab);

}  // namespace sb
