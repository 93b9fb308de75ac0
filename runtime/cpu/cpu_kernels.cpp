#include "runtime/cpu/cpu_kernels.h"

namespace sb {

const char* precision_name(Precision p) { return p == Precision::kBF16 ? "bf16" : "f32"; }

Status parse_precision(std::string_view text, Precision* out) {
  if (text == "bf16") *out = Precision::kBF16;
  else if (text == "f32") *out = Precision::kF32;
  else return Status::invalid("unknown precision '" + std::string(text) + "' (bf16 or f32)");
  return Status::ok();
}

WeightRef WeightRef::slice_rows(int64_t first, int64_t n) const {
  WeightRef r = *this;
  r.rows = n;
  r.data = static_cast<const char*>(data) + first * cols * static_cast<int64_t>(dtype_size(dtype));
  r.packed.reset();
  return r;
}

namespace cpu {

namespace {

const char* f32_isa() {
#if defined(__AVX512F__)
  return "avx512";
#elif defined(__AVX2__) && defined(__FMA__)
  return "avx2";
#else
  return "scalar";
#endif
}

}  // namespace

CpuKernels::CpuKernels(ThreadPool* pool, const KernelOptions& options) : pool_(pool), options_(options) {
  name_ = std::string("cpu/") + precision_name(options.precision) + "/";
  if (options.precision == Precision::kBF16) {
    native_bf16_ = options.bf16_path != KernelOptions::Bf16Path::kFma && native_bf16_agrees();
    fma_many_rows_ = options.bf16_path == KernelOptions::Bf16Path::kAuto && fma_tiles_faster();
    name_ += native_bf16_ ? "avx512bf16" : std::string("emulated-") + f32_isa();
  } else {
    name_ += f32_isa();
  }
}

}  // namespace cpu

std::unique_ptr<Kernels> make_cpu_kernels(ThreadPool* pool, const KernelOptions& options) {
  return std::make_unique<cpu::CpuKernels>(pool, options);
}

}  // namespace sb
