#include "model/transformer.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace sb {

// Bump when any kernel's arithmetic changes: it is part of every fingerprint,
// so banks written by an older runtime are never restored into a newer one.
constexpr const char* kNumericsVersion = "statebank-cpu-numerics-2";

Status Model::load(const std::string& dir, const RuntimeOptions& options, std::unique_ptr<Model>* out) {
  return Transformer::create(dir, options, out);
}

Status Transformer::create(const std::string& dir, const RuntimeOptions& options, std::unique_ptr<Model>* out) {
  std::unique_ptr<Transformer> m(new Transformer());
  SB_RETURN_IF_ERROR(parse_config(dir, &m->config_));
  SB_RETURN_IF_ERROR(Checkpoint::open(dir, &m->checkpoint_));
  SB_RETURN_IF_ERROR(WeightSet::bind(*m->checkpoint_, m->config_, &m->weights_));
  m->pool_ = std::make_unique<ThreadPool>(options.threads);
  KernelOptions ko;
  ko.precision = options.precision.value_or(m->weights_.embed().dtype == DType::kBF16 ? Precision::kBF16
                                                                                        : Precision::kF32);
  m->kernels_ = make_cpu_kernels(m->pool_.get(), ko);
  SB_RETURN_IF_ERROR(m->bind_weights());
  m->build_schema();

  std::string identity = std::string(kNumericsVersion) + "\n" + m->kernels_->name() + "\n" +
                         m->config_.describe() + "\n" + m->schema_.describe() + "\n" +
                         m->checkpoint_->weights_digest() + "\n";
  for (const auto& [name, t] : m->checkpoint_->tensors()) identity += name + ":" + dtype_name(t.dtype) + ";";
  XXH128_hash_t h = XXH3_128bits(identity.data(), identity.size());
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  m->fingerprint_ = hex;
  *out = std::move(m);
  return Status::ok();
}

WeightRef Transformer::ref(const MatrixView& m, bool matmul) {
  WeightRef r{m.dtype, m.rows, m.cols, m.data, nullptr};
  if (m.dtype == DType::kF16) {
    auto wide = std::make_unique<std::vector<float>>(m.rows * m.cols);
    convert_to_f32(DType::kF16, m.data, m.rows * m.cols, wide->data());
    r = WeightRef{DType::kF32, m.rows, m.cols, wide->data(), nullptr};
    owned_.push_back(std::move(wide));
  }
  return matmul ? kernels_->prepare(r) : r;
}

WeightRef Transformer::ref(const TensorView& t, bool matmul) { return ref(as_matrix(t), matmul); }

std::vector<float> Transformer::floats(const TensorView& t) const {
  std::vector<float> v(t.numel());
  convert_to_f32(t.dtype, t.data, t.numel(), v.data());
  return v;
}

Status Transformer::bind_weights() {
  const ModelConfig& c = config_;
  embed_ = ref(weights_.embed(), /*matmul=*/false);
  lm_head_ = c.tie_word_embeddings ? kernels_->prepare(embed_) : ref(weights_.lm_head());
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

void Transformer::logits_for_rows(const float* x, int64_t first_row, int64_t n_rows, float* out) const {
  const int64_t H = config_.hidden_size;
  std::vector<float> xn(n_rows * H);
  kernels_->rms_norm(x + first_row * H, n_rows, H, final_norm_.data(), static_cast<float>(config_.rms_norm_eps),
                     config_.norm_weight_offset, xn.data());
  kernels_->matmul(xn.data(), n_rows, lm_head_, out);
}

namespace {

std::vector<float> embed_rows(const WeightRef& table, std::span<const int32_t> tokens) {
  const int64_t H = table.cols;
  std::vector<float> x(tokens.size() * H);
  for (size_t t = 0; t < tokens.size(); ++t) {
    const char* row = static_cast<const char*>(table.data) + tokens[t] * H * dtype_size(table.dtype);
    if (table.dtype == DType::kBF16)
      convert_to_f32(DType::kBF16, row, H, x.data() + t * H);
    else
      std::memcpy(x.data() + t * H, row, H * sizeof(float));
  }
  return x;
}

}  // namespace

Status Transformer::prefill(State& state, std::span<const int32_t> tokens, const PrefillOptions& options,
                            PrefillOutput* out) const {
  SB_RETURN_IF_ERROR(check_tokens(state, tokens));
  const int64_t start = state.position(), end = start + static_cast<int64_t>(tokens.size());
  ForwardCall call;
  call.state = &state;
  call.first_pos = start;
  call.rows = end - start;
  for (int64_t p = start; p < end; ++p) call.positions.push_back(p);
  std::vector<int64_t> capture = options.capture_positions;
  std::sort(capture.begin(), capture.end());
  capture.erase(std::unique(capture.begin(), capture.end()), capture.end());
  for (int64_t c : capture) {
    if (c <= start || c > end) continue;
    if (c != end && c % kGrid != 0)
      return Status::invalid("capture position " + std::to_string(c) + " is neither on the " +
                             std::to_string(kGrid) + "-token grid nor the end of the prefill");
    call.capture.push_back(c);
  }
  out->snapshots.assign(call.capture.size(), RecurrentSnapshot{});
  for (size_t i = 0; i < call.capture.size(); ++i) {
    out->snapshots[i].position = call.capture[i];
    out->snapshots[i].parts.resize(std::count_if(schema_.components.begin(), schema_.components.end(),
                                                 [](const ComponentSpec& c) {
                                                   return c.kind == ComponentKind::kRecurrent;
                                                 }));
  }
  call.snapshots = &out->snapshots;

  std::vector<float> x = embed_rows(embed_, tokens);
  run_layers(call, x);
  state.set_position(end);
  const int64_t first = options.all_logits ? 0 : call.rows - 1;
  out->n_rows = call.rows - first;
  out->logits.assign(out->n_rows * config_.vocab_size, 0.0f);
  logits_for_rows(x.data(), first, out->n_rows, out->logits.data());
  return Status::ok();
}

Status Transformer::decode(State& state, int32_t token, std::vector<float>* logits) const {
  const int32_t tokens[1] = {token};
  SB_RETURN_IF_ERROR(check_tokens(state, tokens));
  ForwardCall call;
  call.state = &state;
  call.first_pos = state.position();
  call.rows = 1;
  call.recurrent = true;
  call.positions = {state.position()};
  std::vector<float> x = embed_rows(embed_, tokens);
  run_layers(call, x);
  state.set_position(call.first_pos + 1);
  logits->assign(config_.vocab_size, 0.0f);
  logits_for_rows(x.data(), 0, 1, logits->data());
  return Status::ok();
}

}  // namespace sb
