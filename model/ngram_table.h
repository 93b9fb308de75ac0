// The PLE n-gram table of one qwen4exp layer (docs/model-spec.md section 7):
// hundreds of millions of rows, of which a token reads one per n-gram head.
// The table stays where the checkpoint's mapping has it, in its shards
// (`ngram_embedding.shard_<i>.weight`), and is never copied: only the rows
// read are paged in.
//
// Immutable after bind(); gather() may run on many threads at once (each
// with its own kernels or sharing thread-safe ones).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "model/config.h"
#include "model/weights.h"
#include "runtime/kernels.h"

namespace sb {

class NgramTable {
 public:
  // The shards of PLE layer number `ple_index` (its place in
  // config.ple_layers) as bound in `weights`.
  static Status bind(const WeightSet& weights, const ModelConfig& config, int64_t ple_index, NgramTable* out);

  int64_t rows() const { return shard_rows_ * static_cast<int64_t>(shards_.size()); }
  int64_t dim() const { return dim_; }
  // The shards as the kernels read them: views into the mapping.
  const std::vector<WeightRef>& shards() const { return shards_; }

  // out[j, :] = table row rows[j], widened to f32 (Kernels::embed_rows).
  // REQUIRES: every row in [0, rows()).
  void gather(Kernels& kernels, std::span<const int64_t> rows, float* out) const;

 private:
  std::vector<WeightRef> shards_;
  int64_t shard_rows_ = 0;
  int64_t dim_ = 0;
};

}  // namespace sb
