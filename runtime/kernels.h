// Kernels: the backend boundary. Every arithmetic operation of the forward
// pass goes through this interface; the model code owns no math loops. The
// CPU implementation is runtime/cpu/; a CUDA one can follow behind the same
// calls.
//
// The promise every implementation keeps (split and batch invariance): each
// output element is computed by one fixed sequence of floating-point
// operations that depends only on that element's own inputs — never on how
// many rows a call has, how rows are tiled, or how many threads run.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/sampling.h"
#include "runtime/state.h"

namespace sb {

// The arithmetic of every matrix product (docs/kernels.md):
//  kF32:  fp32 inputs and weights (bf16 weights widened exactly), fp32 fused
//         multiply-adds.
//  kBF16: each input row rounded once to bf16 (round to nearest even,
//         subnormals to signed zero), weights rounded to bf16, products summed
//         in fp32 with the semantics of AVX512_BF16's vdpbf16ps (per pair: the
//         odd product, then the even one, each an fp32 fused multiply-add with
//         subnormal inputs read as zero and subnormal results flushed).
// Everything else (norms, RoPE, softmax, the delta rule) runs in fp32 under
// both.
enum class Precision : uint8_t { kF32 = 1, kBF16 = 2 };
const char* precision_name(Precision p);
Status parse_precision(std::string_view text, Precision* out);

// A kernel's private copy of a weight in the layout it streams best, made
// once at load by Kernels::prepare (defined by each backend).
struct PackedWeight;

// A weight matrix [rows = out features, cols = in features], row-major, as
// stored in safetensors. data points into the mmapped file: f32 or bf16
// elements, or rows of GGML blocks (runtime/quant.h; cols whole blocks), whose
// products run on quantized activations under quant_dot_ref's arithmetic
// whatever the Precision.
struct WeightRef {
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  // Set by Kernels::prepare; a matmul reads it instead of data when present.
  std::shared_ptr<const PackedWeight> packed;
};

// Inputs of the gated delta rule for one span of tokens (one chunk in
// prefill, one token in decode). Layouts: q, k [t, n_k, d_k] (already
// L2-normalised, q scaled); v [t, n_v, d_v]; g, beta [t, n_v].
// Weights that read the same input, prepared together (Kernels::fuse): one
// matmul over them reads the input once and runs one parallel region. Each
// part's output is bit for bit what a matmul of that part alone gives.
struct FusedWeight {
  std::vector<WeightRef> parts;
  std::shared_ptr<const PackedWeight> packed;  // every part, when the kernels pack
};

// Scalar functions applied element by element (one definition, so every
// layer rounds them the same way): sigmoid(x) = 1 / (1 + e^-x),
// silu(x) = x / (1 + e^-x), e^x as the CPU kernels' vexp (runtime/cpu/simd.h).
enum class Activation : uint8_t { kIdentity, kSigmoid, kSilu };

struct DeltaRuleInput {
  int64_t tokens = 0;
  int64_t n_k = 0, n_v = 0, d_k = 0, d_v = 0;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* g = nullptr;
  const float* beta = nullptr;
  // A chunk given in parts (a prefill split off the grid), chunked form
  // only: rows [0, first) came in earlier calls of the same chunk, and q, k,
  // v, g, beta hold every row [0, tokens) again. The calls share `parts`
  // (delta_rule_parts_floats floats, the caller's, untouched between them),
  // where each keeps its rows' working values for the next, and each gets
  // the chunk's start state. A call writes out rows [first, tokens) only (out
  // row 0 is row first) and leaves the state at row tokens: the bits a whole
  // chunk of `tokens` rows gives, at the cost of the new rows (and the state).
  int64_t first = 0;
  float* parts = nullptr;
  // Recurrent forms, optional: each row's rank-one update vector u [tokens,
  // n_v, d_v] written here (the row's state is alpha S + k u^T, each element
  // one fma on its decayed value), what delta_rule_replay() redoes the
  // state's update from.
  float* updates = nullptr;
  // Chunked form: row 0's place in its chunk of the absolute grid (its
  // position mod kDeltaChunkRows). A call runs rows [0, tokens) as the
  // chunks they fall in, each head through them in turn, the bits of one
  // call per chunk (one parallel region for all, where a call per chunk
  // was one each). With parts, one chunk and phase 0.
  int64_t phase = 0;
};

// The chunked form's largest chunk, and the size of `parts` for it.
constexpr int64_t kDeltaChunkRows = 64;
inline int64_t delta_rule_parts_floats(int64_t n_v, int64_t d_v) {
  return n_v * kDeltaChunkRows * (kDeltaChunkRows + d_v);
}

struct AttentionInput {
  int64_t rows = 0;      // query rows
  int64_t first_pos = 0; // absolute position of query row 0; row i sees keys [0, first_pos + i]
  int64_t n_heads = 0, n_kv = 0, head_dim = 0;
  const float* q = nullptr;  // [rows, n_heads, head_dim]
  // The cached keys and values [first_pos + rows, n_kv, head_dim] in
  // kv_dtype: f32, or bf16 (the State's storage under the bf16 precision),
  // widened exactly when read, so bf16 rows give the bits f32 rows holding
  // the same values give.
  const void* k = nullptr;
  const void* v = nullptr;
  float scale = 1.0f;
  DType kv_dtype = DType::kF32;
  // Optional sparse selection: key tau is visible to row i only if
  // block_mask[i * mask_stride + tau / mask_block] != 0 (causality still holds).
  const uint8_t* block_mask = nullptr;
  int64_t mask_stride = 0;
  int64_t mask_block = 1;
};

// One part of each group of a row for Kernels::split_rows (and of the
// output channels for Kernels::causal_conv_silu): `width` floats
// written to out + r * ld + g * width for row r, group g.
struct RowPart {
  int64_t width = 0;
  float* out = nullptr;
  int64_t ld = 0;
};

// Inputs of the indexed sparse attention's block mask for one sequence's
// rows (docs/qsa.md): row r is at position first_pos + r; q [rows, heads,
// dim] and w [rows, heads] are the indexer's query and head weights (RoPE
// applied), pooled [closed blocks, dim] the sequence's pooled keys, `block`
// tokens each.
struct BlockMaskInput {
  int64_t rows = 0, first_pos = 0;
  int64_t heads = 0, dim = 0;
  const float* q = nullptr;
  const float* w = nullptr;
  const float* pooled = nullptr;
  int64_t block = 1;
  int64_t top_k = 0;
  float s_scale = 1.0f;
  // ceil((first_pos + rows) / block): the mask's row length.
  int64_t stride() const { return (first_pos + rows + block - 1) / block; }
};

class Kernels {
 public:
  virtual ~Kernels() = default;
  // The backend, its precision and the instruction set its products run on,
  // e.g. "cpu/bf16/avx512bf16". Part of the model fingerprint: a bank
  // written under one name is never read under another.
  virtual const std::string& name() const = 0;
  virtual Precision precision() const = 0;

  // Returns w with a packed copy for matmul (w.data is kept: the embedding
  // table is also read row by row). Speed only: a matmul gives the same bits
  // with a prepared weight as with the unprepared one.
  virtual WeightRef prepare(const WeightRef& w) = 0;
  // y[m, w.rows] = x[m, w.cols] · wᵀ in the kernels' precision.
  virtual void matmul(const float* x, int64_t m, const WeightRef& w, float* y) = 0;
  // REQUIRES: every part has the same cols; none prepared.
  virtual FusedWeight fuse(std::span<const WeightRef> parts) = 0;
  // outs[i][m, w.parts[i].rows] = x · w.parts[i]ᵀ.
  virtual void matmul(const float* x, int64_t m, const FusedWeight& w, std::span<float* const> outs) = 0;
  // One row through each weight: outs[i][ws[i].rows] = xs[i] · ws[i]ᵀ, each
  // the bits of matmul(xs[i], 1, ws[i], outs[i]) (a token's experts, whose
  // inputs differ, in one parallel region rather than one per expert).
  virtual void matmul_each(std::span<const float* const> xs, std::span<const WeightRef> ws,
                           std::span<float* const> outs) = 0;
  // ms[i] rows through each weight: outs[i][ms[i], ws[i].rows] = xs[i] ·
  // ws[i]ᵀ, each the bits of matmul(xs[i], ms[i], ws[i], outs[i]) (a
  // prefill's experts, each with the rows routed to it, in as few parallel
  // regions as the backend can). Where rows is not empty and rows[i] not
  // null, part i's row j is row rows[i][j] of xs[i] (rows of ws[i].cols
  // floats), read where it is: a prefill's experts take the routed rows of
  // the layer's input without a gathered copy of them.
  virtual void matmul_each(std::span<const float* const> xs, std::span<const int64_t* const> rows,
                           std::span<const int64_t> ms, std::span<const WeightRef> ws,
                           std::span<float* const> outs) = 0;
  // Per row of `dim`: y = x / sqrt(mean(x²) + eps) ⊙ (offset ? 1 + w : w). y may alias x.
  virtual void rms_norm(const float* x, int64_t rows, int64_t dim, const float* w, float eps, bool offset,
                        float* y) = 0;
  // Rotate-half RoPE on the first `rot` dims of every head vector of x
  // [rows, heads, head_dim]; row i is at position positions[i].
  virtual void rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, int64_t rot, const int64_t* positions,
                    double theta) = 0;
  // outs[i] [calls[i].rows, n_heads, head_dim]: causal softmax attention of
  // each call on its own keys, GQA by contiguous groups (one call per
  // sequence of a step). A row's bits do not depend on the other calls.
  virtual void attention(std::span<const AttentionInput> calls, float* const* outs) = 0;
  void attention(const AttentionInput& in, float* out) { attention(std::span<const AttentionInput>(&in, 1), &out); }
  // Causal depthwise conv over channels then SiLU. x [t, channels] holds
  // the rows of `sequences` sequences, t / sequences each, in order (one
  // sequence's prefill, or one decode row of each of several); sequence i's
  // state states[i] [kernel - 1, channels] holds its previous inputs and is
  // advanced. weight [kernel, channels] (tap-major, so that neighbouring
  // channels are one vector load), the last tap multiplies the current
  // token. A sequence's bits do not depend on the others in the call.
  // The output's channels go to `out`'s parts in order, part p's row s at
  // out[p].out + s * out[p].ld (the widths sum to channels): a prefill's
  // q, k and v each in its own rows, without a copy of the whole output.
  virtual void causal_conv_silu(const float* x, int64_t t, int64_t channels, const float* weight, int64_t kernel,
                                float* const* states, int64_t sequences, std::span<const RowPart> out) = 0;
  // The output as one array [t, channels].
  void causal_conv_silu(const float* x, int64_t t, int64_t channels, const float* weight, int64_t kernel,
                        float* const* states, int64_t sequences, float* out) {
    const RowPart whole{channels, out, channels};
    causal_conv_silu(x, t, channels, weight, kernel, states, sequences, std::span<const RowPart>(&whole, 1));
  }
  // Gated delta rule, states [n_v, d_k, d_v] advanced, out [t, n_v, d_v].
  // Chunked form (prefill): the chunks of the 64-token grid that rows
  // [0, t) of one sequence fall in (DeltaRuleInput::phase).
  // Recurrent form (decode): one token of each of t sequences, row i
  // advancing states[i] (distinct states); a row's bits do not depend on
  // the others in the call.
  virtual void delta_rule_chunk(const DeltaRuleInput& in, float* state, float* out) = 0;
  virtual void delta_rule_recurrent(const DeltaRuleInput& in, float* const* states, float* out) = 0;
  // Recurrent form over `in.tokens` consecutive rows of ONE sequence (a
  // verify step): row t reads the state row t - 1 wrote (row 0: from, left
  // as it was unless it is states[0]) and writes states[t]; states[t] may be
  // the state it reads (in place). The same bits as delta_rule_recurrent
  // called row by row: a verify step keeps every row's state without
  // copying it (model/model.h).
  virtual void delta_rule_rows(const DeltaRuleInput& in, const float* from, float* const* states, float* out) = 0;
  // The state delta_rule_rows leaves after rows [0, in.tokens), written into
  // `state` from `from` (they may be the same), bit for bit, without the
  // rows' products over the state: each element replays its decays and
  // rank-one updates from in.k, in.g and the `updates` the rows wrote
  // (DeltaRuleInput::updates; q, v and beta are not read). A rollback of a
  // verify step's rejected rows in one pass over the state (model/model.h).
  virtual void delta_rule_replay(const DeltaRuleInput& in, const float* updates, const float* from, float* state) = 0;

  // The small per-element and per-row steps between the big ones.
  // x[i] += y[i].
  virtual void add(float* x, const float* y, int64_t n) = 0;
  // x[i] *= act(gate[i]).
  virtual void mul_activation(float* x, const float* gate, int64_t n, Activation act) = 0;
  // out[r, :] += act(scale[r * scale_stride]) * y[r * ld_y, :] for r < rows
  // (product rounded, then the sum), out rows `dim` apart.
  virtual void add_scaled_rows(float* out, const float* y, int64_t ld_y, const float* scale, int64_t scale_stride,
                               int64_t rows, int64_t dim, Activation act) = 0;
  // Per row of `dim`: x = (x / sqrt(sum x² + 1e-6)) * scale.
  virtual void l2_normalise(float* x, int64_t rows, int64_t dim, float scale) = 0;
  // Gated DeltaNet gates of `rows` tokens x `heads` value heads:
  // beta = sigmoid(b), g = neg_exp_a[h] * softplus(a + dt_bias[h]) with
  // PyTorch's softplus (x itself above 20).
  virtual void delta_gates(const float* b, const float* a, int64_t rows, int64_t heads, const float* neg_exp_a,
                           const float* dt_bias, float* beta, float* g) = 0;
  // out = the mean of x's rows (summed in row order, then divided).
  virtual void mean_rows(const float* x, int64_t rows, int64_t dim, float* out) = 0;
  // Hyper-connections (qwen4exp; docs/model-spec.md section 7.3): rows of
  // `streams` residual streams of `dim`.
  // x [rows, groups, dim]: each group normed alone, group g by the weights
  // w + g * dim; the bits of rms_norm over that group.
  virtual void rms_norm_groups(const float* x, int64_t rows, int64_t groups, int64_t dim, const float* w, float eps,
                               bool offset, float* y) = 0;
  // x[i] = act(x[i] * scale).
  virtual void scale_activation(float* x, int64_t n, float scale, Activation act) = 0;
  // A layer's input from its mixer: out[r, :] = (sum over s < streams,
  // ascending from +0, of sigmoid(mix[r, s, :]) * normed[r, s, :], each
  // product rounded) / streams.
  virtual void hc_mix(const float* mix, const float* normed, int64_t rows, int64_t streams, int64_t dim,
                      float* out) = 0;
  // A layer's output y [rows, dim] into every stream:
  // h[r, s, :] += (2 * sigmoid(inject[r, s] / streams)) * y[r, :], the
  // product rounded, then the sum.
  virtual void hc_inject(float* h, const float* y, const float* inject, int64_t rows, int64_t streams,
                         int64_t dim) = 0;
  // qwen4exp's PLE layer (docs/model-spec.md section 7.3), rows of
  // `streams` streams of `dim`: per row and stream, t = dot(key, query) (as
  // rms_norm's sum of squares) * (1 / sqrt(dim)), g = sigmoid(sign(t) *
  // sqrt(max(|t|, 1e-6))), out[r, s, :] = g * value[r, :].
  virtual void ple_gate(const float* key, const float* query, const float* value, int64_t rows, int64_t streams,
                        int64_t dim, float* out) = 0;
  // causal_conv_silu of one sequence with taps `dilation` rows apart: out
  // row s = SiLU(sum over j < kernel, ascending fmas from +0, of weight[j] *
  // input row s - (kernel - 1 - j) * dilation); state [(kernel - 1) *
  // dilation, channels] holds the previous inputs and is advanced.
  virtual void causal_conv_silu_dilated(const float* x, int64_t t, int64_t channels, const float* weight,
                                        int64_t kernel, int64_t dilation, float* state, float* out) = 0;
  // MoE routing per row of `n_experts` router logits: softmax, the top_k
  // experts (ties to the lower index), their weights renormalised to sum 1
  // when asked. chosen and weights [rows, top_k].
  virtual void route(const float* logits, int64_t rows, int64_t n_experts, int64_t top_k, bool renormalise,
                     int64_t* chosen, float* weights) = 0;
  // The sparse indexer's score of each of `blocks` pooled keys [blocks, dim]
  // for one query row q [heads, dim] with head weights w [heads]:
  // s_scale * sum over heads of w_h * max(q_h . key, 0).
  virtual void index_scores(const float* q, const float* w, int64_t heads, int64_t dim, const float* pooled,
                            int64_t blocks, float s_scale, float* scores) = 0;
  // The indices of the k highest of n scores, highest first, ties to the
  // lower index.
  virtual void top_k(const float* scores, int64_t n, int64_t k, int64_t* out) = 0;
  // Per row of logits [rows, vocab]: logit_stats of the row
  // (runtime/sampling.h), the same bits.
  virtual void logit_stats(const float* logits, int64_t rows, int64_t vocab, LogitStats* out) = 0;
  // The blocks each row attends to under indexed sparse attention: mask
  // [in.rows, in.stride()], 1 for a block row r sees. Its closed blocks
  // ((pos + 1) / block of them) all while there are at most top_k, else the
  // top_k by index_scores (ties to the lower block), and its own open block.
  virtual void sparse_block_mask(const BlockMaskInput& in, uint8_t* mask) = 0;

  // Memory: copies between the steps above, no arithmetic (the bits of a
  // row are its source's), except weighted_sum_rows.
  // out[j, :] = x[rows[j], :] for j < n; rows of `dim` floats in both.
  virtual void gather_rows(const float* x, const int64_t* rows, int64_t n, int64_t dim, float* out) = 0;
  // out[rows[j], :] = y[j, :] for j < n. REQUIRES: rows distinct.
  virtual void scatter_rows(const float* y, const int64_t* rows, int64_t n, int64_t dim, float* out) = 0;
  // out[r, :] = sum over i < k of weights[r * k + i] * y[s, :], s = at[r *
  // k + i] (r * k + i where at is null), starting from +0, in ascending i,
  // each product rounded before its sum (the MoE combine of each row's top-k
  // expert outputs, in rank order; at: where a step's outputs lie in expert
  // order, read in place rather than scattered to their slots first).
  virtual void weighted_sum_rows(const float* y, const int64_t* at, const float* weights, int64_t rows, int64_t k,
                                 int64_t dim, float* out) = 0;
  // x [rows, groups, sum of the parts' widths]: group g of row r is split
  // into the parts in order, part p to parts[p].out + r * parts[p].ld +
  // g * parts[p].width (un-grouping a fused projection, splitting the conv
  // output into q, k, v, the attention gate from the query).
  virtual void split_rows(const float* x, int64_t rows, int64_t groups, std::span<const RowPart> parts) = 0;
  // out[j, :] = row tokens[j] of table [vocab, dim], widened to f32 (bf16
  // and f16 exactly, block-quantized rows as dequantize_row). REQUIRES: every token
  // in [0, table.rows).
  virtual void embed_rows(const WeightRef& table, std::span<const int32_t> tokens, float* out) = 0;
};

// The numerics of this build's kernels, named beside them in one place, both
// part of the model fingerprint:
//  version: the arithmetic of every kernel and of runtime/math.h (our own
//           e^x, log, sin, cos); bumped whenever any of their bits change,
//           so that banks written under other numerics are never restored;
//  isa:     the instruction set the kernels were compiled for ("avx512",
//           "avx2+fma", "scalar"), the one Kernels::name() ends in unless the
//           products run vdpbf16ps ("avx512bf16").
struct KernelNumerics {
  const char* version;
  const char* isa;
};
KernelNumerics kernel_numerics();

struct KernelOptions {
  Precision precision = Precision::kF32;
  // Threads of the kernels' own pool (a backend with no pool ignores it);
  // changes speed, never bits.
  int threads = 1;
  // How kBF16 multiplies: kAuto takes vdpbf16ps (AVX512_BF16) where present
  // and fp32 fused multiply-adds where that is faster (many rows on a CPU
  // whose fma units outrun its vdpbf16ps); the others force one of the two
  // for every row, for tests that prove they give the same bits.
  enum class Bf16Path { kAuto, kNative, kFma };
  Bf16Path bf16_path = Bf16Path::kAuto;
};

// Makes the kernels a model runs on, at load (Model::load). The CPU one is
// cpu_kernels_factory() (runtime/cpu/backend.h); a second backend is one
// more factory, and the model code stays as it is.
using KernelsFactory = std::function<std::unique_ptr<Kernels>(const KernelOptions&)>;

}  // namespace sb
