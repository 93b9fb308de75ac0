// GGUF model files: a statebank checkpoint written in the layout llama.cpp
// reads for its qwen3, qwen3next, qwen35 and qwen35moe architectures (what
// tools/gguf/convert.py writes, plus the block-quantized types), and such a
// file (ours or llama.cpp's) read back as a ModelConfig and a Checkpoint of
// the Hugging Face names the model binds.
// Contract: every rearrangement is a permutation of rows or whole blocks, so
// a file written here and loaded back gives the checkpoint's logits bit for
// bit in F32 (and in BF16 from a bf16 checkpoint); loading undoes none of
// them: each tensor it returns is a view into the file, in the file's order
// and type, and the config says how the layers read it (qkvz_split,
// value_heads_tiled, both part of the fingerprint). The layout, fact by
// fact: docs/models.md, "The GGUF layout".
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "gguf/gguf.h"

namespace sb {

// What `statebank quantize --type` names: the type of every matrix, or a
// llama-quantize mix (q2_k, q3_k_m, q4_k_m, q5_k_m, iq4_nl, iq4_xs).
enum class GgufFileType { kF32, kBF16, kQ8_0, kQ4_0, kQ4_K_M, kQ5_K_M, kQ6_K, kQ2_K, kQ3_K_M, kIQ4_NL, kIQ4_XS };
Status parse_gguf_file_type(const std::string& text, GgufFileType* out);
const char* gguf_file_type_name(GgufFileType type);

// Writes the checkpoint directory `dir` (config.json, safetensors,
// tokenizer.json, tokenizer_config.json) as a GGUF file at out_path.
// Tensors that stay F32 in every type: norms, 1-D tensors, the conv weight,
// the routers. Block types per tensor as llama-quantize chooses them for the
// mix; a row that is not whole blocks of the chosen type falls back as
// llama-quantize's does (Q2_K and Q3_K to Q4_0, Q4_K to Q5_0, Q5_K to Q5_1,
// Q6_K to Q8_0, IQ4_XS to IQ4_NL, then F16).
// Dense qwen3_next layers and norm_topk_prob false have no llama.cpp
// counterpart and are refused.
Status write_gguf_model(const std::string& dir, GgufFileType type, const std::string& out_path);
// The same from a config and a checkpoint already open, the tokenizer files
// in vocab_dir (`source` names the model in errors). before_tensor, when
// given, runs before each GGUF tensor's values are read, with its name:
// gen-model's direct GGUF file (model/gen_model.h) generates a layer's
// tensors only when the file reaches it.
using TensorHook = std::function<Status(const std::string& gguf_name)>;
Status write_gguf_model(const ModelConfig& config, const Checkpoint& ck, const std::string& source,
                        const std::string& vocab_dir, GgufFileType type, const std::string& out_path,
                        const TensorHook& before_tensor);

// The model in a GGUF file: its config from the metadata and its tensors
// under the Hugging Face names of expected_tensors(config), rearranged back
// (views into the file where the bytes need no change). Errors name the key
// or the GGUF tensor: a missing key, an architecture other than the four, a
// missing tensor or one whose shape disagrees with the metadata.
struct GgufModel {
  ModelConfig config;
  std::unique_ptr<Checkpoint> checkpoint;
  std::shared_ptr<const GgufFile> file;
};
Status open_gguf_model(const std::string& path, GgufModel* out);
// The same from a parsed file (the fuzz target's entry).
Status gguf_model_from_file(std::shared_ptr<const GgufFile> file, GgufModel* out);

// Whether a --model argument names a GGUF file: it ends in .gguf (any case),
// or it is a file (a checkpoint is a directory), whatever its name.
bool is_gguf_path(const std::string& path);

}  // namespace sb
