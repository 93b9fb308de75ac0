// The memory kernels: gathers, scatters, splits and the embedding lookup
// between the arithmetic steps (runtime/kernels.h "Memory"). Copies of whole
// row pieces, so a row's bits are its source's; weighted_sum_rows is the one
// with arithmetic, each element's sum in rank order.
#include <algorithm>
#include <cstring>

#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/float_mode.h"
#include "runtime/dtype.h"
#include "runtime/quant.h"

namespace sb::cpu {

void CpuKernels::gather_rows(const float* x, const int64_t* rows, int64_t n, int64_t dim, float* out) {
  for_ranges(n, dim, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) std::memcpy(out + j * dim, x + rows[j] * dim, dim * sizeof(float));
  });
}

void CpuKernels::scatter_rows(const float* y, const int64_t* rows, int64_t n, int64_t dim, float* out) {
  for_ranges(n, dim, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) std::memcpy(out + rows[j] * dim, y + j * dim, dim * sizeof(float));
  });
}

void CpuKernels::weighted_sum_rows(const float* y, const int64_t* at, const float* weights, int64_t rows, int64_t k,
                                   int64_t dim, float* out) {
  FlushSubnormals mode;
  for_ranges(rows, k * dim, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* o = out + r * dim;
      std::fill(o, o + dim, 0.0f);
      for (int64_t i = 0; i < k; ++i) {
        const float s = weights[r * k + i];
        const float* yr = y + (at ? at[r * k + i] : r * k + i) * dim;
        for (int64_t d = 0; d < dim; ++d) o[d] += s * yr[d];
      }
    }
  });
}

void CpuKernels::split_rows(const float* x, int64_t rows, int64_t groups, std::span<const RowPart> parts) {
  int64_t group = 0;
  for (const RowPart& p : parts) group += p.width;
  const int64_t width = groups * group;
  for_ranges(rows, width, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* src = x + r * width;
      for (int64_t g = 0; g < groups; ++g)
        for (const RowPart& p : parts) {
          std::memcpy(p.out + r * p.ld + g * p.width, src, p.width * sizeof(float));
          src += p.width;
        }
    }
  });
}

void CpuKernels::embed_rows(const WeightRef& table, std::span<const int32_t> tokens, float* out) {
  const int64_t dim = table.cols, n = static_cast<int64_t>(tokens.size());
  const size_t row_bytes = static_cast<size_t>(dtype_row_bytes(table.dtype, dim));
  for_ranges(n, dim, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      const char* row = static_cast<const char*>(table.data) + tokens[static_cast<size_t>(j)] * row_bytes;
      float* o = out + j * dim;
      if (dtype_is_quantized(table.dtype)) {
        (void)dequantize_row(table.dtype, row, dim, o);  // dim is whole blocks: the loader checks every table
      } else if (table.dtype == DType::kBF16 || table.dtype == DType::kF16) {
        const bool bf16 = table.dtype == DType::kBF16;
        for (int64_t i = 0; i < dim; ++i) {
          uint16_t v;
          std::memcpy(&v, row + 2 * i, 2);  // the mmapped table may be unaligned
          o[i] = bf16 ? bf16_to_f32(v) : f16_to_f32(v);
        }
      } else {
        std::memcpy(o, row, dim * sizeof(float));
      }
    }
  });
}

}  // namespace sb::cpu
