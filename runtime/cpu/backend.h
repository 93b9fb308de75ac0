// The CPU kernels as the rest of the program reaches them: a factory for
// Model::load (what the CLI, the server, benchmarks and tests hand it), and
// kernels over a caller's pool (kernel tests and benchmarks). Only runtime,
// server, cli, bench, tests and fuzz may include runtime/cpu/
// (cmake/layering.cmake): the model sees runtime/kernels.h alone.
#pragma once

#include <memory>

#include "runtime/kernels.h"
#include "runtime/threads.h"

namespace sb {

// Kernels on a pool of their own of KernelOptions::threads threads.
KernelsFactory cpu_kernels_factory();

// The CPU kernels, parallel over output elements on `pool` (the caller's,
// which outlives them).
std::unique_ptr<Kernels> make_cpu_kernels(ThreadPool* pool, const KernelOptions& options = {});

}  // namespace sb
