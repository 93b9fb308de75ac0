// The CPU implementation of Kernels (runtime/kernels.h). Each operation lives
// in its own file beside this one; all share the reduction rules of simd.h
// (fp32) and bf16.h (bf16 products), which is what makes them split invariant.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "runtime/cpu/backend.h"
#include "runtime/cpu/quant_kernels.h"
#include "runtime/kernels.h"
#include "runtime/quant.h"
#include "runtime/threads.h"

namespace sb {

// Weights for the bf16 product: panels of kPanelCols output columns; within a
// panel, for each pair of input features (2p, 2p+1), the kPanelCols columns'
// pairs side by side as one 32-bit word each (element 2p in the low half).
// Several weights of the same input (parts) follow each other, each from a
// panel of its own; columns past a part's rows and a feature past `cols` are
// zero. Rounded with cpu::to_bf16; backed by transparent huge pages when
// large enough.
struct PackedWeight {
  static constexpr int64_t kPanelCols = 64;
  int64_t cols = 0, pairs = 0, panels = 0;
  std::vector<int64_t> part_rows;   // output rows of each part
  std::vector<int64_t> part_panel;  // first panel of each part, then `panels`
  uint32_t* data = nullptr;         // [panels][pairs][kPanelCols]
  size_t bytes = 0;
  DType quant = DType::kF32;  // kF32: the bf16 panels above; else the quantized layout

  PackedWeight(std::vector<int64_t> part_rows, int64_t cols);
  // A block-quantized weight of `rows` x `cols` repacked into `bytes` bytes
  // (matmul_quant_packed.cpp says the layout).
  PackedWeight(DType quant, int64_t rows, int64_t cols, size_t bytes);
  ~PackedWeight();
  const uint8_t* quant_bytes() const { return reinterpret_cast<const uint8_t*>(data); }
  PackedWeight(const PackedWeight&) = delete;
  PackedWeight& operator=(const PackedWeight&) = delete;
  const uint32_t* panel(int64_t p) const { return data + p * pairs * kPanelCols; }

 private:
  void allocate(size_t want);
  bool mapped_ = false;  // data is a mapping of its own (large weights), else aligned_alloc's
};

namespace cpu {

class CpuKernels final : public Kernels {
 public:
  // `order` other than kReference: test code's mutated kernels (quant_kernels.h).
  CpuKernels(ThreadPool* pool, const KernelOptions& options, BlockOrder order = BlockOrder::kReference);
  // On a pool of its own.
  CpuKernels(std::unique_ptr<ThreadPool> pool, const KernelOptions& options);
  const std::string& name() const override { return name_; }
  Precision precision() const override { return options_.precision; }
  WeightRef prepare(const WeightRef& w) override;
  void matmul(const float* x, int64_t m, const WeightRef& w, float* y) override;
  FusedWeight fuse(std::span<const WeightRef> parts) override;
  void matmul(const float* x, int64_t m, const FusedWeight& w, std::span<float* const> outs) override;
  void matmul_each(std::span<const float* const> xs, std::span<const WeightRef> ws,
                   std::span<float* const> outs) override;
  void matmul_each(std::span<const float* const> xs, std::span<const int64_t* const> rows,
                   std::span<const int64_t> ms, std::span<const WeightRef> ws, std::span<float* const> outs) override;
  void rms_norm(const float* x, int64_t rows, int64_t dim, const float* w, float eps, bool offset, float* y) override;
  void rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, int64_t rot, const int64_t* positions,
            double theta) override;
  void attention(std::span<const AttentionInput> calls, float* const* outs) override;
  using Kernels::attention;
  void causal_conv_silu(const float* x, int64_t t, int64_t channels, const float* weight, int64_t kernel,
                        float* const* states, int64_t sequences, std::span<const RowPart> out) override;
  using Kernels::causal_conv_silu;
  void delta_rule_chunk(const DeltaRuleInput& in, float* state, float* out) override;
  void delta_rule_recurrent(const DeltaRuleInput& in, float* const* states, float* out) override;
  void delta_rule_rows(const DeltaRuleInput& in, const float* from, float* const* states, float* out) override;
  void delta_rule_replay(const DeltaRuleInput& in, const float* updates, const float* from, float* state) override;
  void add(float* x, const float* y, int64_t n) override;
  void mul_activation(float* x, const float* gate, int64_t n, Activation act) override;
  void add_scaled_rows(float* out, const float* y, int64_t ld_y, const float* scale, int64_t scale_stride,
                       int64_t rows, int64_t dim, Activation act) override;
  void l2_normalise(float* x, int64_t rows, int64_t dim, float scale) override;
  void delta_gates(const float* b, const float* a, int64_t rows, int64_t heads, const float* neg_exp_a,
                   const float* dt_bias, float* beta, float* g) override;
  void mean_rows(const float* x, int64_t rows, int64_t dim, float* out) override;
  void rms_norm_groups(const float* x, int64_t rows, int64_t groups, int64_t dim, const float* w, float eps,
                       bool offset, float* y) override;
  void scale_activation(float* x, int64_t n, float scale, Activation act) override;
  void hc_mix(const float* mix, const float* normed, int64_t rows, int64_t streams, int64_t dim, float* out) override;
  void hc_inject(float* h, const float* y, const float* inject, int64_t rows, int64_t streams, int64_t dim) override;
  void ple_gate(const float* key, const float* query, const float* value, int64_t rows, int64_t streams, int64_t dim,
                float* out) override;
  void causal_conv_silu_dilated(const float* x, int64_t t, int64_t channels, const float* weight, int64_t kernel,
                                int64_t dilation, float* state, float* out) override;
  void route(const float* logits, int64_t rows, int64_t n_experts, int64_t top_k, bool renormalise, int64_t* chosen,
             float* weights) override;
  void index_scores(const float* q, const float* w, int64_t heads, int64_t dim, const float* pooled, int64_t blocks,
                    float s_scale, float* scores) override;
  void top_k(const float* scores, int64_t n, int64_t k, int64_t* out) override;
  void logit_stats(const float* logits, int64_t rows, int64_t vocab, LogitStats* out) override;
  void sparse_block_mask(const BlockMaskInput& in, uint8_t* mask) override;
  void gather_rows(const float* x, const int64_t* rows, int64_t n, int64_t dim, float* out) override;
  void scatter_rows(const float* y, const int64_t* rows, int64_t n, int64_t dim, float* out) override;
  void weighted_sum_rows(const float* y, const int64_t* at, const float* weights, int64_t rows, int64_t k, int64_t dim,
                         float* out) override;
  void split_rows(const float* x, int64_t rows, int64_t groups, std::span<const RowPart> parts) override;
  void embed_rows(const WeightRef& table, std::span<const int32_t> tokens, float* out) override;

 private:
  // Runs fn(begin, end) over [0, n) items of `cost` element operations each:
  // inline when the whole is small (a decode step's row), else in ranges on
  // the pool. For per-row and per-element work only: bits never change.
  void for_ranges(int64_t n, int64_t cost, const std::function<void(int64_t, int64_t)>& fn);
  void matmul_f32(const float* x, int64_t m, const WeightRef& w, float* y);
  void matmul_bf16(const float* x, int64_t m, const PackedWeight& w, std::span<float* const> outs);
  // A block-quantized w (matmul_quant.cpp), whatever the precision.
  void matmul_quant(const float* x, int64_t m, const WeightRef& w, float* y);
  // The ms[i] activation rows at xs[i] (or, as matmul_each's, rows[i] of
  // them) through parts[i] (every one runs_packed) into outs[i], in two
  // parallel regions whatever the parts; each the bits of
  // matmul_quant(xs[i], ms[i], parts[i], outs[i]) on those rows.
  void matmul_quant_many(std::span<const float* const> xs, std::span<const int64_t* const> rows,
                         std::span<const int64_t> ms, std::span<const WeightRef> parts,
                         std::span<float* const> outs);
  // The m <= kQuantFewRows activation rows at xs[i] through parts[i] (every
  // one runs_packed) into outs[i], all in one parallel region; the bits of
  // matmul_quant_many's.
  void matmul_quant_few(std::span<const float* const> xs, int64_t m, std::span<const WeightRef> parts,
                        std::span<float* const> outs);
  static bool runs_packed(const WeightRef& w);  // w's product runs on its AVX512-VNNI repacked copy
  std::shared_ptr<const PackedWeight> pack(std::span<const WeightRef> parts);

  std::unique_ptr<ThreadPool> owned_pool_;  // when made on a pool of its own
  ThreadPool* pool_;
  KernelOptions options_;
  BlockOrder block_order_;  // the quantized tiles' (quant_kernels.h)
  bool native_bf16_ = false;    // vdpbf16ps present, allowed, and agreeing with bf16.h
  bool fma_many_rows_ = false;  // with native_bf16_: the fma tiles for calls of kFmaMinRows rows or more
  std::string name_;
};

// True when this CPU's vdpbf16ps gives the bits of dp_pair (bf16.h) on a set
// of probe lanes (random, cancelling and subnormal-range); false without
// AVX512_BF16 in the build. Probed once per process.
bool native_bf16_agrees();
bool native_bf16_probe();  // the probe itself, every call

// True when the fma tiles multiply many rows faster than vdpbf16ps on this
// CPU (timed once per process on a 64 KiB panel, in L2 as in a prefill;
// false without AVX512_BF16 or when the instruction disagrees with bf16.h).
// Both give the same bits, so the answer changes speed only.
bool fma_tiles_faster();

}  // namespace cpu
}  // namespace sb
