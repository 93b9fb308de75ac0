// The random tensors of a generated checkpoint (model/gen_model.h), one at a
// time, for the two writers that share them: the safetensors file and the
// GGUF file gen-model writes directly (model/gen_model_gguf.cpp). Promise:
// a tensor's bytes depend only on (config, seed, dtype, its name), so both
// writers store the same values whatever order they ask for them in.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/config.h"
#include "model/safetensors_format.h"

namespace sb {

// Every tensor of the checkpoint (the MTP head last) with the dtype it is
// stored in: I64 for the constants, F32 for A_log and dt_bias, else dtype.
std::vector<SafetensorsEntry> random_tensor_entries(const ModelConfig& config, DType dtype);

// Hands the tensor's bytes to `sink` in order, in chunks of at most 8 MiB;
// stops and returns false as soon as sink does.
using ByteSink = std::function<bool(const void* bytes, size_t n)>;
bool random_tensor_bytes(const ModelConfig& config, const SafetensorsEntry& entry, uint64_t seed, const ByteSink& sink);

}  // namespace sb
