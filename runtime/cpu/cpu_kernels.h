// The CPU implementation of Kernels (runtime/kernels.h). Each operation lives
// in its own file beside this one; all share the reduction rules of simd.h
// (fp32) and bf16.h (bf16 products), which is what makes them split invariant.
#pragma once

#include <string>

#include "runtime/kernels.h"
#include "runtime/threads.h"

namespace sb {

// Weights for the bf16 product: panels of kPanelCols output columns; within a
// panel, for each pair of input features (2p, 2p+1), the kPanelCols columns'
// pairs side by side as one 32-bit word each (element 2p in the low half).
// Columns past `rows` and a feature past `cols` are zero. Rounded with
// cpu::to_bf16; backed by transparent huge pages where the kernel gives them.
struct PackedWeight {
  static constexpr int64_t kPanelCols = 64;
  int64_t rows = 0, cols = 0, pairs = 0, panels = 0;
  uint32_t* data = nullptr;  // [panels][pairs][kPanelCols]
  size_t bytes = 0;

  PackedWeight(int64_t rows, int64_t cols);
  ~PackedWeight();
  PackedWeight(const PackedWeight&) = delete;
  PackedWeight& operator=(const PackedWeight&) = delete;
  const uint32_t* panel(int64_t p) const { return data + p * pairs * kPanelCols; }
};

namespace cpu {

class CpuKernels final : public Kernels {
 public:
  CpuKernels(ThreadPool* pool, const KernelOptions& options);
  const std::string& name() const override { return name_; }
  Precision precision() const override { return options_.precision; }
  WeightRef prepare(const WeightRef& w) override;
  void matmul(const float* x, int64_t m, const WeightRef& w, float* y) override;
  void rms_norm(const float* x, int64_t rows, int64_t dim, const float* w, float eps, bool offset, float* y) override;
  void rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, int64_t rot, const int64_t* positions,
            double theta) override;
  void attention(const AttentionInput& in, float* out) override;
  void causal_conv_silu(const float* x, int64_t t, int64_t channels, const float* weight, int64_t kernel,
                        float* state, float* out) override;
  void delta_rule_chunk(const DeltaRuleInput& in, float* state, float* out) override;
  void delta_rule_recurrent(const DeltaRuleInput& in, float* state, float* out) override;

 private:
  void matmul_f32(const float* x, int64_t m, const WeightRef& w, float* y);
  void matmul_bf16(const float* x, int64_t m, const PackedWeight& w, float* y);
  std::shared_ptr<const PackedWeight> pack(const WeightRef& w);

  ThreadPool* pool_;
  KernelOptions options_;
  bool native_bf16_ = false;  // vdpbf16ps present, allowed, and agreeing with bf16.h
  std::string name_;
};

// True when this CPU's vdpbf16ps gives the bits of dp_pair (bf16.h) on a set
// of probe lanes (random, cancelling and subnormal-range); false without
// AVX512_BF16 in the build.
bool native_bf16_agrees();

}  // namespace cpu
}  // namespace sb
