// The MTP head's tensors and the config of its decoder layer (model/mtp_head.h):
// layout only, so the GGUF code (and its fuzz target) needs no model.
#include "model/mtp_head.h"

namespace sb {

ModelConfig mtp_layer_config(const ModelConfig& c) {
  ModelConfig h = c;
  h.n_layers = 1;
  h.layer_types = {LayerType::kFullAttention};
  h.tensor_prefix = "mtp.";
  h.mlp_only_layers.clear();
  h.decoder_sparse_step = 1;
  h.tie_word_embeddings = true;  // the model's LM head: no lm_head.weight of its own
  if (c.arch == Arch::kQwen4Exp) {
    h.layer_types = {LayerType::kSparseAttention};
    h.ple_layers.clear();
  }
  return h;
}

const char* mtp_key_tensor(const ModelConfig& c) { return c.arch == Arch::kQwen4Exp ? kMtpFcHidden : kMtpFc; }

std::vector<TensorSpec> mtp_tensors(const ModelConfig& c) {
  if (c.mtp_layers <= 0) return {};
  const int64_t H = c.hidden_size;
  std::vector<TensorSpec> out;
  if (c.arch == Arch::kQwen4Exp)
    out = {{kMtpFcEmbedding, {H, H}},
           {kMtpFcHidden, {H, H}},
           {"mtp.pre_fc_norm_embedding.weight", {H}},
           {"mtp.pre_fc_norm_hidden.weight", {c.hc_count * H}}};
  else
    out = {{kMtpFc, {H, 2 * H}}, {"mtp.pre_fc_norm_embedding.weight", {H}}, {"mtp.pre_fc_norm_hidden.weight", {H}}};
  for (TensorSpec& s : expected_tensors(mtp_layer_config(c)))
    if (s.name != "mtp.embed_tokens.weight") out.push_back(std::move(s));
  return out;
}

}  // namespace sb
