// The CPU implementation of Kernels (runtime/kernels.h). Each operation lives
// in its own file beside this one; all share the V16 reduction rules of
// simd.h, which is what makes them split invariant.
#pragma once

#include "runtime/kernels.h"
#include "runtime/threads.h"

namespace sb::cpu {

class CpuKernels final : public Kernels {
 public:
  explicit CpuKernels(ThreadPool* pool) : pool_(pool) {}
  const char* name() const override { return "cpu"; }
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
  ThreadPool* pool_;
};

}  // namespace sb::cpu
