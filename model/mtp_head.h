// The multi-token-prediction head's tensors in a Hugging Face checkpoint
// (Qwen3-Next, Qwen3.5): `mtp.fc.weight` [H, 2H] (over [embedding ; hidden],
// in that order), `mtp.pre_fc_norm_embedding.weight`,
// `mtp.pre_fc_norm_hidden.weight`, one full-attention decoder layer
// `mtp.layers.0.*` with the family's FFN (dense, or MoE in the family's
// expert layout), and `mtp.norm.weight`. The embedding and the LM head are
// the model's own. The math: docs/model-spec.md, "MTP head"; the forward:
// Model::mtp_forward (model/model.h).
#pragma once

#include <vector>

#include "model/config.h"

namespace sb {

// The head's input projection, the tensor whose presence makes a head.
inline constexpr const char* kMtpFc = "mtp.fc.weight";
// qwen4exp's head (docs/model-spec.md 7.7) projects the embedding and each
// of the trunk's hyper-connection streams apart: fc_embedding and fc_hidden
// [H, H] in place of fc, and its norm of the hidden streams is
// [hc_count * H] wide. Its decoder layer is a QSA layer between its own
// mixers, and `mtp.hyper_connection_mixer.*` replaces `mtp.norm`.
inline constexpr const char* kMtpFcEmbedding = "mtp.fc_embedding.weight";
inline constexpr const char* kMtpFcHidden = "mtp.fc_hidden.weight";
// The tensor whose presence makes a head of this config's family.
const char* mtp_key_tensor(const ModelConfig& config);

// The head's tensors for config.mtp_layers == 1, in a stable order (what
// gen-model writes after the model's tensors); empty when mtp_layers is 0.
std::vector<TensorSpec> mtp_tensors(const ModelConfig& config);

// The head's decoder layer as layer 0 of a one-layer model whose tensor
// prefix is "mtp." (tied, every layer full attention, the family's FFN):
// code written for a model's layers (expected_tensors, WeightSet, the GGUF
// layout) then reads and names the head's layer.
ModelConfig mtp_layer_config(const ModelConfig& config);

}  // namespace sb
