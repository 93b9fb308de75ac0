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

// The head's tensors for config.mtp_layers == 1, in a stable order (what
// gen-model writes after the model's tensors); empty when mtp_layers is 0.
std::vector<TensorSpec> mtp_tensors(const ModelConfig& config);

// The head's decoder layer as layer 0 of a one-layer model whose tensor
// prefix is "mtp." (tied, every layer full attention, the family's FFN):
// code written for a model's layers (expected_tensors, WeightSet, the GGUF
// layout) then reads and names the head's layer.
ModelConfig mtp_layer_config(const ModelConfig& config);

}  // namespace sb
