#include "model/ngram_table.h"

#include "runtime/dtype.h"

namespace sb {

Status NgramTable::bind(const WeightSet& w, const ModelConfig& c, int64_t ple_index, NgramTable* out) {
  if (ple_index < 0 || ple_index >= static_cast<int64_t>(c.ple_layers.size()))
    return Status::invalid("no PLE layer number " + std::to_string(ple_index));
  NgramTable t;
  const std::string prefix = "ple.ple_embedding.ngram_embedding.shard_";
  for (int64_t s = 0; s < c.ngram_split_parts; ++s) {
    const TensorView& v = w.layer(c.ple_layers[ple_index], prefix + std::to_string(s) + ".weight");
    const MatrixView m = as_matrix(v);
    // The row reader (Kernels::embed_rows) widens F32, BF16, F16 and whole blocks.
    if (m.dtype != DType::kF32 && m.dtype != DType::kBF16 && m.dtype != DType::kF16 &&
        !(dtype_is_quantized(m.dtype) && m.cols % dtype_block(m.dtype).elems == 0))
      return Status::unsupported("n-gram table " + v.name + " in file " + v.file + " is " + dtype_name(m.dtype) +
                                 "; its rows are read as F32, BF16, F16 or whole quantized blocks");
    t.shards_.push_back(WeightRef{m.dtype, m.rows, m.cols, m.data, nullptr});
  }
  t.shard_rows_ = t.shards_.front().rows;
  t.dim_ = t.shards_.front().cols;
  *out = std::move(t);
  return Status::ok();
}

void NgramTable::gather(Kernels& kernels, std::span<const int64_t> rows, float* out) const {
  for (size_t j = 0; j < rows.size(); ++j) {
    const int32_t local = static_cast<int32_t>(rows[j] % shard_rows_);
    kernels.embed_rows(shards_[static_cast<size_t>(rows[j] / shard_rows_)], std::span<const int32_t>(&local, 1),
                       out + static_cast<int64_t>(j) * dim_);
  }
}

}  // namespace sb
