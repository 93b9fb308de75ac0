// Generated checkpoints and loaded models for tests: the one fixture cache.
//
// checkpoint() writes a deterministic random-weight checkpoint
// (model/gen_model.h) with the real Qwen3 tokenizer once per test process,
// keyed by everything that changes its bytes (arch, preset, seed, dtype and
// the name of a config edit), under process_temp_dir(); later calls return
// the same directory. shared_model() loads one Model per (arch, seed) for the
// whole process: a Model is immutable and thread-safe after load.
// Failures are reported as gtest failures of the calling test.
// Thread safety: every function may be called from any thread.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/gen_model.h"
#include "model/gguf_model.h"
#include "model/model.h"

namespace sb::testing {

struct CheckpointSpec {
  Arch arch = Arch::kQwen3Next;
  std::string preset = "tiny";
  uint64_t seed = 1;
  DType dtype = DType::kBF16;
  // A change to the preset's config; `variant` names it in the cache key
  // (required when edit is set).
  std::string variant;
  void (*edit)(ModelConfig*) = nullptr;
};

// The checkpoint's directory.
std::string checkpoint(const CheckpointSpec& spec);
inline std::string tiny_checkpoint(Arch arch, uint64_t seed = 1, DType dtype = DType::kBF16,
                                   const std::string& variant = "", void (*edit)(ModelConfig*) = nullptr) {
  return checkpoint(CheckpointSpec{arch, "tiny", seed, dtype, variant, edit});
}

// The checkpoint of `spec` written by statebank's quantizer as a GGUF file
// of `type` (model/gguf_model.h), once per process; its path.
std::string gguf_file(const CheckpointSpec& spec, GgufFileType type);
// A tiny preset widened to rows of 256 (hidden and MLP widths): the K-quant
// block, so a q4_k_m file holds Q4_K, Q5_K and Q6_K tensors, not only the
// Q8_0 fallback of the tiny preset's 64-wide rows.
void widen_to_k_blocks(ModelConfig* config);

// How a test's model is stored: the generated tiny checkpoint itself, or a
// GGUF file statebank quantize made of it (q4_k_m and the low-bit mixes from
// the preset widened by widen_to_k_blocks, so that 256-blocks are used).
enum class Weights { kCheckpoint, kQ8_0, kQ4_K_M, kQ2_K, kIQ4_NL, kIQ4_XS };
const char* weights_name(Weights weights);  // "checkpoint", "q8_0", "q4_k_m", "q2_k", "iq4_nl", "iq4_xs"
std::string model_path(Arch arch, Weights weights, uint64_t seed = 1);

// A fresh Model of a checkpoint (tests that compare thread counts or
// precisions, or need their own instance); null on failure. precision unset:
// the checkpoint's default (bf16 for a bf16 checkpoint).
std::unique_ptr<Model> load_model(const std::string& dir, int threads = 1,
                                  std::optional<Precision> precision = std::nullopt);

// The tiny checkpoint of `arch` with `seed`, loaded once per process.
const Model& shared_model(Arch arch, uint64_t seed = 7);

// Every row's logits of a prefill of `prompt` (all_logits), then those of
// one decode step of `next`: what the file-equivalence tests compare.
std::vector<float> prefill_and_step_logits(const Model& m, std::span<const int32_t> prompt, int32_t next);

// The architectures every all-arch test runs: the four Qwen families and
// qwen4exp.
inline constexpr Arch kAllArchs[] = {Arch::kQwen3, Arch::kQwen3Next, Arch::kQwen35, Arch::kQwen35Moe, Arch::kQwen4Exp};

}  // namespace sb::testing
