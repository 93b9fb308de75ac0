// The parts of Qwen3.8-Flash-Next (`qwen4exp`; Hugging Face model_type
// `qwen4_exp`, text config `qwen4_exp_text`) that its config and checkpoint
// add to the Qwen3.5 family (docs/model-spec.md, "qwen4exp"): the QSA
// indexer's fields, hyper-connections in place of every norm, the PLE n-gram
// layer. config.cpp and weights.cpp call these for that arch only.
//
// Tensor names are the checkpoint's own (transformers' Qwen4ExpForCausalLM
// under "model.", Qwen4ExpForConditionalGeneration under
// "model.language_model."). Pure functions: any thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/config_reader.h"

namespace sb {

// Whether a layer_types entry names a QSA layer: "full_attention", or the
// names transformers' config class gives it, "deepseek_sparse_attention" and
// "hybrid_indexed" (a QSA layer that also holds the PLE layer).
bool qwen4exp_attention_name(const std::string& name);
// The name config_to_json writes for layer i (one transformers accepts).
const char* qwen4exp_layer_type_name(const ModelConfig& config, int64_t layer);

// Reads and checks the qwen4exp fields (indexer, hyper-connections, PLE,
// output gate, eos) once the shared fields are parsed. Errors name the field.
Status parse_qwen4exp(const ConfigReader& r, ModelConfig* config);
// The text describe() appends for qwen4exp.
std::string qwen4exp_describe(const ModelConfig& config);
// Writes those fields into a text config object.
void qwen4exp_to_json(const ModelConfig& config, nlohmann::ordered_json* text);

// Layer i's hyper-connection mixers and, on a PLE layer, the PLE tensors
// (the table as ngram_split_parts shards, the three I64 hash constants).
void qwen4exp_layer_tensors(const ModelConfig& config, int64_t layer, std::vector<TensorSpec>* out);
// The output mixer in place of the final norm.
void qwen4exp_head_tensors(const ModelConfig& config, std::vector<TensorSpec>* out);

// The values of an I64 constant tensor named in qwen4exp_layer_tensors;
// false for any other name.
bool qwen4exp_constant(const ModelConfig& config, const std::string& name, std::vector<int64_t>* values);
// Every I64 constant of the checkpoint equals the one the config defines
// (a table hashed with other constants reads other rows: an error naming
// the tensor and its first differing entry).
Status qwen4exp_check_constants(const Checkpoint& checkpoint, const ModelConfig& config);

}  // namespace sb
