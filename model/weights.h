// WeightSet: the checkpoint's tensors checked against a ModelConfig and
// bound by name, for the forward pass. bind() promises, or fails with an
// error naming the tensor and the file:
//  - every tensor of expected_tensors(config) is present with its shape;
//  - every other tensor is an error, except those real checkpoints carry for
//    parts we do not run (`model.visual.*`, `mtp.*`, a tied `lm_head.weight`);
//  - MoE experts are accepted in either layout, per layer (docs/models.md,
//    "MoE experts"); expert() hides the difference.
// Views point into the Checkpoint's mapping: the Checkpoint must outlive the
// WeightSet. Immutable after bind(); safe to read from many threads.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/checkpoint.h"
#include "model/config.h"

namespace sb {

// A row-major [rows, cols] matrix lying inside a checkpoint tensor.
struct MatrixView {
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;          // first element of the first row
  const TensorView* tensor = nullptr;  // the tensor it lies in (for messages)
  int64_t row_offset = 0;              // first row, counting the tensor as [numel / cols, cols]
};

// Expert e of one MoE layer: gate and up [I_e, H], down [H, I_e].
struct ExpertWeights {
  MatrixView gate, up, down;
};

class WeightSet {
 public:
  WeightSet() = default;
  WeightSet(const WeightSet&) = delete;
  WeightSet& operator=(const WeightSet&) = delete;
  WeightSet(WeightSet&&) = default;
  WeightSet& operator=(WeightSet&&) = default;

  static Status bind(const Checkpoint& checkpoint, const ModelConfig& config, WeightSet* out);

  // Full safetensors name (e.g. "model.layers.0.self_attn.q_proj.weight").
  // "lm_head.weight" is the embedding when tied. Routed experts are reached
  // through expert(), since their names depend on the checkpoint's layout.
  // get() aborts on a name bind() did not check: that is a programming error.
  const TensorView* find(const std::string& name) const;
  const TensorView& get(const std::string& name) const;
  // get(prefix + "layers.<layer>." + suffix), e.g. layer(3, "linear_attn.A_log").
  const TensorView& layer(int64_t layer, const std::string& suffix) const;
  const TensorView& embed() const { return get(prefix_ + "embed_tokens.weight"); }
  const TensorView& final_norm() const { return get(prefix_ + "norm.weight"); }
  const TensorView& lm_head() const { return get("lm_head.weight"); }

  // REQUIRES: config.layer_is_moe(layer), 0 <= e < n_experts.
  const ExpertWeights& expert(int64_t layer, int64_t e) const;
  // Whether layer's routed experts came as fused 3-D tensors.
  bool fused_experts(int64_t layer) const;

 private:
  std::string prefix_;
  std::map<std::string, const TensorView*> tensors_;
  std::vector<std::vector<ExpertWeights>> experts_;  // [layer][expert], empty for dense layers
  std::vector<bool> fused_;
};

// The whole tensor as a [shape[0], numel / shape[0]] matrix (a 1-D tensor is one row).
MatrixView as_matrix(const TensorView& tensor);
// Converts n elements of `dtype` at src to float.
void convert_to_f32(DType dtype, const void* src, int64_t n, float* dst);
// A = -exp(A_log) of a Gated DeltaNet head, the one definition (the model
// computes it at load, the GGUF writer stores it as ssm_a).
float neg_exp_a_log(float a_log);
// A whole matrix as floats, row-major.
std::vector<float> to_f32(const MatrixView& m);

}  // namespace sb
