#include "runtime/cpu/cpu_kernels.h"

namespace sb {

WeightRef WeightRef::slice_rows(int64_t first, int64_t n) const {
  WeightRef r = *this;
  r.rows = n;
  r.data = static_cast<const char*>(data) + first * cols * static_cast<int64_t>(dtype_size(dtype));
  return r;
}

std::unique_ptr<Kernels> make_cpu_kernels(ThreadPool* pool) { return std::make_unique<cpu::CpuKernels>(pool); }

}  // namespace sb
