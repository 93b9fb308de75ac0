// Test-only: CPU kernels whose quantized tiles fold the blocks of a tile of
// several rows backwards (cpu::BlockOrder::kReversedInTiles), an order that
// depends on the batch. The shipped binary has no way to make them: the
// product constructs CpuKernels with the reference order alone.
#pragma once

#include <memory>

#include "runtime/cpu/cpu_kernels.h"

namespace sb {

inline std::unique_ptr<Kernels> make_mutated_cpu_kernels(ThreadPool* pool, const KernelOptions& options = {}) {
  return std::make_unique<cpu::CpuKernels>(pool, options, cpu::BlockOrder::kReversedInTiles);
}

}  // namespace sb
