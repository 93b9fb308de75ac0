// The metadata of a GGUF model file: a ModelConfig as llama.cpp's keys
// ({arch}.block_count, {arch}.ssm.state_size, ...) and back, and the
// vocabulary of a checkpoint's tokenizer files as tokenizer.ggml.* keys.
// Internal to model/ (model/gguf_model.h).
#pragma once

#include <string>

#include "common/status.h"
#include "model/config.h"
#include "gguf/gguf.h"

namespace sb {

void put_config(const ModelConfig& config, GgufWriter* w);
// The config of the file's metadata, validated as config.json would be;
// norm_weight_offset false and a_stored_negated true for the hybrids (the
// file stores 1 + w and -exp(A_log)).
Status read_config(const GgufFile& file, ModelConfig* out);
// qwen4exp's own keys (model/gguf_qwen4exp.cpp): written by put_config;
// read once the shared keys and the layer types are, each missing or bad key
// an error naming it and the file.
void put_qwen4exp_config(const ModelConfig& config, GgufWriter* w);
Status read_qwen4exp_config(const GgufFile& file, ModelConfig* config);
// tokenizer.ggml.* from dir/tokenizer.json and dir/tokenizer_config.json
// (chat template, eos and pad tokens when it names them).
Status put_vocab(const std::string& dir, int64_t vocab_size, GgufWriter* w);

}  // namespace sb
