// qwen4exp's MTP head (docs/model-spec.md 7.7): the trunk's hyper-connection
// streams before its output mixer and the next token's embedding, each
// projected apart (fc_hidden shared by the streams), one QSA layer between
// its own mixers, and the head's mixer before the model's LM head. The
// layer, the mixers and the QSA indexer are the model's own code
// (model/qwen4exp_layer.cpp, attention_layer.cpp).
#include "model/mtp_head.h"
#include "model/transformer.h"

namespace sb {

void Transformer::bind_qwen4exp_mtp(const std::map<std::string, const TensorView*>& t, MtpHead* m) {
  const ModelConfig& c = config_;
  const std::string L = "mtp.layers.0.", A = L + "self_attn.";
  const TensorGetter get = [&](const std::string& name) -> const TensorView& { return *t.at(name); };
  m->streams = true;
  m->width = c.hc_count * c.hidden_size;
  m->fc_embedding = ref(get(kMtpFcEmbedding));
  m->fc_hidden = ref(get(kMtpFcHidden));
  m->head_mix = bind_mixer(get, "mtp.hyper_connection_mixer.", false);
  LayerWeights& w = m->layer;
  w.type = LayerType::kSparseAttention;
  w.attn_mix = bind_mixer(get, L + "attn_hyper_connection.", true);
  w.mlp_mix = bind_mixer(get, L + "mlp_hyper_connection.", true);
  AttentionWeights& a = w.attn;
  a.in = qwen4exp_qsa_in([&](const std::string& name) -> const TensorView& { return get(A + name); });
  a.o = ref(get(A + "o_proj.weight"));
  a.q_norm = floats(get(A + "q_norm.weight"));
  a.k_norm = floats(get(A + "k_norm.weight"));
  a.index_k_norm = floats(get(A + "indexer.k_layernorm.weight"));
  a.index_q_norm = floats(get(A + "indexer.q_layernorm.weight"));
  bind_mtp_ffn(t, &w.ffn);
}

void Transformer::qwen4exp_mtp_input(std::span<const int32_t> tokens, const float* hidden, int64_t n, float* x) const {
  const MtpHead& m = *mtp_;
  const int64_t H = config_.hidden_size, S = config_.hc_count;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  Rows e(n * H), projected(n * H), g(n * S * H);
  kernels_->embed_rows(embed_, tokens, e.data());
  kernels_->rms_norm(e.data(), n, H, m.norm_embed.data(), eps, true, e.data());
  kernels_->matmul(e.data(), n, m.fc_embedding, projected.data());
  // One norm over all the streams of a row (vLLM's and the MLX port's
  // reading; 7.7 names the sources that norm each stream apart).
  kernels_->rms_norm(hidden, n, S * H, m.norm_hidden.data(), eps, true, g.data());
  kernels_->matmul(g.data(), n * S, m.fc_hidden, x);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t s = 0; s < S; ++s) kernels_->add(x + (r * S + s) * H, projected.data() + r * H, H);
}

void Transformer::qwen4exp_mtp_rows(ForwardCall& call, const MtpStep& step, MtpOutput* out) const {
  const MtpHead& m = *mtp_;
  const int64_t H = config_.hidden_size, W = m.width, n = call.rows;
  Rows h(n * W), normed(n * W), xin(n * H), y(n * H), last(H);
  qwen4exp_mtp_input(step.tokens, step.hidden.data(), n, h.data());
  run_qwen4exp_layer(m.layer, call, h.data(), normed.data(), xin.data(), y.data());
  // The next depth pairs these streams; the LM head reads their mix.
  out->hidden.assign(h.data() + (n - 1) * W, h.data() + n * W);
  mixer_in(m.head_mix, out->hidden.data(), 1, normed.data(), last.data(), nullptr);
  out->logits.resize(m.vocab);
  kernels_->matmul(last.data(), 1, m.lm_head, out->logits.data());
  kernels_->logit_stats(out->logits.data(), 1, m.vocab, &out->stats);
}

void Transformer::qwen4exp_mtp_keys(ForwardCall& call, std::span<const int32_t> tokens, const float* prev) const {
  const MtpHead& m = *mtp_;
  const int64_t H = config_.hidden_size, W = m.width, T = call.rows;
  Rows h(T * W), normed(T * W), xin(T * H), inject(T * config_.hc_count);
  qwen4exp_mtp_input(tokens, prev, T, h.data());
  // Keys, values and indexer keys only, as mtp_state_rows says why.
  mixer_in(m.state_layer.attn_mix, h.data(), T, normed.data(), xin.data(), inject.data());
  attention_layer(m.state_layer, call, xin.data(), nullptr, /*keys_only=*/true);
}

}  // namespace sb
