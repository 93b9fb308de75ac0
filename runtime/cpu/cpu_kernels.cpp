#include "runtime/cpu/cpu_kernels.h"

namespace sb {

const char* precision_name(Precision p) { return p == Precision::kBF16 ? "bf16" : "f32"; }

Status parse_precision(std::string_view text, Precision* out) {
  if (text == "bf16") *out = Precision::kBF16;
  else if (text == "f32") *out = Precision::kF32;
  else return Status::invalid("unknown precision '" + std::string(text) + "' (bf16 or f32)");
  return Status::ok();
}

KernelNumerics kernel_numerics() {
  // Version 5: quantized products scale their activation blocks as
  // llama.cpp's x86 build does (activation_block_scale: the f16 scale of its
  // q8_0, 1 / (127 / amax) for its q8_K; were amax / 127 in f32).
  // Version 4: e^x, log, sin, cos and powers are runtime/math.h's (were the C
  // library's in RoPE, the softmaxes, the delta rule's decays, the gates'
  // softplus and the sampler), and vexp gives +0 at and below -87.
  constexpr const char* kVersion = "statebank-cpu-numerics-5";
#if defined(__AVX512F__)
  return {kVersion, "avx512"};
#elif defined(__AVX2__) && defined(__FMA__)
  return {kVersion, "avx2+fma"};
#else
  return {kVersion, "scalar"};
#endif
}

namespace cpu {

CpuKernels::CpuKernels(std::unique_ptr<ThreadPool> pool, const KernelOptions& options)
    : CpuKernels(pool.get(), options) {
  owned_pool_ = std::move(pool);
}

CpuKernels::CpuKernels(ThreadPool* pool, const KernelOptions& options, BlockOrder order)
    : pool_(pool), options_(options), block_order_(order) {
  name_ = std::string("cpu/") + precision_name(options.precision) + "/";
  if (options.precision == Precision::kBF16) {
    native_bf16_ = options.bf16_path != KernelOptions::Bf16Path::kFma && native_bf16_agrees();
    fma_many_rows_ = options.bf16_path == KernelOptions::Bf16Path::kAuto && fma_tiles_faster();
    name_ += native_bf16_ ? "avx512bf16" : std::string("emulated-") + kernel_numerics().isa;
  } else {
    name_ += kernel_numerics().isa;
  }
}

}  // namespace cpu

std::unique_ptr<Kernels> make_cpu_kernels(ThreadPool* pool, const KernelOptions& options) {
  return std::make_unique<cpu::CpuKernels>(pool, options);
}

KernelsFactory cpu_kernels_factory() {
  return [](const KernelOptions& options) -> std::unique_ptr<Kernels> {
    return std::make_unique<cpu::CpuKernels>(std::make_unique<ThreadPool>(options.threads), options);
  };
}

}  // namespace sb
