// Model: a loaded checkpoint that runs prefill and decode on the kernels
// handed to load(). Promises (tests/model/split_invariance_test.cpp and
// friends; why batching cannot change a result: docs/batching.md):
//  - split invariance: prefill of [0, n) in one call gives bit for bit the
//    logits and State of any split at multiples of kGrid (a fixed thread
//    count), or anywhere when each call gets the sequence's PrefillCarry;
//  - prefill runs the chunked Gated DeltaNet form on the absolute kGrid grid,
//    decode the recurrent form; both agree within ~1e-5 relative;
//  - capture: a prefill hands out the recurrent state at requested positions
//    (multiples of kGrid inside its range, or its end) without another pass;
//  - batch invariance: forward() over several sequences gives each, bit for
//    bit, what it gets alone, whatever the others; prefill() and decode()
//    are its one-sequence case.
// Thread safety: immutable after load(); calls may run on many threads at
// once, each with its own States.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/config.h"
#include "model/fingerprint.h"
#include "runtime/kernels.h"
#include "runtime/state.h"

namespace sb {

constexpr int64_t kGrid = 64;  // prefill chunk grid (the Gated DeltaNet chunk)

struct RuntimeOptions {
  int threads = 1;  // fixed at load; changes speed, never bits
  // The arithmetic of the matrix products (runtime/kernels.h). Unset: bf16
  // for a checkpoint whose embedding table is bf16, f32 otherwise. Part of
  // the fingerprint.
  std::optional<Precision> precision;
  // The MTP head drafts over token ids [0, mtp_draft_vocab) only (0, or the
  // vocabulary's size or more: all of them). Its LM head is most of a draft
  // token's cost; byte-level BPE vocabularies such as Qwen's number tokens
  // by merge order, so the low ids are the common ones. Drafts only: no bit
  // of a result, and not part of the fingerprint.
  int64_t mtp_draft_vocab = 32768;
  // false: a checkpoint's MTP head is left unloaded (has_mtp() is false), so
  // no forward step runs the head's layer and the State has none of its
  // components (another schema, so another fingerprint and bank): for a
  // server that never drafts with it (--speculative off).
  bool mtp_head = true;
};

// PrefillCarry: lets a prefill stop anywhere, not only on the kGrid grid,
// and the next call go on with the bits of an unsplit prefill. A Gated
// DeltaNet chunk of the grid is one computation (its state update reads all
// of its rows), so a call that ends inside a chunk keeps here that chunk's
// inputs so far, the recurrent state at its start and the kernel's working
// rows (DeltaRuleInput::parts); the next call computes only its own rows
// from them, and the state at its end. The State itself is always complete
// and valid at its position (decode may follow at once).
// Owned by the caller, one per sequence, handed to every prefill call of
// that sequence; only the model reads or writes its contents.
struct PrefillCarry {
  struct Layer {
    std::vector<float> q, k, v, g, beta;  // rows of the open chunk so far
    std::vector<float> state;              // recurrent state at the chunk's start
    std::vector<float> parts;              // the kernel's rows of it (DeltaRuleInput::parts)
    // Empties it, keeping the memory for the next chunk.
    void reset() {
      for (auto* x : {&q, &k, &v, &g, &beta, &state}) x->clear();
    }
  };
  int64_t position = -1;  // the State position it continues; -1: nothing open
  std::vector<Layer> layers;  // one per Gated DeltaNet layer
};

struct PrefillOptions {
  std::vector<int64_t> capture_positions;  // absolute; kept if inside (start, end]
  bool all_logits = false;                 // logits for every row, else the last row only
  // Optional: with it the prefill may start and end off the grid (split invariance).
  // REQUIRES: when the State's position is off the grid, the carry the
  // previous call of this sequence left.
  PrefillCarry* carry = nullptr;
};

// A sequence's rows of logits from a forward step: a view into the one
// buffer the LM head wrote for all of the step's rows, which every view of
// it keeps alive. A step's rows are not copied out per sequence (1 MB a row
// at a 248k vocabulary: 8 MB an 8-sequence step), and the buffer is not
// cleared before the head writes it whole. Read-only; copying a StepLogits
// copies the view.
class StepLogits {
 public:
  StepLogits() = default;
  // Floats [offset, offset + size) of `buffer`.
  StepLogits(std::shared_ptr<const float[]> buffer, size_t offset, size_t size)
      : buffer_(std::move(buffer)), rows_(buffer_.get() + offset, size) {}
  // The views' rows one after the other: the one view itself when only one
  // is non-empty, else a buffer of their own.
  static StepLogits join(std::span<const StepLogits> parts);

  const float* data() const { return rows_.data(); }
  size_t size() const { return rows_.size(); }
  bool empty() const { return rows_.empty(); }
  const float* begin() const { return rows_.data(); }
  const float* end() const { return rows_.data() + rows_.size(); }
  float operator[](size_t i) const { return rows_[i]; }
  operator std::span<const float>() const { return rows_; }
  std::vector<float> to_vector() const { return {begin(), end()}; }

 private:
  std::shared_ptr<const float[]> buffer_;
  std::span<const float> rows_;
};

struct PrefillOutput {
  int64_t n_rows = 0;          // rows of logits
  StepLogits logits;           // n_rows * vocab
  std::vector<LogitStats> stats;  // n_rows: each row's logit_stats (runtime/sampling.h)
  std::vector<RecurrentSnapshot> snapshots;  // in position order
  // Only for a model with an MTP head (Model::has_mtp): each logit row's
  // hidden state after the final norm (what the LM head reads), hidden_size
  // floats; qwen4exp: its hc_count streams before the output mixer,
  // hc_count * hidden_size floats. What the head's MtpStep::hidden takes.
  std::vector<float> hidden;
};

// The multi-token-prediction head (docs/model-spec.md, "MTP head"): row i
// pairs the hidden state h that predicted token t_i with t_i itself, runs
// e = norm_e(embed(t_i)), h' = norm_h(h), fc([e ; h']), one full-attention
// decoder layer over the head's own keys and values, the head's norm and
// the shared LM head: logits for the token after t_i. qwen4exp's head
// (docs/model-spec.md 7.7) pairs the trunk's streams, runs a QSA layer
// between its own mixers and mixes the streams for the LM head.
struct MtpStep {
  State* kv = nullptr;             // Model::new_mtp_state(); rows [0, keep) kept, then these appended
  int64_t keep = 0;                // REQUIRES: <= kv's rows (the rest are dropped first: a rejected draft)
  int64_t first_pos = 0;           // position of t_0 in its sequence (RoPE)
  std::span<const float> hidden;   // tokens.size() rows as SequenceOutput::hidden's
  std::span<const int32_t> tokens;
};
struct MtpOutput {
  std::vector<float> logits;  // the last row's, over the draft vocabulary (RuntimeOptions::mtp_draft_vocab)
  LogitStats stats;           // its argmax and log-normaliser
  std::vector<float> hidden;  // the last row's output after the head's norm (qwen4exp: its streams before its mixer): the next depth's h
};

// Which rows of a sequence's tokens get logits in a forward step: none (a
// prefill chunk that does not end the prompt), the last, or every row (echo).
enum class LogitRows { kNone, kLast, kAll };

// What a verify step keeps so that its rejected rows can be undone
// (Model::roll_back(); docs/model-spec.md, "Verification"). Owned by the
// caller and reused from step to step, so its buffers keep their memory.
//
// A Gated DeltaNet state is large (18.9 MB a sequence at 0.8b), so the state
// after each row is not kept: writing five of them cost a verify step more
// than its five rows' arithmetic. Kept instead are each such layer's state
// before the step and, per row, its keys, gates and the rank-one update the
// kernel applied (DeltaRuleInput::updates), from which the accepted rows'
// updates are replayed (Kernels::delta_rule_replay) in one pass over the
// state, giving the same bits without running the rows again. The state
// before the step is not copied: its buffer moves here and the State gets
// this one's (swapped), so a step and its rollback copy no state at all.
struct VerifyRollback {
  int64_t start = 0;  // the position before the step
  // The other recurrent parts (conv states, the MTP head's row, ...) after
  // each row but the last, row i's at position start + i + 1; the parts of
  // the Gated DeltaNet states are left empty.
  std::vector<RecurrentSnapshot> rows;
  // Per schema component (empty unless a Gated DeltaNet state): the state
  // before the step (the State's storage, f32), the rows' keys and gates and
  // the updates the kernel wrote.
  struct DeltaRule {
    std::vector<uint8_t> state;
    std::vector<float> k, g, updates;
  };
  std::vector<DeltaRule> delta;
};

// One sequence's share of a forward step: a prefill chunk (chunked Gated
// DeltaNet form on the absolute kGrid grid) or decode rows (recurrent form),
// consumed at positions [state->position(), +tokens.size()).
//
// Decode with more than one token is the verify form of speculative decoding
// (docs/model-spec.md, "Verification"): row i runs exactly as a one-token
// decode step would after rows 0..i-1 (the recurrent form, row by row, and
// attention over the keys up to its own position), so its logits and the
// state after it carry the bits of plain decoding; every row's attention
// keys and values are appended. With a rollback, what undoing rejected rows
// needs is kept there (Model::roll_back()).
struct SequenceStep {
  State* state = nullptr;
  std::span<const int32_t> tokens;
  bool decode = false;                     // the recurrent form, row by row
  std::vector<int64_t> capture_positions;  // prefill only; as PrefillOptions
  LogitRows logits = LogitRows::kLast;
  PrefillCarry* carry = nullptr;           // prefill only; as PrefillOptions
  // Decode only, optional: filled as VerifyRollback says.
  VerifyRollback* rollback = nullptr;
};
using SequenceOutput = PrefillOutput;

class Model {
 public:
  virtual ~Model() = default;

  // Loads a checkpoint directory (config.json + safetensors) onto the
  // kernels `kernels` makes (runtime/kernels.h; the CPU ones are
  // cpu_kernels_factory() of runtime/cpu/backend.h), with options.threads
  // and the precision as their KernelOptions.
  static Status load(const std::string& dir, const RuntimeOptions& options, const KernelsFactory& kernels,
                     std::unique_ptr<Model>* out);

  virtual const ModelConfig& config() const = 0;
  virtual const StateSchema& schema() const = 0;
  // model_fingerprint(fingerprint_fields()) (model/fingerprint.h): a digest
  // of everything that changes the numbers.
  virtual const std::string& fingerprint() const = 0;
  virtual const FingerprintFields& fingerprint_fields() const = 0;
  // The kernels the forward runs on, e.g. "cpu/bf16/avx512bf16" (part of the
  // fingerprint; runtime/kernels.h).
  virtual const std::string& kernels_name() const = 0;
  int64_t vocab_size() const { return config().vocab_size; }

  State new_state() const { return State(schema()); }

  // One forward pass over several sequences: every matmul runs over the rows
  // of all of them at once; attention, Gated DeltaNet and the sparse indexer
  // run per sequence. out->at(i) belongs to batch[i].
  // REQUIRES: distinct States; each sequence's tokens non-empty and in
  // [0, vocab_size). A bad input fails the whole call before any State
  // changes.
  virtual Status forward(std::span<const SequenceStep> batch, std::vector<SequenceOutput>* out) const = 0;

  // Consumes `tokens` at positions [state.position(), +tokens.size()).
  // REQUIRES: tokens non-empty, every id in [0, vocab_size).
  // forward() over this one sequence.
  Status prefill(State& state, std::span<const int32_t> tokens, const PrefillOptions& options,
                 PrefillOutput* out) const;
  // Consumes one token with the recurrent form; logits has vocab_size floats.
  // forward() over this one sequence.
  Status decode(State& state, int32_t token, std::vector<float>* logits) const;

  // The MTP head, when the checkpoint has one (config mtp_layers > 0 and its
  // mtp.* tensors). Then the model's State has three more components
  // (docs/model-spec.md 2.9; qwen4exp five, 7.7: its QSA layer's raw
  // indexer keys and pooled keys too): the head's keys and values of every consumed
  // position ("mtp.k", "mtp.v"; row j pairs the final-normed hidden row of
  // position j - 1, zeros for j = 0, with token j, at RoPE position j) and
  // the hidden row carried to the next position ("mtp.hidden", recurrent).
  // Every forward step computes them for its rows, prompt and decode alike
  // (the head's input and its layer's keys and values only), so they depend on the
  // tokens alone, whatever the split, and the bank stores them like the
  // layers' own. A draft runs on a State of its own (new_mtp_state(): the
  // head's keys and values only) that mtp_sync() brings up to the model's.
  // mtp_forward() is deterministic: the same kv, hidden rows and tokens give
  // the same bits.
  virtual bool has_mtp() const { return false; }
  virtual State new_mtp_state() const { return State(); }
  virtual Status mtp_forward(const MtpStep& step, MtpOutput* out) const;
  // Makes kv (new_mtp_state()) hold the head's keys and values of `state`,
  // rows [0, state.position()), copying only rows [valid, position()) (rows
  // [0, valid) are taken to be equal already; rows past position() are
  // dropped), and puts the carried hidden row (the final-normed hidden row
  // of position() - 1; zeros at 0) in *hidden: what a draft's first row
  // pairs with the token at position().
  virtual Status mtp_sync(const State& state, int64_t valid, State* kv, std::vector<float>* hidden) const;

  // The check after every restore: the State is consistent (runtime/state.h
  // invariants 1-3) and every derived component equals what its sources give
  // (a pooled row recomputed from its block's raw keys, bit for bit).
  virtual Status verify_state(const State& state) const = 0;
  // Takes `state`, just after the verify step that filled `kept`, back to
  // the position after its first `rows` rows (1 <= rows < the step's rows):
  // what plain decoding has there, bit for bit (docs/model-spec.md,
  // "Verification"). Costs the Gated DeltaNet layers' recurrent steps of
  // those rows. Uses up `kept` (its states move back into `state`): one
  // rollback a step; a second is refused.
  virtual Status roll_back(State& state, VerifyRollback& kept, int64_t rows) const = 0;
};

}  // namespace sb
