#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "model/gguf_layout.h"
#include "model/gguf_model.h"
#include "fs/mapped_file.h"
#include "runtime/math.h"

namespace sb {

Status Model::load(const std::string& dir, const RuntimeOptions& options, const KernelsFactory& kernels,
                   std::unique_ptr<Model>* out) {
  return Transformer::create(dir, options, kernels, out);
}

Status Transformer::create(const std::string& dir, const RuntimeOptions& options, const KernelsFactory& kernels,
                           std::unique_ptr<Model>* out) {
  if (!kernels) return Status::invalid("no kernels to load the model onto");
  std::unique_ptr<Transformer> m(new Transformer());
  if (is_gguf_path(dir)) {
    GgufModel g;
    SB_RETURN_IF_ERROR(open_gguf_model(dir, &g));
    m->config_ = std::move(g.config);
    m->checkpoint_ = std::move(g.checkpoint);
  } else {
    SB_RETURN_IF_ERROR(parse_config(dir, &m->config_));
    SB_RETURN_IF_ERROR(Checkpoint::open(dir, &m->checkpoint_));
  }
  SB_RETURN_IF_ERROR(WeightSet::bind(*m->checkpoint_, m->config_, &m->weights_));
  KernelOptions ko;
  ko.threads = options.threads;
  ko.precision = options.precision.value_or(m->weights_.embed().dtype == DType::kBF16 ? Precision::kBF16
                                                                                        : Precision::kF32);
  m->kernels_ = kernels(ko);
  if (!m->kernels_) return Status::invalid("the kernels factory made no kernels");
  SB_RETURN_IF_ERROR(m->bind_weights());
  m->build_schema();
  if (options.mtp_head) SB_RETURN_IF_ERROR(m->bind_mtp(options.mtp_draft_vocab));

  FingerprintFields& f = m->fingerprint_fields_;
  // The numerics version and instruction set live beside the kernels
  // (runtime/kernels.h): bumped there whenever any kernel's bits change.
  f.numerics_version = kernel_numerics().version;
  f.kernel_variant = m->kernels_->name();
  f.isa = kernel_numerics().isa;
  f.precision = precision_name(ko.precision);  // what the kernels compute in
  f.config = m->config_.describe();
  f.state_schema = m->schema_.describe();
  f.weights_digest = m->checkpoint_->weights_digest();
  for (const auto& [name, t] : m->checkpoint_->tensors()) f.tensor_dtypes += name + ":" + dtype_name(t.dtype) + ";";
  m->fingerprint_ = model_fingerprint(f);
  *out = std::move(m);
  return Status::ok();
}

namespace {

// A weight the kernels hold a packed copy of is read from that copy only, so
// its file pages are dropped: the process stays near the file's size rather
// than twice it. A no-op for bytes that are not a file's mapping.
void release_source(const WeightRef& w) {
  const int64_t row_bytes = dtype_is_quantized(w.dtype) ? dtype_row_bytes(w.dtype, w.cols)
                                                        : w.cols * static_cast<int64_t>(dtype_size(w.dtype));
  release_mapped_pages(w.data, static_cast<uint64_t>(w.rows * row_bytes));
}

FusedWeight fuse_releasing(Kernels& kernels, std::span<const WeightRef> parts) {
  FusedWeight f = kernels.fuse(parts);
  for (size_t i = 0; i < parts.size(); ++i)
    if (f.packed || f.parts[i].packed) release_source(parts[i]);
  return f;
}

// Rows [first, first + rows) of w, in place.
WeightRef row_range(const WeightRef& w, int64_t first, int64_t rows) {
  const int64_t row_bytes = dtype_is_quantized(w.dtype) ? dtype_row_bytes(w.dtype, w.cols)
                                                        : w.cols * static_cast<int64_t>(dtype_size(w.dtype));
  WeightRef r = w;
  r.rows = rows;
  r.data = static_cast<const uint8_t*>(w.data) + first * row_bytes;
  return r;
}

}  // namespace

WeightRef Transformer::ref(const MatrixView& m, bool matmul) {
  WeightRef r{m.dtype, m.rows, m.cols, m.data, nullptr};
  if (m.dtype == DType::kF16) {
    auto wide = std::make_shared<std::vector<float>>(m.rows * m.cols);
    convert_to_f32(DType::kF16, m.data, m.rows * m.cols, wide->data());
    r = WeightRef{DType::kF32, m.rows, m.cols, wide->data(), nullptr};
    owned_.push_back(std::move(wide));
  }
  if (!matmul) return r;
  WeightRef prepared = kernels_->prepare(r);
  if (prepared.packed) release_source(r);
  return prepared;
}

WeightRef Transformer::ref(const TensorView& t, bool matmul) { return ref(as_matrix(t), matmul); }

std::vector<float> Transformer::floats(const TensorView& t) const {
  std::vector<float> v(t.numel());
  convert_to_f32(t.dtype, t.data, t.numel(), v.data());
  return v;
}

// qwen4exp's mixers (model/qwen4exp_layer.cpp); here for fuse_releasing.
MixerWeights Transformer::bind_mixer(const std::string& prefix, bool inject) {
  return bind_mixer([&](const std::string& name) -> const TensorView& { return weights_.get(name); }, prefix, inject);
}

MixerWeights Transformer::bind_mixer(const TensorGetter& get, const std::string& prefix, bool inject) {
  MixerWeights m;
  m.norm = floats(get(prefix + "hc_norm.weight"));
  std::vector<WeightRef> parts = {ref(get(prefix + "input_mix_weight_down.weight"), /*matmul=*/false)};
  if (inject) parts.push_back(ref(get(prefix + "block_inject_weight.weight"), /*matmul=*/false));
  m.down = fuse_releasing(*kernels_, parts);
  m.up = ref(get(prefix + "input_mix_weight_up.weight"));
  m.inject = inject;
  return m;
}

FusedWeight Transformer::qwen4exp_qsa_in(const TensorGetter& get) {
  // A checkpoint holds the indexer's query heads and key as one projection
  // (heads first); a GGUF file as two (ModelConfig::index_qk_split).
  WeightRef index_k, index_q;
  if (config_.index_qk_split) {
    index_k = ref(get("indexer.index_k_proj.weight"), /*matmul=*/false);
    index_q = ref(get("indexer.index_q_proj.weight"), /*matmul=*/false);
  } else {
    const int64_t q_rows = config_.index_n_heads * config_.index_head_dim;
    const WeightRef heads = ref(get("indexer.index_qk_proj.weight"), /*matmul=*/false);
    index_k = row_range(heads, q_rows, config_.index_head_dim);
    index_q = row_range(heads, 0, q_rows);
  }
  const WeightRef parts[] = {ref(get("q_proj.weight"), false), ref(get("k_proj.weight"), false),
                             ref(get("v_proj.weight"), false), index_k, index_q};
  return fuse_releasing(*kernels_, parts);
}

FusedWeight Transformer::fused(int64_t layer, std::initializer_list<const char*> names) {
  std::vector<WeightRef> parts;
  for (const char* n : names) parts.push_back(ref(weights_.layer(layer, n), /*matmul=*/false));
  return fuse_releasing(*kernels_, parts);
}

Status Transformer::bind_weights() {
  const ModelConfig& c = config_;
  embed_ = ref(weights_.embed(), /*matmul=*/false);
  if (c.tie_word_embeddings) {
    // The lookup reads the table's rows of the tokens it meets, which come
    // back from the file one page each; the head reads its packed copy.
    lm_head_ = kernels_->prepare(embed_);
    if (lm_head_.packed) release_source(embed_);
  } else {
    lm_head_ = ref(weights_.lm_head());
  }
  const bool q4 = c.arch == Arch::kQwen4Exp;
  if (q4) head_mix_ = bind_mixer(c.tensor_prefix + "hyper_connection_mixer.", false);
  else final_norm_ = floats(weights_.final_norm());
  layers_.resize(c.n_layers);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    LayerWeights& w = layers_[l];
    w.type = c.layer_types[l];
    if (q4) {
      SB_RETURN_IF_ERROR(bind_qwen4exp_layer(l, &w));
    } else {
      w.input_norm = floats(weights_.layer(l, "input_layernorm.weight"));
      w.post_norm = floats(weights_.layer(l, "post_attention_layernorm.weight"));
    }
    if (w.type == LayerType::kLinearAttention) {
      bind_delta_net(l, &w.delta);
    } else {
      AttentionWeights& a = w.attn;
      if (w.type == LayerType::kSparseAttention)  // only qwen4exp has QSA layers
        a.in = qwen4exp_qsa_in([&](const std::string& name) -> const TensorView& {
          return weights_.layer(l, "self_attn." + name);
        });
      else
        a.in = fused(l, {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"});
      a.o = ref(weights_.layer(l, "self_attn.o_proj.weight"));
      a.q_norm = floats(weights_.layer(l, "self_attn.q_norm.weight"));
      a.k_norm = floats(weights_.layer(l, "self_attn.k_norm.weight"));
      if (w.type == LayerType::kSparseAttention) {
        a.index_k_norm = floats(weights_.layer(l, "self_attn.indexer.k_layernorm.weight"));
        a.index_q_norm = floats(weights_.layer(l, "self_attn.indexer.q_layernorm.weight"));
      }
    }
    FfnWeights& f = w.ffn;
    f.moe = c.layer_is_moe(l);
    if (f.moe) {
      f.shared_expert = c.shared_expert_intermediate_size > 0;
      if (f.shared_expert) {
        f.in = fused(l, {"mlp.gate.weight", "mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.up_proj.weight",
                         "mlp.shared_expert_gate.weight"});
        f.down = ref(weights_.layer(l, "mlp.shared_expert.down_proj.weight"));
      } else {
        f.in = fused(l, {"mlp.gate.weight"});
      }
      for (int64_t e = 0; e < c.n_experts; ++e) {
        const ExpertWeights& ew = weights_.expert(l, e);
        const WeightRef gate_up[2] = {ref(ew.gate, false), ref(ew.up, false)};
        f.experts.push_back({fuse_releasing(*kernels_, gate_up), ref(ew.down)});
      }
    } else {
      f.in = fused(l, {"mlp.gate_proj.weight", "mlp.up_proj.weight"});
      f.down = ref(weights_.layer(l, "mlp.down_proj.weight"));
    }
  }
  return Status::ok();
}

namespace {

// Units of `width` floats: out unit i = v's unit map[i].
std::vector<float> permuted(const std::vector<float>& v, const UnitMap& map, int64_t width) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < map.size(); ++i)
    std::copy_n(v.begin() + map[i] * width, width, out.begin() + static_cast<int64_t>(i) * width);
  return out;
}

// Whether the value heads lie tiled in the weights (ModelConfig::
// value_heads_tiled) in an order other than their own: with one value head
// per key head (the 0.8b preset's 16 and 16) the tiled order is the heads'
// order, and putting them in order would copy each prefill row's 8224
// projected floats and 2048 of out's input for nothing.
bool heads_out_of_order(const ModelConfig& c) {
  return c.value_heads_tiled && c.lin_n_value_heads != c.lin_n_key_heads;
}

}  // namespace

void Transformer::bind_delta_net(int64_t l, DeltaNetWeights* d) {
  const ModelConfig& c = config_;
  auto t = [&](const char* name) -> const TensorView& { return weights_.layer(l, std::string("linear_attn.") + name); };
  d->grouped = !(c.arch == Arch::kQwen35 || c.arch == Arch::kQwen35Moe || c.arch == Arch::kQwen4Exp);
  d->qkvz_split = d->grouped && c.qkvz_split;
  d->tiled = heads_out_of_order(c);
  if (d->qkvz_split)
    d->in =
        fused(l, {"linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight", "linear_attn.in_proj_ba.weight"});
  else if (d->grouped)
    d->in = fused(l, {"linear_attn.in_proj_qkvz.weight", "linear_attn.in_proj_ba.weight"});
  else if (d->tiled)
    d->in = tiled_in_proj(l);
  else
    d->in = fused(l, {"linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight", "linear_attn.in_proj_b.weight",
                      "linear_attn.in_proj_a.weight"});
  std::vector<float> conv = floats(t("conv1d.weight"));
  d->dt_bias = floats(t("dt_bias"));
  d->neg_exp_a_log = floats(t(c.a_stored_negated ? "A" : "A_log"));
  const int64_t K = c.conv_kernel, channels = static_cast<int64_t>(conv.size()) / K;
  if (d->tiled) {
    // Small tensors read once: put in head order here, as the layer works.
    const UnitMap heads = inverse(tiled_value_heads(c));
    conv = permuted(conv, inverse(qkv_tiled_rows(c)), K);
    d->dt_bias = permuted(d->dt_bias, heads, 1);
    d->neg_exp_a_log = permuted(d->neg_exp_a_log, heads, 1);
  }
  if (!c.a_stored_negated)
    for (float& a : d->neg_exp_a_log) a = neg_exp_a_log(a);
  // The checkpoint holds [conv_dim, 1, kernel]; transposed once here rather
  // than by the kernel on every call (a decode step calls it per sequence).
  d->conv.resize(conv.size());
  for (int64_t ch = 0; ch < channels; ++ch)
    for (int64_t j = 0; j < K; ++j) d->conv[j * channels + ch] = conv[ch * K + j];
  d->norm = floats(t("norm.weight"));
  d->out = delta_net_out(l, &d->tile_out_input);
}

FusedWeight Transformer::tiled_in_proj(int64_t l) {
  const ModelConfig& c = config_;
  const WeightRef qkv = ref(weights_.layer(l, "linear_attn.in_proj_qkv.weight"), /*matmul=*/false);
  const int64_t key_rows = 2 * c.lin_n_key_heads * c.lin_key_head_dim;
  const WeightRef parts[] = {row_range(qkv, 0, key_rows), row_range(qkv, key_rows, qkv.rows - key_rows),
                             ref(weights_.layer(l, "linear_attn.in_proj_z.weight"), false),
                             ref(weights_.layer(l, "linear_attn.in_proj_b.weight"), false),
                             ref(weights_.layer(l, "linear_attn.in_proj_a.weight"), false)};
  return fuse_releasing(*kernels_, parts);
}

WeightRef Transformer::delta_net_out(int64_t l, bool* tile_input) {
  const ModelConfig& c = config_;
  const TensorView& t = weights_.layer(l, "linear_attn.out_proj.weight");
  // A quantized one is used as it lies (a value head need not be whole
  // blocks, so its columns cannot move): its input is tiled instead, and the
  // products sum in the file's column order, as llama.cpp's do.
  *tile_input = heads_out_of_order(c) && dtype_is_quantized(t.dtype);
  if (!heads_out_of_order(c) || *tile_input) return ref(t);
  // Floats: columns put in head order, so the products sum in the
  // checkpoint's order (the bits of the checkpoint the file was made from).
  const int64_t dv = c.lin_value_head_dim, elem = static_cast<int64_t>(dtype_size(t.dtype));
  auto copy = std::make_shared<std::vector<uint8_t>>(
      gather(t.data, t.shape[0], c.lin_n_value_heads, dv * elem, inverse(tiled_value_heads(c))));
  release_mapped_pages(t.data, t.nbytes);
  owned_.push_back(copy);
  MatrixView m = as_matrix(t);
  m.data = copy->data();
  return ref(m);
}

void Transformer::build_schema() {
  const ModelConfig& c = config_;
  int recurrent = 0;
  // Under the bf16 precision the rows of attention-like components (keys,
  // values, indexer keys) are stored in bf16, half the bytes in the bank;
  // recurrent states stay f32.
  const DType rows_dtype = kernels_->precision() == Precision::kBF16 ? DType::kBF16 : DType::kF32;
  auto add = [&](const std::string& name, ComponentKind kind, uint32_t ratio, uint64_t elems) {
    schema_.components.push_back({name, kind, ratio, kind == ComponentKind::kRecurrent ? DType::kF32 : rows_dtype, elems});
    return static_cast<int>(schema_.components.size() - 1);
  };
  for (int64_t l = 0; l < c.n_layers; ++l) {
    LayerWeights& w = layers_[l];
    const std::string p = "layers." + std::to_string(l) + ".";
    if (w.ple) {
      // The ids the next token's n-grams read, and the conv's input rows.
      const int64_t W = c.hc_count * c.hidden_size;
      w.comp_ple_tokens = add(p + "ple_tokens", ComponentKind::kRecurrent, 0, c.ngram_size - 1);
      w.rec_ple_tokens = recurrent++;
      w.comp_ple_conv = add(p + "ple_conv", ComponentKind::kRecurrent, 0, (c.ple_conv_kernel - 1) * c.ngram_size * W);
      w.rec_ple_conv = recurrent++;
    }
    if (w.type == LayerType::kLinearAttention) {
      const int64_t conv_dim = 2 * c.lin_n_key_heads * c.lin_key_head_dim + c.lin_n_value_heads * c.lin_value_head_dim;
      w.comp_conv = add(p + "conv", ComponentKind::kRecurrent, 0, (c.conv_kernel - 1) * conv_dim);
      w.rec_conv = recurrent++;
      w.comp_ssm = add(p + "ssm", ComponentKind::kRecurrent, 0,
                       c.lin_n_value_heads * c.lin_key_head_dim * c.lin_value_head_dim);
      w.rec_ssm = recurrent++;
    } else {
      w.comp_k = add(p + "k", ComponentKind::kSequence, 1, c.n_kv_heads * c.head_dim);
      w.comp_v = add(p + "v", ComponentKind::kSequence, 1, c.n_kv_heads * c.head_dim);
      if (w.type == LayerType::kSparseAttention) {
        w.comp_index_raw = add(p + "index_raw", ComponentKind::kSequence, 1, c.index_head_dim);
        w.comp_index_pooled = add(p + "index_pooled", ComponentKind::kPooled,
                                  static_cast<uint32_t>(c.index_compress_ratio), c.index_head_dim);
      }
    }
  }
}

Status Transformer::check_tokens(const State& state, std::span<const int32_t> tokens) const {
  if (!(state.schema() == schema_)) return Status::invalid("state was made for another model");
  if (tokens.empty()) return Status::invalid("no tokens to consume");
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= config_.vocab_size)
      return Status::invalid("token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                             " is outside the vocabulary [0, " + std::to_string(config_.vocab_size) + ")");
  return Status::ok();
}

void Transformer::run_layers(ForwardCall& call, std::vector<float>& x, std::vector<float>* streams) const {
  const int64_t H = config_.hidden_size, T = call.rows;
  if (config_.hc_count > 0) return run_qwen4exp_layers(call, x, streams);
  Rows xn(T * H), y(T * H);
  for (const LayerWeights& w : layers_) run_layer(w, call, x.data(), xn.data(), y.data());
}

void Transformer::run_layer(const LayerWeights& w, ForwardCall& call, float* x, float* xn, float* y) const {
  const int64_t H = config_.hidden_size, T = call.rows;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const bool offset = config_.norm_weight_offset;
  kernels_->rms_norm(x, T, H, w.input_norm.data(), eps, offset, xn);
  if (w.type == LayerType::kLinearAttention)
    delta_net_layer(w, call, xn, y);
  else
    attention_layer(w, call, xn, y);
  kernels_->add(x, y, T * H);
  kernels_->rms_norm(x, T, H, w.post_norm.data(), eps, offset, xn);
  ffn_layer(w.ffn, xn, T, y);
  kernels_->add(x, y, T * H);
}

namespace {

int64_t logit_rows(const SequenceStep& step) {
  switch (step.logits) {
    case LogitRows::kNone: return 0;
    case LogitRows::kLast: return 1;
    case LogitRows::kAll: return static_cast<int64_t>(step.tokens.size());
  }
  return 0;
}

}  // namespace

Status Transformer::add_sequence(const SequenceStep& step, ForwardCall* call, SequenceOutput* out) const {
  if (step.state == nullptr) return Status::invalid("a sequence of the step has no state");
  SB_RETURN_IF_ERROR(check_tokens(*step.state, step.tokens));
  if (!step.decode && step.rollback)
    return Status::invalid("a rollback is kept for decode rows only, not for a prefill");
  for (const SequenceRows& other : call->sequences)
    if (other.state == step.state) return Status::invalid("a state appears twice in one forward step");
  SequenceRows seq;
  seq.state = step.state;
  seq.first_row = call->rows;
  seq.rows = static_cast<int64_t>(step.tokens.size());
  seq.first_pos = step.state->position();
  seq.recurrent = step.decode;
  const size_t n_recurrent =
      static_cast<size_t>(std::count_if(schema_.components.begin(), schema_.components.end(),
                                        [](const ComponentSpec& c) { return c.kind == ComponentKind::kRecurrent; }));
  if (step.decode && step.rollback) {
    VerifyRollback& kept = *step.rollback;
    kept.start = seq.first_pos;
    kept.rows.resize(static_cast<size_t>(seq.rows - 1));
    for (size_t i = 0; i < kept.rows.size(); ++i) {
      kept.rows[i].position = seq.first_pos + static_cast<int64_t>(i) + 1;
      kept.rows[i].parts.resize(n_recurrent);
    }
    kept.delta.resize(schema_.components.size());
    seq.rollback = &kept;
  }
  const int64_t start = seq.first_pos, end = start + seq.rows;
  if (step.carry && !step.decode) {
    // Off the grid a prefill goes on only from the open chunk its previous
    // call left; on the grid nothing is open.
    if (start % kGrid != 0 && step.carry->position != start)
      return Status::invalid("the prefill carry does not continue this state (it is at " +
                             std::to_string(step.carry->position) + ", the state at " + std::to_string(start) + ")");
    if (start % kGrid == 0)
      for (PrefillCarry::Layer& layer : step.carry->layers) layer.reset();
    seq.carry = step.carry;
  }
  std::vector<int64_t> capture = step.capture_positions;
  std::sort(capture.begin(), capture.end());
  capture.erase(std::unique(capture.begin(), capture.end()), capture.end());
  for (int64_t c : capture) {
    if (c <= start || c > end) continue;
    if (c != end && c % kGrid != 0)
      return Status::invalid("capture position " + std::to_string(c) + " is neither on the " +
                             std::to_string(kGrid) + "-token grid nor the end of the prefill");
    seq.capture.push_back(c);
  }
  out->snapshots.assign(seq.capture.size(), RecurrentSnapshot{});
  for (size_t i = 0; i < seq.capture.size(); ++i) {
    out->snapshots[i].position = seq.capture[i];
    out->snapshots[i].parts.resize(n_recurrent);
  }
  seq.snapshots = &out->snapshots;
  for (int64_t p = start; p < end; ++p) call->positions.push_back(p);
  call->tokens.insert(call->tokens.end(), step.tokens.begin(), step.tokens.end());
  call->rows += seq.rows;
  call->sequences.push_back(std::move(seq));
  return Status::ok();
}

void Transformer::logits_for_rows(std::span<const SequenceStep> batch, const ForwardCall& call,
                                  const std::vector<float>& x, std::vector<SequenceOutput>* out) const {
  const int64_t H = config_.hidden_size, V = config_.vocab_size;
  // Gather the rows that want logits, so the LM head reads its weights once.
  int64_t n = 0;
  for (const SequenceStep& step : batch) n += logit_rows(step);
  if (n == 0) return;
  std::vector<int64_t> rows;
  rows.reserve(static_cast<size_t>(n));
  for (size_t i = 0; i < batch.size(); ++i) {
    const SequenceRows& seq = call.sequences[i];
    for (int64_t r = seq.first_row + seq.rows - logit_rows(batch[i]); r < seq.first_row + seq.rows; ++r)
      rows.push_back(r);
  }
  Rows xn(n * H);
  kernels_->gather_rows(x.data(), rows.data(), n, H, xn.data());
  if (!final_norm_.empty())  // qwen4exp's head mixer ran in run_layers
    kernels_->rms_norm(xn.data(), n, H, final_norm_.data(), static_cast<float>(config_.rms_norm_eps),
                       config_.norm_weight_offset, xn.data());
  // One buffer for the step, not cleared (the head writes it whole), of
  // which each sequence's output is a view (StepLogits).
  std::shared_ptr<float[]> logits = std::make_shared_for_overwrite<float[]>(static_cast<size_t>(n * V));
  kernels_->matmul(xn.data(), n, lm_head_, logits.get());
  std::vector<LogitStats> stats(n);
  kernels_->logit_stats(logits.get(), n, V, stats.data());
  int64_t at = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const int64_t k = logit_rows(batch[i]);
    (*out)[i].n_rows = k;
    if (k > 0) (*out)[i].logits = StepLogits(logits, static_cast<size_t>(at * V), static_cast<size_t>(k * V));
    (*out)[i].stats.assign(stats.begin() + at, stats.begin() + at + k);
    if (mtp_) (*out)[i].hidden.assign(xn.data() + at * H, xn.data() + (at + k) * H);
    at += k;
  }
}

Status Transformer::forward(std::span<const SequenceStep> batch, std::vector<SequenceOutput>* out) const {
  if (batch.empty()) return Status::invalid("a forward step needs at least one sequence");
  // Check every sequence before any State changes.
  int64_t rows = 0;
  {
    ForwardCall call;
    std::vector<SequenceOutput> outs(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) SB_RETURN_IF_ERROR(add_sequence(batch[i], &call, &outs[i]));
    rows = call.rows;
  }
  if (rows <= kMaxPassRows) return forward_pass(batch, out);
  // A long step runs as passes of at most kMaxPassRows rows, each sequence
  // cut on the kGrid grid: split and batch invariance make every bit that of
  // one pass, and a pass's activations stay small enough to be reused
  // rather than mapped afresh.
  std::vector<SequenceOutput> outs(batch.size());
  std::vector<std::vector<StepLogits>> logits(batch.size());  // each pass's rows
  std::vector<size_t> done(batch.size(), 0);
  for (;;) {
    std::vector<SequenceStep> steps;
    std::vector<size_t> owner;
    int64_t budget = kMaxPassRows;
    for (size_t i = 0; i < batch.size(); ++i) {
      const SequenceStep& s = batch[i];
      const int64_t left = static_cast<int64_t>(s.tokens.size() - done[i]);
      if (left == 0) continue;
      const int64_t pos = s.state->position();
      int64_t take = left;
      // Decode rows are never cut: a sequence's verify rows (a few) keep
      // their row states in one place, and one pass has room for them.
      if (take > budget && !s.decode) {
        take = (pos + budget) / kGrid * kGrid - pos;
        if (take <= 0) {
          if (!steps.empty()) continue;
          take = std::min(left, kGrid - pos % kGrid);  // progress: up to the next grid point
        }
      }
      SequenceStep piece = s;
      piece.tokens = s.tokens.subspan(done[i], static_cast<size_t>(take));
      const bool last = take == left;
      if (s.logits == LogitRows::kLast && !last) piece.logits = LogitRows::kNone;
      steps.push_back(piece);
      owner.push_back(i);
      budget -= take;
    }
    if (steps.empty()) break;
    std::vector<SequenceOutput> part;
    SB_RETURN_IF_ERROR(forward_pass(steps, &part));
    for (size_t j = 0; j < steps.size(); ++j) {
      SequenceOutput& o = outs[owner[j]];
      o.n_rows += part[j].n_rows;
      logits[owner[j]].push_back(std::move(part[j].logits));
      o.stats.insert(o.stats.end(), part[j].stats.begin(), part[j].stats.end());
      o.hidden.insert(o.hidden.end(), part[j].hidden.begin(), part[j].hidden.end());
      for (RecurrentSnapshot& snap : part[j].snapshots) o.snapshots.push_back(std::move(snap));
      done[owner[j]] += steps[j].tokens.size();
    }
  }
  for (size_t i = 0; i < batch.size(); ++i) outs[i].logits = StepLogits::join(logits[i]);
  *out = std::move(outs);
  return Status::ok();
}

Status Transformer::forward_pass(std::span<const SequenceStep> batch, std::vector<SequenceOutput>* out) const {
  ForwardCall call;
  std::vector<SequenceOutput> outs(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) SB_RETURN_IF_ERROR(add_sequence(batch[i], &call, &outs[i]));

  std::vector<float> x(call.rows * config_.hidden_size);
  for (size_t i = 0; i < batch.size(); ++i)
    kernels_->embed_rows(embed_, batch[i].tokens, x.data() + call.sequences[i].first_row * config_.hidden_size);
  std::vector<float> streams;
  const bool mtp_streams = mtp_ && mtp_->streams;
  run_layers(call, x, mtp_streams ? &streams : nullptr);
  if (mtp_) mtp_state_rows(batch, call, mtp_streams ? streams : x);
  for (const SequenceRows& seq : call.sequences) {
    const int64_t end = seq.first_pos + seq.rows;
    seq.state->set_position(end);
    if (seq.carry) seq.carry->position = end % kGrid != 0 ? end : -1;
  }
  logits_for_rows(batch, call, x, &outs);
  if (mtp_streams) {
    // A draft's first pair reads the streams before the head's mixer.
    const int64_t W = mtp_->width;
    for (size_t i = 0; i < batch.size(); ++i) {
      const SequenceRows& seq = call.sequences[i];
      const int64_t k = outs[i].n_rows, first = seq.first_row + seq.rows - k;
      outs[i].hidden.assign(streams.begin() + first * W, streams.begin() + (first + k) * W);
    }
  }
  *out = std::move(outs);
  return Status::ok();
}

}  // namespace sb
