// The tensor layout of llama.cpp's qwen3 / qwen3next / qwen35 / qwen35moe /
// qwen4exp GGUF files and the permutations between it and the Hugging Face layout,
// shared by the GGUF writer and loader (model/gguf_model.h). Internal to
// model/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace sb {

// "qwen3", "qwen3next", "qwen35", "qwen35moe", "qwen4exp" (general.architecture).
const char* gguf_arch_name(Arch arch);
// "blk.<layer>.<part>"
std::string gguf_layer_name(int64_t layer, const std::string& part);

// Every tensor of a GGUF file of this config, with its shape (row-major,
// outermost first), in the order the writer emits them; the MTP head's
// nextn block last when config.mtp_layers is 1 (hybrid families).
std::vector<TensorSpec> gguf_expected_tensors(const ModelConfig& config);

// The MTP head as llama.cpp stores it: block blk.<n_layers> (counted in
// block_count, with {arch}.nextn_predict_layers 1) holding the head's decoder
// layer under a full-attention layer's names (the family's FFN) and
// nextn.eh_proj (mtp.fc), nextn.enorm (mtp.pre_fc_norm_embedding),
// nextn.hnorm (mtp.pre_fc_norm_hidden) and nextn.shared_head_norm (mtp.norm);
// the norms, as every zero-centred norm, stored as 1 + w. `hf` names the
// checkpoint tensor of a nextn.* tensor; empty for the layer's (those map as
// a trunk layer's onto mtp.layers.0.*, model/mtp_head.h).
struct NextnTensor {
  std::string gguf;
  std::string hf;
  std::vector<int64_t> shape;
};
std::vector<NextnTensor> gguf_nextn_tensors(const ModelConfig& config);

// A permutation as a map: out unit i takes src unit map[i].
using UnitMap = std::vector<int64_t>;
UnitMap inverse(const UnitMap& map);
// Each unit of `map` widened to `width` consecutive units.
UnitMap widen(const UnitMap& map, int64_t width);
// Qwen3.5's value heads: tiled position p (key head p % n_k, copy p / n_k)
// takes grouped head (p % n_k) * r + p / n_k, r = n_v / n_k.
UnitMap tiled_value_heads(const ModelConfig& config);
// Qwen3-Next's in_proj_qkvz rows to attn_qkv rows followed by attn_gate rows.
UnitMap qkvz_split(const ModelConfig& config);
// The rows of in_proj_qkv (or conv channels) of Qwen3.5: q and k rows kept,
// the value rows' heads tiled.
UnitMap qkv_tiled_rows(const ModelConfig& config);

// Gathers units: for each of `outer` rows of `units` units of `unit_bytes`
// bytes, out unit i = src unit map[i]. REQUIRES map.size() == units.
std::vector<uint8_t> gather(const void* src, int64_t outer, int64_t units, int64_t unit_bytes, const UnitMap& map);

}  // namespace sb
