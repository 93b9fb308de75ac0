// TensorView: one tensor of a mapped model file (safetensors or GGUF), its
// bytes left where the file holds them. The view owns nothing; whoever hands
// it out keeps the bytes alive. Data may be unaligned for its dtype.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/dtype.h"

namespace sb {

struct TensorView {
  std::string name;
  std::string file;  // the file holding it, for error messages
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // row-major, outermost first
  const void* data = nullptr;
  uint64_t nbytes = 0;
  int64_t numel() const;
};

// "[2, 3]": a shape as error messages show it.
std::string shape_text(const std::vector<int64_t>& shape);

}  // namespace sb
