// The MTP head in the model: its tensors' binding, its rows in every forward
// step (its keys and values in the State) and its forward for drafts
// (Model::mtp_forward, mtp_sync). The decoder layer is the model's own code
// (Transformer::run_layer, attention_layer) over the head's components.
#include "model/mtp_head.h"

#include <algorithm>
#include <map>

#include "model/transformer.h"

namespace sb {
namespace {


// Rows [first, first + rows) of t seen as [numel / cols, cols].
MatrixView rows_of(const TensorView& t, int64_t first, int64_t rows, int64_t cols) {
  MatrixView m = as_matrix(t);
  m.rows = rows;
  m.cols = cols;
  m.row_offset = first;
  m.data = static_cast<const uint8_t*>(t.data) + first * dtype_row_bytes(t.dtype, cols);
  return m;
}

// mtp_tensors(c) with the routed experts in the layout the checkpoint holds
// them: a GGUF file's stacked experts come per expert whatever the family.
std::vector<TensorSpec> head_tensors(const ModelConfig& c, const Checkpoint& ck) {
  const std::string X = "mtp.layers.0.mlp.experts.";
  const bool per_expert = ck.find(X + "0.gate_proj.weight") != nullptr;
  const int64_t I = c.moe_intermediate_size, H = c.hidden_size;
  std::vector<TensorSpec> out;
  for (TensorSpec& s : mtp_tensors(c)) {
    if (per_expert && s.name == X + "gate_up_proj") continue;
    if (per_expert && s.name == X + "down_proj") {
      for (int64_t e = 0; e < c.n_experts; ++e) {
        const std::string E = X + std::to_string(e) + ".";
        out.push_back({E + "gate_proj.weight", {I, H}});
        out.push_back({E + "up_proj.weight", {I, H}});
        out.push_back({E + "down_proj.weight", {H, I}});
      }
      continue;
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

Status Transformer::bind_mtp(int64_t draft_vocab) {
  const ModelConfig& c = config_;
  // A config that names a head whose tensors were left out of the files
  // (stripped checkpoints, GGUF files converted without it) loads without one.
  if (c.mtp_layers == 0 || !checkpoint_->find(mtp_key_tensor(c))) return Status::ok();
  if (c.mtp_layers != 1)
    return Status::invalid("mtp_num_hidden_layers is " + std::to_string(c.mtp_layers) +
                           "; an MTP head of one layer is supported");
  std::map<std::string, const TensorView*> t;
  for (const TensorSpec& s : head_tensors(c, *checkpoint_)) {
    const TensorView* v = checkpoint_->find(s.name);
    if (!v)
      return Status::not_found("missing tensor " + s.name + " (shape " + shape_text(s.shape) + ") of the MTP head");
    if (v->shape != s.shape)
      return Status::invalid("tensor " + s.name + " in file " + v->file + " has shape " + shape_text(v->shape) +
                             ", expected " + shape_text(s.shape));
    t[s.name] = v;
  }
  auto mtp = std::make_unique<MtpHead>();
  LayerWeights& w = mtp->layer;
  mtp->norm_embed = floats(*t.at("mtp.pre_fc_norm_embedding.weight"));
  mtp->norm_hidden = floats(*t.at("mtp.pre_fc_norm_hidden.weight"));
  mtp->width = c.hidden_size;
  if (c.arch == Arch::kQwen4Exp) {
    bind_qwen4exp_mtp(t, mtp.get());
  } else {
    mtp->fc = ref(*t.at(kMtpFc));
    mtp->norm = floats(*t.at("mtp.norm.weight"));
    bind_mtp_layer(t, &w);
  }
  // Keys and values (and a QSA layer's indexer rows) in the dtype of the
  // model's own attention rows.
  const DType rows_dtype = kernels_->precision() == Precision::kBF16 ? DType::kBF16 : DType::kF32;
  const uint64_t kv = static_cast<uint64_t>(c.n_kv_heads * c.head_dim);
  mtp->schema.components = {{"mtp.k", ComponentKind::kSequence, 1, rows_dtype, kv},
                            {"mtp.v", ComponentKind::kSequence, 1, rows_dtype, kv}};
  w.comp_k = 0;
  w.comp_v = 1;
  if (w.type == LayerType::kSparseAttention) {
    const uint64_t dI = static_cast<uint64_t>(c.index_head_dim);
    mtp->schema.components.push_back({"mtp.index_raw", ComponentKind::kSequence, 1, rows_dtype, dI});
    mtp->schema.components.push_back({"mtp.index_pooled", ComponentKind::kPooled,
                                      static_cast<uint32_t>(c.index_compress_ratio), rows_dtype, dI});
    w.comp_index_raw = 2;
    w.comp_index_pooled = 3;
  }
  // The LM head's first rows, read in place (a tied head is the embedding).
  mtp->vocab = draft_vocab > 0 && draft_vocab < c.vocab_size ? draft_vocab : c.vocab_size;
  if (mtp->vocab == c.vocab_size) {
    mtp->lm_head = lm_head_;
  } else {
    WeightRef rows = c.tie_word_embeddings ? embed_ : ref(weights_.lm_head(), /*matmul=*/false);
    rows.rows = mtp->vocab;
    rows.packed = nullptr;
    mtp->lm_head = kernels_->prepare(rows);
  }
  mtp_ = std::move(mtp);
  add_mtp_schema();
  return Status::ok();
}

void Transformer::add_mtp_schema() {
  MtpHead& m = *mtp_;
  int recurrent = 0;
  for (const ComponentSpec& c : schema_.components) recurrent += c.kind == ComponentKind::kRecurrent;
  m.state_layer = m.layer;
  const int base = static_cast<int>(schema_.components.size());
  for (const ComponentSpec& spec : m.schema.components) schema_.components.push_back(spec);
  for (int* comp : {&m.state_layer.comp_k, &m.state_layer.comp_v, &m.state_layer.comp_index_raw,
                    &m.state_layer.comp_index_pooled})
    if (*comp >= 0) *comp += base;
  // The hidden row a position hands to the next one's pair: recurrent, so
  // the bank keeps it with each snapshot and a restored prefill goes on
  // from it.
  schema_.components.push_back({"mtp.hidden", ComponentKind::kRecurrent, 0, DType::kF32, static_cast<uint64_t>(m.width)});
  m.comp_hidden = static_cast<int>(schema_.components.size() - 1);
  m.rec_hidden = recurrent;
}

void Transformer::bind_mtp_layer(const std::map<std::string, const TensorView*>& t, LayerWeights* w) {
  const std::string L = "mtp.layers.0.", A = L + "self_attn.";
  w->type = LayerType::kFullAttention;
  w->input_norm = floats(*t.at(L + "input_layernorm.weight"));
  w->post_norm = floats(*t.at(L + "post_attention_layernorm.weight"));
  const WeightRef qkv[] = {ref(*t.at(A + "q_proj.weight"), false), ref(*t.at(A + "k_proj.weight"), false),
                           ref(*t.at(A + "v_proj.weight"), false)};
  w->attn.in = kernels_->fuse(qkv);
  w->attn.o = ref(*t.at(L + "self_attn.o_proj.weight"));
  w->attn.q_norm = floats(*t.at(L + "self_attn.q_norm.weight"));
  w->attn.k_norm = floats(*t.at(L + "self_attn.k_norm.weight"));
  bind_mtp_ffn(t, &w->ffn);
}

void Transformer::bind_mtp_ffn(const std::map<std::string, const TensorView*>& t, FfnWeights* ffn) {
  const ModelConfig& c = config_;
  const std::string L = "mtp.layers.0.";
  auto part = [&](const std::string& suffix) { return ref(*t.at(L + suffix), /*matmul=*/false); };
  auto fuse = [&](std::initializer_list<const char*> names) {
    std::vector<WeightRef> parts;
    for (const char* n : names) parts.push_back(part(n));
    return kernels_->fuse(parts);
  };
  FfnWeights& f = *ffn;
  f.moe = mtp_layer_config(c).layer_is_moe(0);
  if (!f.moe) {
    f.in = fuse({"mlp.gate_proj.weight", "mlp.up_proj.weight"});
    f.down = ref(*t.at(L + "mlp.down_proj.weight"));
  } else {
    f.shared_expert = c.shared_expert_intermediate_size > 0;
    if (f.shared_expert) {
      f.in = fuse({"mlp.gate.weight", "mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.up_proj.weight",
                   "mlp.shared_expert_gate.weight"});
      f.down = ref(*t.at(L + "mlp.shared_expert.down_proj.weight"));
    } else {
      f.in = fuse({"mlp.gate.weight"});
    }
    const int64_t I = c.moe_intermediate_size, H = c.hidden_size;
    const bool fused = t.count(L + "mlp.experts.gate_up_proj") > 0;
    for (int64_t e = 0; e < c.n_experts; ++e) {
      const std::string X = L + "mlp.experts." + std::to_string(e) + ".";
      const MatrixView gate = fused ? rows_of(*t.at(L + "mlp.experts.gate_up_proj"), e * 2 * I, I, H)
                                    : as_matrix(*t.at(X + "gate_proj.weight"));
      const MatrixView up = fused ? rows_of(*t.at(L + "mlp.experts.gate_up_proj"), e * 2 * I + I, I, H)
                                  : as_matrix(*t.at(X + "up_proj.weight"));
      const MatrixView down =
          fused ? rows_of(*t.at(L + "mlp.experts.down_proj"), e * H, H, I) : as_matrix(*t.at(X + "down_proj.weight"));
      const WeightRef gate_up[2] = {ref(gate, false), ref(up, false)};
      f.experts.push_back({kernels_->fuse(gate_up), ref(down)});
    }
  }
}

Status Transformer::check_mtp_step(const MtpStep& step) const {
  if (!mtp_) return Status::invalid("this checkpoint has no MTP head");
  if (step.kv == nullptr || !(step.kv->schema() == mtp_->schema))
    return Status::invalid("the MTP step's state was not made by new_mtp_state()");
  if (step.keep < 0 || static_cast<uint64_t>(step.keep) > step.kv->rows(0))
    return Status::invalid("the MTP step keeps " + std::to_string(step.keep) + " rows of a state of " +
                           std::to_string(step.kv->rows(0)));
  if (step.tokens.empty()) return Status::invalid("an MTP step needs at least one token");
  if (step.first_pos < 0) return Status::invalid("an MTP step's position is negative");
  if (step.hidden.size() != step.tokens.size() * static_cast<size_t>(mtp_->width))
    return Status::invalid("an MTP step needs one hidden row per token");
  for (int32_t token : step.tokens)
    if (token < 0 || token >= config_.vocab_size)
      return Status::invalid("MTP token id " + std::to_string(token) + " is outside the vocabulary");
  return Status::ok();
}

void Transformer::mtp_input(std::span<const int32_t> tokens, const float* hidden, int64_t n, float* x) const {
  const MtpHead& m = *mtp_;
  const int64_t H = config_.hidden_size;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const bool offset = config_.norm_weight_offset;
  Rows e(n * H), h(n * H), cat(n * 2 * H);
  kernels_->embed_rows(embed_, tokens, e.data());
  kernels_->rms_norm(e.data(), n, H, m.norm_embed.data(), eps, offset, e.data());
  kernels_->rms_norm(hidden, n, H, m.norm_hidden.data(), eps, offset, h.data());
  // fc's input row i is [e_i ; h_i]: as rows of H floats, e_i is row 2i and h_i row 2i + 1.
  std::vector<int64_t> even(n), odd(n);
  for (int64_t i = 0; i < n; ++i) {
    even[i] = 2 * i;
    odd[i] = 2 * i + 1;
  }
  kernels_->scatter_rows(e.data(), even.data(), n, H, cat.data());
  kernels_->scatter_rows(h.data(), odd.data(), n, H, cat.data());
  kernels_->matmul(cat.data(), n, m.fc, x);
}

Status Transformer::mtp_forward(const MtpStep& step, MtpOutput* out) const {
  SB_RETURN_IF_ERROR(check_mtp_step(step));
  const MtpHead& m = *mtp_;
  const int64_t H = config_.hidden_size, n = static_cast<int64_t>(step.tokens.size());
  State& kv = *step.kv;
  for (size_t c = 0; c < m.schema.components.size(); ++c) {
    const ComponentSpec& spec = m.schema.components[c];
    kv.storage(c).resize(static_cast<size_t>(spec.rows_at(step.keep) * spec.row_bytes()));
  }
  kv.set_position(step.keep);

  // The head's rows attend over its own keys: key row j is the j-th pair it
  // kept, at the position RoPE gave it; first_pos only places the rows.
  ForwardCall call;
  call.rows = n;
  for (int64_t i = 0; i < n; ++i) call.positions.push_back(step.first_pos + i);
  call.tokens.assign(step.tokens.begin(), step.tokens.end());
  SequenceRows seq;
  seq.state = &kv;
  seq.rows = n;
  seq.first_pos = step.keep;
  call.sequences.push_back(std::move(seq));
  if (m.streams) {
    qwen4exp_mtp_rows(call, step, out);
    kv.set_position(step.keep + n);
    return Status::ok();
  }
  std::vector<float> x(n * H);
  mtp_input(step.tokens, step.hidden.data(), n, x.data());
  Rows xn(n * H), y(n * H);
  run_layer(m.layer, call, x.data(), xn.data(), y.data());
  kv.set_position(step.keep + n);

  const float eps = static_cast<float>(config_.rms_norm_eps);
  out->hidden.resize(H);
  kernels_->rms_norm(x.data() + (n - 1) * H, 1, H, m.norm.data(), eps, config_.norm_weight_offset, out->hidden.data());
  out->logits.resize(m.vocab);
  kernels_->matmul(out->hidden.data(), 1, m.lm_head, out->logits.data());
  kernels_->logit_stats(out->logits.data(), 1, m.vocab, &out->stats);
  return Status::ok();
}

void Transformer::mtp_previous_rows(const ForwardCall& call, const float* normed, float* prev) const {
  const int64_t H = mtp_->width, S = static_cast<int64_t>(call.sequences.size());
  std::vector<int64_t> from, to, firsts;
  std::vector<float> carried(S * H);
  for (int64_t i = 0; i < S; ++i) {
    const SequenceRows& seq = call.sequences[i];
    firsts.push_back(seq.first_row);
    seq.state->read_rows(mtp_->comp_hidden, 0, 1, carried.data() + i * H);
    for (int64_t r = seq.first_row + 1; r < seq.first_row + seq.rows; ++r) {
      from.push_back(r - 1);
      to.push_back(r);
    }
  }
  const int64_t moved = static_cast<int64_t>(from.size());
  if (moved > 0) {
    Rows rows(moved * H);
    kernels_->gather_rows(normed, from.data(), moved, H, rows.data());
    kernels_->scatter_rows(rows.data(), to.data(), moved, H, prev);
  }
  kernels_->scatter_rows(carried.data(), firsts.data(), S, H, prev);
}

void Transformer::mtp_state_rows(std::span<const SequenceStep> batch, ForwardCall& call,
                                 const std::vector<float>& x) const {
  const MtpHead& m = *mtp_;
  const int64_t H = config_.hidden_size, W = m.width, T = call.rows;
  // Each row's hidden row as the head pairs it: final-normed, as the LM head
  // reads it, or qwen4exp's streams before the output mixer.
  Rows normed, prev(T * W);
  if (!m.streams) {
    normed = Rows(T * H);
    kernels_->rms_norm(x.data(), T, H, final_norm_.data(), static_cast<float>(config_.rms_norm_eps),
                       config_.norm_weight_offset, normed.data());
  }
  const float* rows = m.streams ? x.data() : normed.data();
  mtp_previous_rows(call, rows, prev.data());
  std::vector<int32_t> tokens;
  tokens.reserve(static_cast<size_t>(T));
  for (const SequenceStep& step : batch) tokens.insert(tokens.end(), step.tokens.begin(), step.tokens.end());
  if (m.streams) {
    qwen4exp_mtp_keys(call, tokens, prev.data());
  } else {
    Rows hx(T * H), xn(T * H);
    mtp_input(tokens, prev.data(), T, hx.data());
    // Only the keys and values are kept (the rows' outputs would draft tokens
    // the model itself has already predicted), so the layer stops there: its
    // attention, output projection and FFN would cost a whole layer per row.
    kernels_->rms_norm(hx.data(), T, H, m.state_layer.input_norm.data(), static_cast<float>(config_.rms_norm_eps),
                       config_.norm_weight_offset, xn.data());
    attention_layer(m.state_layer, call, xn.data(), nullptr, /*keys_only=*/true);
  }
  auto row = [&](int64_t r) { return std::span<const float>(rows + r * W, static_cast<size_t>(W)); };
  for (SequenceRows& seq : call.sequences) {
    seq.state->set_recurrent(m.comp_hidden, row(seq.first_row + seq.rows - 1));
    for (RecurrentSnapshot& snap : *seq.snapshots) {
      const std::span<const float> h = row(seq.first_row + snap.position - 1 - seq.first_pos);
      snap.parts[m.rec_hidden].assign(h.begin(), h.end());
    }
    if (!seq.rollback) continue;
    for (size_t i = 0; i < seq.rollback->rows.size(); ++i) {
      const std::span<const float> h = row(seq.first_row + static_cast<int64_t>(i));
      seq.rollback->rows[i].parts[m.rec_hidden].assign(h.begin(), h.end());
    }
  }
}

Status Transformer::mtp_sync(const State& state, int64_t valid, State* kv, std::vector<float>* hidden) const {
  if (!mtp_) return Status::invalid("this checkpoint has no MTP head");
  if (!(state.schema() == schema_)) return Status::invalid("state was made for another model");
  if (kv == nullptr || !(kv->schema() == mtp_->schema))
    return Status::invalid("the MTP state was not made by new_mtp_state()");
  const int64_t n = state.position();
  const int64_t keep = std::clamp<int64_t>(valid, 0, std::min<int64_t>(n, static_cast<int64_t>(kv->rows(0))));
  // The head's components sit in the model's schema in the same order, after mtp.k.
  const size_t first = static_cast<size_t>(mtp_->state_layer.comp_k);
  for (size_t c = 0; c < mtp_->schema.components.size(); ++c) {
    const ComponentSpec& spec = mtp_->schema.components[c];
    const size_t kept = static_cast<size_t>(spec.rows_at(keep) * spec.row_bytes());
    const std::span<const uint8_t> from = state.bytes(first + c);
    kv->storage(c).resize(kept);
    kv->append_bytes(c, from.subspan(kept));
  }
  kv->set_position(n);
  hidden->resize(static_cast<size_t>(mtp_->width));
  state.read_rows(static_cast<size_t>(mtp_->comp_hidden), 0, 1, hidden->data());
  return Status::ok();
}

}  // namespace sb
