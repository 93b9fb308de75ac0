// Transformer: the one Model implementation, for every family of
// model/config.h. A model is a list of layers, each a mixer (gated attention,
// Gated DeltaNet, or indexed sparse attention) and a feed-forward block
// (dense or mixture of experts); the state schema is the concatenation of
// the layers' components (docs/bank.md "Model state as the bank sees it").
//
// Internal to model/: users hold a Model (model/model.h).
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "model/model.h"
#include "model/ngram_hash.h"
#include "model/ngram_table.h"
#include "model/rows.h"
#include "model/weights.h"
#include "runtime/kernels.h"

namespace sb {

// Every projection of a layer's normed input is one fused product
// (Kernels::fuse): the input is read once and the weights in one pass.
struct AttentionWeights {
  // Parts: q (with the per-head gate when gated), k, v; for a qwen4exp QSA
  // layer (docs/model-spec.md 7.3) also the indexer's k and q (one
  // index_qk_proj split). The indexer has no head weights: each head counts 1.
  enum Part { kQ, kK, kV, kIndexK, kIndexQ };
  FusedWeight in;
  WeightRef o;
  std::vector<float> q_norm, k_norm;
  // The indexer's norms: the pooled keys' and its query heads' (before RoPE).
  std::vector<float> index_k_norm, index_q_norm;
};

// A qwen4exp hyper-connection mixer (docs/model-spec.md 7.3) over the
// hc_count streams: per-stream norm, the low-rank gate, and (not at the
// head) the weights that inject the layer's output into each stream.
struct MixerWeights {
  std::vector<float> norm;  // [hc_count * hidden], (1 + w)
  FusedWeight down;         // parts: down [lowrank, W], then inject [hc_count, W] when present
  WeightRef up;             // [W, lowrank]
  bool inject = false;
};

// qwen4exp's PLE n-gram layer (docs/model-spec.md 7.3).
struct PleWeights {
  NgramHash hash;
  NgramTable table;  // read in place
  WeightRef key, value;
  std::vector<float> norm_key, norm_query, norm_conv;  // [W] each, (1 + w)
  std::vector<float> conv;                             // [kernel, W]: tap-major
};

struct DeltaNetWeights {
  // qwen3_5 (flat): parts qkv, z, b, a. qwen3_next (grouped per key head):
  // parts qkvz, ba. Tiled (ModelConfig::value_heads_tiled, weights as the
  // GGUF file holds them, several value heads per key head): parts qkv's q
  // and k rows, its v rows, z, b, a, value heads tiled in all but the first
  // (put in order after the product); one value head per key head is flat.
  bool grouped = false;
  // Grouped, from a GGUF file (ModelConfig::qkvz_split): parts qkv, z, ba,
  // qkv and z in the layer's order.
  bool qkvz_split = false;
  bool tiled = false;
  // out's columns take the value heads tiled (a quantized out of a tiled
  // file, used as it lies): its input is tiled before the product.
  bool tile_out_input = false;
  FusedWeight in;
  std::vector<float> conv;      // [kernel, conv_dim]: tap-major, as the kernel reads it
  std::vector<float> neg_exp_a_log;  // -exp(A_log), per value head
  std::vector<float> dt_bias;
  std::vector<float> norm;      // gated RMSNorm weight [d_v]
  WeightRef out;
};

struct FfnWeights {
  bool moe = false;
  bool shared_expert = false;
  // Dense: parts gate, up. MoE: the router, then with a shared expert its
  // gate, up and gate scalar.
  FusedWeight in;
  WeightRef down;  // dense MLP, or the shared expert of a MoE block
  struct Expert {
    FusedWeight gate_up;
    WeightRef down;
  };
  std::vector<Expert> experts;
};

struct LayerWeights {
  LayerType type = LayerType::kFullAttention;
  std::vector<float> input_norm, post_norm;
  AttentionWeights attn;
  DeltaNetWeights delta;
  FfnWeights ffn;
  // qwen4exp: the mixers in place of the two norms, and the PLE layer.
  MixerWeights attn_mix, mlp_mix;
  std::shared_ptr<PleWeights> ple;
  // Indices into the state schema (-1 when absent) and, for recurrent
  // components, their ordinal among the schema's recurrent components.
  int comp_k = -1, comp_v = -1, comp_index_raw = -1, comp_index_pooled = -1;
  int comp_conv = -1, comp_ssm = -1, rec_conv = -1, rec_ssm = -1;
  // The PLE layer's carried token ids and conv input history.
  int comp_ple_tokens = -1, comp_ple_conv = -1, rec_ple_tokens = -1, rec_ple_conv = -1;
};

// One sequence's rows in a forward call: rows [first_row, first_row + rows)
// of the call, at positions [first_pos, first_pos + rows) of its State.
struct SequenceRows {
  State* state = nullptr;
  int64_t first_row = 0;
  int64_t rows = 0;
  int64_t first_pos = 0;
  bool recurrent = false;  // decode: recurrent delta rule
  std::vector<int64_t> capture;  // absolute positions, ascending, at chunk ends
  std::vector<RecurrentSnapshot>* snapshots = nullptr;  // one per capture
  PrefillCarry* carry = nullptr;  // prefill with a carry: may start or end inside a chunk
  VerifyRollback* rollback = nullptr;  // decode: as SequenceStep::rollback
};

// What one forward call over the rows of several sequences needs to know
// besides the weights. Row-wise work (matmuls, norms, RoPE, the FFN) runs
// over all rows at once; work that reads a sequence's past (attention, Gated
// DeltaNet, the sparse indexer) runs per sequence.
struct ForwardCall {
  int64_t rows = 0;                // over all sequences
  std::vector<int64_t> positions;  // per row: its absolute position in its sequence
  std::vector<int32_t> tokens;     // per row: its token id (the PLE layer hashes them)
  std::vector<SequenceRows> sequences;
};

class Transformer final : public Model {
 public:
  static Status create(const std::string& dir, const RuntimeOptions& options, const KernelsFactory& kernels,
                       std::unique_ptr<Model>* out);

  const ModelConfig& config() const override { return config_; }
  const StateSchema& schema() const override { return schema_; }
  const std::string& fingerprint() const override { return fingerprint_; }
  const FingerprintFields& fingerprint_fields() const override { return fingerprint_fields_; }
  const std::string& kernels_name() const override { return kernels_->name(); }
  Status forward(std::span<const SequenceStep> batch, std::vector<SequenceOutput>* out) const override;
  Status verify_state(const State& state) const override;
  Status roll_back(State& state, VerifyRollback& kept, int64_t rows) const override;
  bool has_mtp() const override { return mtp_ != nullptr; }
  State new_mtp_state() const override { return mtp_ ? State(mtp_->schema) : State(); }
  Status mtp_forward(const MtpStep& step, MtpOutput* out) const override;
  Status mtp_sync(const State& state, int64_t valid, State* kv, std::vector<float>* hidden) const override;

 private:
  Transformer() = default;
  Status bind_weights();
  void build_schema();
  Status check_tokens(const State& state, std::span<const int32_t> tokens) const;
  // Checks one sequence's step and lays out its rows at the end of `call`.
  Status add_sequence(const SequenceStep& step, ForwardCall* call, SequenceOutput* out) const;
  // Rows of one pass of forward() (see there).
  static constexpr int64_t kMaxPassRows = 512;
  Status forward_pass(std::span<const SequenceStep> batch, std::vector<SequenceOutput>* out) const;
  // Runs every layer over x [rows, hidden] in place; qwen4exp's streams
  // before the head's mixer [rows, hc_count * hidden] into *streams when given.
  void run_layers(ForwardCall& call, std::vector<float>& x, std::vector<float>* streams = nullptr) const;
  // One decoder layer over x in place; xn and y are scratch rows of x's size.
  void run_layer(const LayerWeights& w, ForwardCall& call, float* x, float* xn, float* y) const;
  // qwen4exp (model/qwen4exp_layer.cpp): x [rows, hidden] becomes the
  // hc_count streams [rows, hc_count * hidden], each layer runs between its
  // mixers, and the head's mixer leaves x [rows, hidden] again.
  void run_qwen4exp_layers(ForwardCall& call, std::vector<float>& x, std::vector<float>* streams) const;
  void run_qwen4exp_layer(const LayerWeights& w, ForwardCall& call, float* h, float* normed, float* xin, float* y) const;
  // normed = the streams' norm; xin = the layer input; inject [rows, hc_count]
  // when the mixer has one.
  void mixer_in(const MixerWeights& m, const float* h, int64_t rows, float* normed, float* xin, float* inject) const;
  void ple_layer(const LayerWeights& w, ForwardCall& call, float* h) const;
  // The PLE conv of one sequence's rows and its carried ids (history: the
  // ids up to the call's end), keeping them at its captures and verify rows.
  void ple_sequence(const LayerWeights& w, SequenceRows& seq, const std::vector<int64_t>& history,
                    const float* conv_in, float* conv_out) const;
  Status bind_qwen4exp_layer(int64_t layer, LayerWeights* w);
  // A tensor by its full name (the WeightSet's, or the MTP head's).
  using TensorGetter = std::function<const TensorView&(const std::string&)>;
  MixerWeights bind_mixer(const std::string& prefix, bool inject);
  MixerWeights bind_mixer(const TensorGetter& get, const std::string& prefix, bool inject);
  // qwen4exp's QSA projections as one product: q (with its gate), k, v, the
  // indexer's key, then its query heads; `get` names the attention's tensors
  // without their prefix.
  FusedWeight qwen4exp_qsa_in(const TensorGetter& get);
  // Final norm and LM head over the rows each sequence asked logits for.
  void logits_for_rows(std::span<const SequenceStep> batch, const ForwardCall& call, const std::vector<float>& x,
                       std::vector<SequenceOutput>* out) const;

  // keys_only: the rows' keys and values are appended to their States and
  // nothing else is computed (out untouched): what the MTP head's state rows
  // need, its output being only ever read by a draft.
  void attention_layer(const LayerWeights& w, ForwardCall& call, const float* xn, float* out,
                       bool keys_only = false) const;
  // Pooled indexer key of block b from the raw keys [b*m, (b+1)*m) in `state`.
  void pooled_key(const LayerWeights& w, const State& state, int64_t b, float* out) const;
  // From the indexer's projections over all rows of the call: stores the raw
  // keys and closes pooled blocks per sequence, then one block mask per
  // sequence.
  void sparse_selection(const LayerWeights& w, ForwardCall& call, const float* raw, float* iq, const float* iw,
                        std::vector<std::vector<uint8_t>>* masks) const;
  // Appends the rows' raw indexer keys to their States and closes the
  // pooled blocks they complete.
  void store_index_keys(const LayerWeights& w, ForwardCall& call, const float* raw) const;
  void sparse_mask(const LayerWeights& w, const SequenceRows& seq, const float* iq, const float* iw,
                   std::vector<uint8_t>* mask) const;
  void delta_net_layer(const LayerWeights& w, ForwardCall& call, const float* xn, float* out) const;
  // Conv, normalisation and the delta rule of one sequence's prefill rows,
  // in stretches that end at its captures and its last row; the delta rule
  // in the chunks of the absolute kGrid grid.
  void delta_net_sequence(const LayerWeights& w, SequenceRows& seq, const float* mixed, const float* g,
                          const float* beta, float* o) const;
  // The delta rule of rows [s, e) of seq (q, k, v indexed by seq's row; g,
  // beta and o from seq's first row): its whole chunks in one kernel call,
  // with a carry the parts of chunks at either end through it.
  void delta_rule_stretch(const LayerWeights& w, SequenceRows& seq, int64_t s, int64_t e, const float* q,
                          const float* k, const float* v, const float* g, const float* beta, float* ssm,
                          float* o) const;
  // The same for consecutive decode sequences (rows adjacent in the call):
  // plain decode rows (one a sequence) through one call of each kernel;
  // verify rows (several of one sequence, each row on the state the row
  // before it left, model/model.h) one call of each kernel per sequence.
  void delta_net_decode(const LayerWeights& w, std::span<SequenceRows> seqs, const float* mixed, const float* g,
                        const float* beta, float* o) const;
  // Keeps the conv state of this layer after each decode row of seq but the
  // last (verify: VerifyRollback::rows), from the state before the step
  // (`before`) and the step's conv inputs (`mixed`, the sequence's rows).
  void keep_row_conv_states(const LayerWeights& w, SequenceRows& seq, std::span<const float> before,
                            const float* mixed) const;
  // Keeps this layer's Gated DeltaNet state before a verify step (its
  // buffer swapped out of the State, which gets a buffer of the same size to
  // write the step's state into), the keys and gates of seq's rows (r0:
  // seq's first row among k and g) and room for the updates the step's
  // kernel writes, what roll_back() replays (VerifyRollback). Returns the
  // kept state: what the step reads.
  const float* keep_delta_rule(const LayerWeights& w, SequenceRows& seq, int64_t r0, const float* k,
                               const float* g) const;
  // The conv's output channels as q, k and v from row `row` of each
  // (Kernels::causal_conv_silu's parts): the conv writes them in their own rows.
  std::array<RowPart, 3> conv_parts(float* q, float* k, float* v, int64_t row) const;
  // q and k rows as the delta rule takes them: L2-normalised, q scaled.
  void normalise_keys(float* q, float* k, int64_t rows) const;
  // Keeps the sequence's recurrent state of this layer if a capture falls
  // at end_pos; next indexes seq.capture and moves past end_pos.
  void capture_recurrent(const LayerWeights& w, SequenceRows& seq, int64_t end_pos, size_t* next) const;
  // The delta rule of one segment [s, e) of a prefill with a carry: a
  // segment that starts inside a chunk recomputes the chunk from its start
  // (carry.layers), and one that ends inside it leaves the chunk open there.
  void delta_rule_with_carry(const LayerWeights& w, SequenceRows& seq, int64_t s, int64_t e, const float* q,
                             const float* k, const float* v, const float* g, const float* beta, float* ssm,
                             float* o) const;
  void ffn_layer(const FfnWeights& w, const float* xn, int64_t rows, float* out) const;
  // The tiled input projections of xn's T rows, written in the untiled
  // layout delta_net_layer works in.
  void project_tiled(const DeltaNetWeights& dw, const float* xn, int64_t T, float* mixed, float* z, float* b,
                     float* a) const;
  // Qwen3-Next's in_proj_ba output, grouped per key head, to b and a [rows, n_v].
  void split_ba(const float* ba, int64_t rows, float* b, float* a) const;
  // x [rows, n_v * width], value heads tiled (position c * n_k + j), to head
  // order (head j * r + c) at out, rows ld apart; and head order to tiled.
  void untile_heads(const float* x, int64_t rows, int64_t width, float* out, int64_t ld) const;
  void tile_heads(const float* x, int64_t rows, int64_t width, float* out) const;

  // A weight for the kernels; prepared (packed) unless matmul is false.
  WeightRef ref(const MatrixView& m, bool matmul = true);
  WeightRef ref(const TensorView& t, bool matmul = true);
  // The layer tensors `names` as one fused product.
  FusedWeight fused(int64_t layer, std::initializer_list<const char*> names);
  void bind_delta_net(int64_t layer, DeltaNetWeights* d);
  // Qwen3.5's input projections as a tiled file holds them, with no copy.
  FusedWeight tiled_in_proj(int64_t layer);
  WeightRef delta_net_out(int64_t layer, bool* tile_input);
  std::vector<float> floats(const TensorView& t) const;

  // The MTP head (model/mtp_head.cpp): its weights and the schema of a
  // draft's keys and values (components 0 and 1, layer's comp_k and comp_v).
  struct MtpHead {
    WeightRef fc;  // [hidden, 2 * hidden] over [embedding ; hidden]
    std::vector<float> norm_embed, norm_hidden, norm;
    // qwen4exp (docs/model-spec.md 7.7): fc's two halves apart, fc_hidden
    // shared by the streams, and the head's mixer in place of norm.
    WeightRef fc_embedding, fc_hidden;
    MixerWeights head_mix;
    bool streams = false;
    // Floats of the hidden row a pair reads: hidden, or all hc_count streams.
    int64_t width = 0;
    LayerWeights layer;
    StateSchema schema;
    // The same layer writing the model's State (its comp_k and comp_v are
    // mtp.k and mtp.v there), and mtp.hidden's index and recurrent ordinal.
    LayerWeights state_layer;
    int comp_hidden = -1, rec_hidden = -1;
    WeightRef lm_head;  // the model's LM head, its first `vocab` rows
    int64_t vocab = 0;
  };
  // Binds the head when the config names one and its tensors are there,
  // drafting over ids [0, draft_vocab) (RuntimeOptions::mtp_draft_vocab).
  Status bind_mtp(int64_t draft_vocab);
  // The head's decoder layer from its tensors `t` (mtp_tensors() names).
  void bind_mtp_layer(const std::map<std::string, const TensorView*>& t, LayerWeights* w);
  void bind_mtp_ffn(const std::map<std::string, const TensorView*>& t, FfnWeights* f);
  // qwen4exp's head (model/qwen4exp_mtp.cpp): its projections, QSA layer and mixers.
  void bind_qwen4exp_mtp(const std::map<std::string, const TensorView*>& t, MtpHead* m);
  // The head's input streams x [n, hc_count * hidden] from tokens and the
  // trunk's (or the last depth's) streams before the output mixer.
  void qwen4exp_mtp_input(std::span<const int32_t> tokens, const float* hidden, int64_t n, float* x) const;
  // qwen4exp's head over a draft's rows (Model::mtp_forward's work).
  void qwen4exp_mtp_rows(ForwardCall& call, const MtpStep& step, MtpOutput* out) const;
  // The head's keys of a forward call's rows from their input streams.
  void qwen4exp_mtp_keys(ForwardCall& call, std::span<const int32_t> tokens, const float* prev) const;
  Status check_mtp_step(const MtpStep& step) const;
  // Adds the head's components to the model's schema (Model::has_mtp).
  void add_mtp_schema();
  // fc([norm_e(embed(tokens)) ; norm_h(hidden)]) for n rows into x [n, hidden].
  void mtp_input(std::span<const int32_t> tokens, const float* hidden, int64_t n, float* x) const;
  // The head's rows of a forward call (after the model's layers, over x): the
  // keys and values of every row, the carried row and its snapshots.
  // x: the layers' output rows, or qwen4exp's streams (run_layers).
  void mtp_state_rows(std::span<const SequenceStep> batch, ForwardCall& call, const std::vector<float>& x) const;
  // Each row's predecessor hidden row (mtp_->width floats) for the head: the
  // row above in its sequence, the State's carried row for a sequence's first row.
  void mtp_previous_rows(const ForwardCall& call, const float* normed, float* prev) const;

  ModelConfig config_;
  StateSchema schema_;
  FingerprintFields fingerprint_fields_;
  std::string fingerprint_;
  std::unique_ptr<Checkpoint> checkpoint_;
  WeightSet weights_;
  // f16 tensors widened to f32, an unquantized tiled out_proj's columns put in order
  std::vector<std::shared_ptr<const void>> owned_;
  WeightRef embed_, lm_head_;
  std::vector<float> final_norm_;
  MixerWeights head_mix_;  // qwen4exp, in place of the final norm
  std::vector<LayerWeights> layers_;
  std::unique_ptr<Kernels> kernels_;
  std::unique_ptr<MtpHead> mtp_;
};

}  // namespace sb
