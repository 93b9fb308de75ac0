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
  return h;
}

std::vector<TensorSpec> mtp_tensors(const ModelConfig& c) {
  if (c.mtp_layers <= 0) return {};
  const int64_t H = c.hidden_size;
  std::vector<TensorSpec> out = {
      {kMtpFc, {H, 2 * H}}, {"mtp.pre_fc_norm_embedding.weight", {H}}, {"mtp.pre_fc_norm_hidden.weight", {H}}};
  for (TensorSpec& s : expected_tensors(mtp_layer_config(c)))
    if (s.name != "mtp.embed_tokens.weight") out.push_back(std::move(s));
  return out;
}

}  // namespace sb
