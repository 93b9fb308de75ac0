// qwen4exp's layers (docs/model-spec.md 7.3): the hc_count residual streams,
// each layer's mixer and attention or Gated DeltaNet, its mixer and MoE, the
// PLE n-gram layer, and the head's mixer in place of the final norm.
#include <algorithm>
#include <cmath>
#include <utility>

#include "model/transformer.h"

namespace sb {

Status Transformer::bind_qwen4exp_layer(int64_t l, LayerWeights* w) {
  const ModelConfig& c = config_;
  const std::string L = c.tensor_prefix + "layers." + std::to_string(l) + ".";
  w->attn_mix = bind_mixer(L + "attn_hyper_connection.", true);
  w->mlp_mix = bind_mixer(L + "mlp_hyper_connection.", true);
  const auto it = std::find(c.ple_layers.begin(), c.ple_layers.end(), l);
  if (it == c.ple_layers.end()) return Status::ok();
  const int64_t k = it - c.ple_layers.begin();
  auto p = std::make_shared<PleWeights>();
  p->hash = ngram_hash(c, k);
  SB_RETURN_IF_ERROR(NgramTable::bind(weights_, c, k, &p->table));
  p->key = ref(weights_.layer(l, "ple.key_proj.weight"));
  p->value = ref(weights_.layer(l, "ple.value_proj.weight"));
  p->norm_key = floats(weights_.layer(l, "ple.norm_key.weight"));
  p->norm_query = floats(weights_.layer(l, "ple.norm_query.weight"));
  p->norm_conv = floats(weights_.layer(l, "ple.norm_conv.weight"));
  // [W, 1, kernel] in the checkpoint; tap-major as the kernel reads it.
  const std::vector<float> conv = floats(weights_.layer(l, "ple.conv1d.weight"));
  const int64_t K = c.ple_conv_kernel, W = static_cast<int64_t>(conv.size()) / K;
  p->conv.resize(conv.size());
  for (int64_t ch = 0; ch < W; ++ch)
    for (int64_t j = 0; j < K; ++j) p->conv[j * W + ch] = conv[ch * K + j];
  w->ple = std::move(p);
  return Status::ok();
}

void Transformer::mixer_in(const MixerWeights& m, const float* h, int64_t T, float* normed, float* xin,
                           float* inject) const {
  const ModelConfig& c = config_;
  const int64_t S = c.hc_count, H = c.hidden_size, R = c.hc_lowrank;
  kernels_->rms_norm_groups(h, T, S, H, m.norm.data(), static_cast<float>(c.rms_norm_eps), c.norm_weight_offset,
                            normed);
  Rows down(T * R), up(T * S * H);
  float* const outs[] = {down.data(), inject};
  kernels_->matmul(normed, T, m.down, std::span<float* const>(outs, m.inject ? 2 : 1));
  kernels_->scale_activation(down.data(), T * R, 1.0f / static_cast<float>(S), Activation::kSilu);
  kernels_->matmul(down.data(), T, m.up, up.data());
  kernels_->hc_mix(up.data(), normed, T, S, H, xin);
}

void Transformer::run_qwen4exp_layers(ForwardCall& call, std::vector<float>& x, std::vector<float>* streams) const {
  const int64_t S = config_.hc_count, H = config_.hidden_size, T = call.rows;
  std::vector<float> h(T * S * H);
  for (int64_t r = 0; r < T; ++r)
    for (int64_t s = 0; s < S; ++s) std::copy_n(x.data() + r * H, H, h.data() + (r * S + s) * H);
  Rows normed(T * S * H), xin(T * H), y(T * H);
  for (const LayerWeights& w : layers_) run_qwen4exp_layer(w, call, h.data(), normed.data(), xin.data(), y.data());
  mixer_in(head_mix_, h.data(), T, normed.data(), x.data(), nullptr);
  if (streams) *streams = std::move(h);
}

void Transformer::run_qwen4exp_layer(const LayerWeights& w, ForwardCall& call, float* h, float* normed, float* xin,
                                     float* y) const {
  const int64_t S = config_.hc_count, H = config_.hidden_size, T = call.rows;
  std::vector<float> inject(T * S);
  if (w.ple) ple_layer(w, call, h);
  mixer_in(w.attn_mix, h, T, normed, xin, inject.data());
  if (w.type == LayerType::kLinearAttention)
    delta_net_layer(w, call, xin, y);
  else
    attention_layer(w, call, xin, y);
  kernels_->hc_inject(h, y, inject.data(), T, S, H);
  mixer_in(w.mlp_mix, h, T, normed, xin, inject.data());
  ffn_layer(w.ffn, xin, T, y);
  kernels_->hc_inject(h, y, inject.data(), T, S, H);
}

void Transformer::ple_layer(const LayerWeights& w, ForwardCall& call, float* h) const {
  const ModelConfig& c = config_;
  const PleWeights& p = *w.ple;
  const int64_t S = c.hc_count, H = c.hidden_size, W = S * H, T = call.rows;
  const int64_t D = c.ple_embed_dim, ctx_len = c.ngram_size - 1;
  const float eps = static_cast<float>(c.rms_norm_eps);

  // Each row's n-gram rows, from its sequence's carried ids and its own.
  Rows e(T * D);
  std::vector<int64_t> rows(c.ngram_heads()), context(ctx_len);
  std::vector<std::vector<int64_t>> histories(call.sequences.size());
  for (size_t i = 0; i < call.sequences.size(); ++i) {
    const SequenceRows& seq = call.sequences[i];
    const std::span<const float> carried = std::as_const(*seq.state).f32(w.comp_ple_tokens);
    std::vector<int64_t>& history = histories[i];
    // Before the start there is nothing (ngram_context reads it as eos).
    for (int64_t k = ctx_len - std::min(seq.first_pos, ctx_len); k < ctx_len; ++k)
      history.push_back(static_cast<int64_t>(carried[k]));
    for (int64_t r = 0; r < seq.rows; ++r) {
      const int64_t token = call.tokens[seq.first_row + r];
      ngram_context(history.data(), static_cast<int64_t>(history.size()), ctx_len, c.eos_token_id, context.data());
      ngram_rows(p.hash, c.heads_per_ngram, token, context.data(), rows.data());
      p.table.gather(*kernels_, rows, e.data() + (seq.first_row + r) * D);
      history.push_back(token);
    }
  }
  Rows key(T * W), value(T * H), query(T * W), gated(T * W), conv_in(T * W), conv_out(T * W);
  kernels_->matmul(e.data(), T, p.key, key.data());
  kernels_->matmul(e.data(), T, p.value, value.data());
  kernels_->rms_norm_groups(key.data(), T, S, H, p.norm_key.data(), eps, c.norm_weight_offset, key.data());
  kernels_->rms_norm_groups(h, T, S, H, p.norm_query.data(), eps, c.norm_weight_offset, query.data());
  kernels_->ple_gate(key.data(), query.data(), value.data(), T, S, H, gated.data());
  kernels_->rms_norm_groups(gated.data(), T, S, H, p.norm_conv.data(), eps, c.norm_weight_offset, conv_in.data());
  for (size_t i = 0; i < call.sequences.size(); ++i) ple_sequence(w, call.sequences[i], histories[i], conv_in.data(), conv_out.data());
  // The layer's output (gated + conv, as the source sums it), then the residual.
  kernels_->add(conv_out.data(), gated.data(), T * W);
  kernels_->add(h, conv_out.data(), T * W);
}

void Transformer::ple_sequence(const LayerWeights& w, SequenceRows& seq, const std::vector<int64_t>& history,
                               const float* conv_in, float* conv_out) const {
  const ModelConfig& c = config_;
  const int64_t W = c.hc_count * c.hidden_size, ctx_len = c.ngram_size - 1;
  State& st = *seq.state;
  const std::span<float> tokens = st.f32(w.comp_ple_tokens), conv = st.f32(w.comp_ple_conv);
  // history holds the ids of positions [first_pos + rows - n, first_pos + rows).
  const int64_t n = static_cast<int64_t>(history.size()), end = seq.first_pos + seq.rows;
  auto carry_tokens_to = [&](int64_t pos) {
    // The last ctx_len ids before pos, oldest first (exact in f32: ids are
    // below 2^24); positions before the start hold 0 and are never read.
    for (int64_t k = 0; k < ctx_len; ++k) {
      const int64_t at = n - (end - pos) - ctx_len + k;
      tokens[k] = at >= 0 ? static_cast<float>(history[at]) : 0.0f;
    }
  };
  // The conv runs in pieces that end where a snapshot or a verify row's
  // state is kept; each row's output is the same whatever the pieces.
  size_t next = 0;
  for (int64_t s = 0; s < seq.rows;) {
    int64_t e = seq.rows;
    if (seq.rollback) e = s + 1;
    while (next < seq.capture.size() && seq.capture[next] <= seq.first_pos + s) ++next;
    if (next < seq.capture.size()) e = std::min(e, seq.capture[next] - seq.first_pos);
    kernels_->causal_conv_silu_dilated(conv_in + (seq.first_row + s) * W, e - s, W, w.ple->conv.data(),
                                       c.ple_conv_kernel, c.ngram_size, conv.data(), conv_out + (seq.first_row + s) * W);
    carry_tokens_to(seq.first_pos + e);
    if (next < seq.capture.size() && seq.capture[next] == seq.first_pos + e) {
      RecurrentSnapshot& snap = (*seq.snapshots)[next];
      snap.parts[w.rec_ple_tokens].assign(tokens.begin(), tokens.end());
      snap.parts[w.rec_ple_conv].assign(conv.begin(), conv.end());
    }
    if (seq.rollback && e < seq.rows) {
      RecurrentSnapshot& row = seq.rollback->rows[static_cast<size_t>(e - 1)];
      row.parts[w.rec_ple_tokens].assign(tokens.begin(), tokens.end());
      row.parts[w.rec_ple_conv].assign(conv.begin(), conv.end());
    }
    s = e;
  }
}

}  // namespace sb
