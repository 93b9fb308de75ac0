// The tensor layout of llama.cpp's qwen3 / qwen3next / qwen35 / qwen35moe
// GGUF files and the permutations between it and the Hugging Face layout,
// shared by the GGUF writer and loader (model/gguf_model.h). Internal to
// model/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace sb {

// "qwen3", "qwen3next", "qwen35", "qwen35moe"; nullptr for statebank_qsa.
const char* gguf_arch_name(Arch arch);
// "blk.<layer>.<part>"
std::string gguf_layer_name(int64_t layer, const std::string& part);

// Every tensor of a GGUF file of this config, with its shape (row-major,
// outermost first), in the order the writer emits them.
std::vector<TensorSpec> gguf_expected_tensors(const ModelConfig& config);

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
