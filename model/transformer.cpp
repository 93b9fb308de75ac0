#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace sb {

// Bump when any kernel's arithmetic changes: it is part of every fingerprint,
// so banks written by an older runtime are never restored into a newer one.
constexpr const char* kNumericsVersion = "statebank-cpu-numerics-1";

Status Model::load(const std::string& dir, const RuntimeOptions& options, std::unique_ptr<Model>* out) {
  return Transformer::create(dir, options, out);
}

Status Transformer::create(const std::string& dir, const RuntimeOptions& options, std::unique_ptr<Model>* out) {
  std::unique_ptr<Transformer> m(new Transformer());
  SB_RETURN_IF_ERROR(parse_config(dir, &m->config_));
  SB_RETURN_IF_ERROR(Checkpoint::open(dir, &m->checkpoint_));
  SB_RETURN_IF_ERROR(WeightSet::bind(*m->checkpoint_, m->config_, &m->weights_));
  m->pool_ = std::make_unique<ThreadPool>(options.threads);
  m->kernels_ = make_cpu_kernels(m->pool_.get());
  SB_RETURN_IF_ERROR(m->bind_weights());
  m->build_schema();

  FingerprintFields& f = m->fingerprint_fields_;
  f.numerics_version = kNumericsVersion;
  f.kernel_variant = m->kernels_->name();
  f.isa = compiled_isa();
  f.precision = "f32";  // every kernel computes in f32 (bf16/f16 weights are widened)
  f.config = m->config_.describe();
  f.state_schema = m->schema_.describe();
  f.weights_digest = m->checkpoint_->weights_digest();
  for (const auto& [name, t] : m->checkpoint_->tensors()) f.tensor_dtypes += name + ":" + dtype_name(t.dtype) + ";";
  m->fingerprint_ = model_fingerprint(f);
  *out = std::move(m);
  return Status::ok();
}

WeightRef Transformer::ref(const MatrixView& m) {
  WeightRef r{m.dtype, m.rows, m.cols, m.data};
  if (m.dtype == DType::kF16) {
    auto wide = std::make_unique<std::vector<float>>(m.rows * m.cols);
    convert_to_f32(DType::kF16, m.data, m.rows * m.cols, wide->data());
    r = WeightRef{DType::kF32, m.rows, m.cols, wide->data()};
    owned_.push_back(std::move(wide));
  }
  return r;
}

WeightRef Transformer::ref(const TensorView& t) { return ref(as_matrix(t)); }

std::vector<float> Transformer::floats(const TensorView& t) const {
  std::vector<float> v(t.numel());
  convert_to_f32(t.dtype, t.data, t.numel(), v.data());
  return v;
}

Status Transformer::bind_weights() {
  const ModelConfig& c = config_;
  embed_ = ref(weights_.embed());
  lm_head_ = c.tie_word_embeddings ? embed_ : ref(weights_.lm_head());
  final_norm_ = floats(weights_.final_norm());
  layers_.resize(c.n_layers);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    LayerWeights& w = layers_[l];
    w.type = c.layer_types[l];
    w.input_norm = floats(weights_.layer(l, "input_layernorm.weight"));
    w.post_norm = floats(weights_.layer(l, "post_attention_layernorm.weight"));
    if (w.type == LayerType::kLinearAttention) {
      DeltaNetWeights& d = w.delta;
      if (c.arch == Arch::kQwen35 || c.arch == Arch::kQwen35Moe) {
        d.qkv = ref(weights_.layer(l, "linear_attn.in_proj_qkv.weight"));
        d.z = ref(weights_.layer(l, "linear_attn.in_proj_z.weight"));
        d.b = ref(weights_.layer(l, "linear_attn.in_proj_b.weight"));
        d.a = ref(weights_.layer(l, "linear_attn.in_proj_a.weight"));
      } else {
        d.qkvz = ref(weights_.layer(l, "linear_attn.in_proj_qkvz.weight"));
        d.ba = ref(weights_.layer(l, "linear_attn.in_proj_ba.weight"));
      }
      d.conv = floats(weights_.layer(l, "linear_attn.conv1d.weight"));
      d.dt_bias = floats(weights_.layer(l, "linear_attn.dt_bias"));
      d.neg_exp_a_log = floats(weights_.layer(l, "linear_attn.A_log"));
      for (float& a : d.neg_exp_a_log) a = -std::exp(a);
      d.norm = floats(weights_.layer(l, "linear_attn.norm.weight"));
      d.out = ref(weights_.layer(l, "linear_attn.out_proj.weight"));
    } else {
      AttentionWeights& a = w.attn;
      a.q = ref(weights_.layer(l, "self_attn.q_proj.weight"));
      a.k = ref(weights_.layer(l, "self_attn.k_proj.weight"));
      a.v = ref(weights_.layer(l, "self_attn.v_proj.weight"));
      a.o = ref(weights_.layer(l, "self_attn.o_proj.weight"));
      a.q_norm = floats(weights_.layer(l, "self_attn.q_norm.weight"));
      a.k_norm = floats(weights_.layer(l, "self_attn.k_norm.weight"));
      if (w.type == LayerType::kSparseAttention) {
        a.index_q = ref(weights_.layer(l, "self_attn.indexer.wq.weight"));
        a.index_k = ref(weights_.layer(l, "self_attn.indexer.wk.weight"));
        a.index_w = ref(weights_.layer(l, "self_attn.indexer.weights_proj.weight"));
        a.index_k_norm = floats(weights_.layer(l, "self_attn.indexer.k_norm.weight"));
      }
    }
    FfnWeights& f = w.ffn;
    f.moe = c.layer_is_moe(l);
    if (f.moe) {
      f.router = ref(weights_.layer(l, "mlp.gate.weight"));
      if (c.shared_expert_intermediate_size > 0) {
        f.gate = ref(weights_.layer(l, "mlp.shared_expert.gate_proj.weight"));
        f.up = ref(weights_.layer(l, "mlp.shared_expert.up_proj.weight"));
        f.down = ref(weights_.layer(l, "mlp.shared_expert.down_proj.weight"));
        f.shared_gate = ref(weights_.layer(l, "mlp.shared_expert_gate.weight"));
      }
      for (int64_t e = 0; e < c.n_experts; ++e) {
        const ExpertWeights& ew = weights_.expert(l, e);
        f.experts.push_back({ref(ew.gate), ref(ew.up), ref(ew.down)});
      }
    } else {
      f.gate = ref(weights_.layer(l, "mlp.gate_proj.weight"));
      f.up = ref(weights_.layer(l, "mlp.up_proj.weight"));
      f.down = ref(weights_.layer(l, "mlp.down_proj.weight"));
    }
  }
  return Status::ok();
}

void Transformer::build_schema() {
  const ModelConfig& c = config_;
  int recurrent = 0;
  auto add = [&](const std::string& name, ComponentKind kind, uint32_t ratio, uint64_t elems) {
    schema_.components.push_back({name, kind, ratio, DType::kF32, elems});
    return static_cast<int>(schema_.components.size() - 1);
  };
  for (int64_t l = 0; l < c.n_layers; ++l) {
    LayerWeights& w = layers_[l];
    const std::string p = "layers." + std::to_string(l) + ".";
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

void Transformer::run_layers(ForwardCall& call, std::vector<float>& x) const {
  const int64_t H = config_.hidden_size, T = call.rows;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const bool offset = config_.norm_weight_offset;
  std::vector<float> xn(T * H), y(T * H);
  for (const LayerWeights& w : layers_) {
    kernels_->rms_norm(x.data(), T, H, w.input_norm.data(), eps, offset, xn.data());
    if (w.type == LayerType::kLinearAttention)
      delta_net_layer(w, call, xn.data(), y.data());
    else
      attention_layer(w, call, xn.data(), y.data());
    for (int64_t i = 0; i < T * H; ++i) x[i] += y[i];
    kernels_->rms_norm(x.data(), T, H, w.post_norm.data(), eps, offset, xn.data());
    ffn_layer(w.ffn, xn.data(), T, y.data());
    for (int64_t i = 0; i < T * H; ++i) x[i] += y[i];
  }
}

namespace {

void embed_rows(const WeightRef& table, std::span<const int32_t> tokens, float* x) {
  const int64_t H = table.cols;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const char* row = static_cast<const char*>(table.data) + tokens[t] * H * dtype_size(table.dtype);
    if (table.dtype == DType::kBF16)
      convert_to_f32(DType::kBF16, row, H, x + t * H);
    else
      std::memcpy(x + t * H, row, H * sizeof(float));
  }
}

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
  if (step.decode && step.tokens.size() != 1)
    return Status::invalid("a decode step consumes one token, not " + std::to_string(step.tokens.size()));
  for (const SequenceRows& other : call->sequences)
    if (other.state == step.state) return Status::invalid("a state appears twice in one forward step");
  SequenceRows seq;
  seq.state = step.state;
  seq.first_row = call->rows;
  seq.rows = static_cast<int64_t>(step.tokens.size());
  seq.first_pos = step.state->position();
  seq.recurrent = step.decode;
  const int64_t start = seq.first_pos, end = start + seq.rows;
  if (step.carry && !step.decode) {
    // Off the grid a prefill goes on only from the open chunk its previous
    // call left; on the grid nothing is open.
    if (start % kGrid != 0 && step.carry->position != start)
      return Status::invalid("the prefill carry does not continue this state (it is at " +
                             std::to_string(step.carry->position) + ", the state at " + std::to_string(start) + ")");
    if (start % kGrid == 0) step.carry->layers.clear();
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
  const size_t n_recurrent = static_cast<size_t>(std::count_if(
      schema_.components.begin(), schema_.components.end(),
      [](const ComponentSpec& c) { return c.kind == ComponentKind::kRecurrent; }));
  out->snapshots.assign(seq.capture.size(), RecurrentSnapshot{});
  for (size_t i = 0; i < seq.capture.size(); ++i) {
    out->snapshots[i].position = seq.capture[i];
    out->snapshots[i].parts.resize(n_recurrent);
  }
  seq.snapshots = &out->snapshots;
  for (int64_t p = start; p < end; ++p) call->positions.push_back(p);
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
  std::vector<float> xn(n * H), logits(n * V);
  int64_t at = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const SequenceRows& seq = call.sequences[i];
    const int64_t k = logit_rows(batch[i]);
    std::copy(x.data() + (seq.first_row + seq.rows - k) * H, x.data() + (seq.first_row + seq.rows) * H,
              xn.data() + at * H);
    at += k;
  }
  kernels_->rms_norm(xn.data(), n, H, final_norm_.data(), static_cast<float>(config_.rms_norm_eps),
                     config_.norm_weight_offset, xn.data());
  kernels_->matmul(xn.data(), n, lm_head_, logits.data());
  at = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const int64_t k = logit_rows(batch[i]);
    (*out)[i].n_rows = k;
    (*out)[i].logits.assign(logits.begin() + at * V, logits.begin() + (at + k) * V);
    at += k;
  }
}

Status Transformer::forward(std::span<const SequenceStep> batch, std::vector<SequenceOutput>* out) const {
  if (batch.empty()) return Status::invalid("a forward step needs at least one sequence");
  // Check every sequence before any State changes.
  ForwardCall call;
  std::vector<SequenceOutput> outs(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) SB_RETURN_IF_ERROR(add_sequence(batch[i], &call, &outs[i]));

  std::vector<float> x(call.rows * config_.hidden_size);
  for (size_t i = 0; i < batch.size(); ++i)
    embed_rows(embed_, batch[i].tokens, x.data() + call.sequences[i].first_row * config_.hidden_size);
  run_layers(call, x);
  for (const SequenceRows& seq : call.sequences) {
    const int64_t end = seq.first_pos + seq.rows;
    seq.state->set_position(end);
    if (seq.carry) seq.carry->position = end % kGrid != 0 ? end : -1;
  }
  logits_for_rows(batch, call, x, &outs);
  *out = std::move(outs);
  return Status::ok();
}

}  // namespace sb
