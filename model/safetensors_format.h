// The safetensors container layout, shared by SafetensorsWriter and the
// streaming checkpoint generator (model/gen_model.cpp).
//
// A file is: 8-byte little-endian header length N, N bytes of JSON header
// (padded with spaces so the data starts 8-byte aligned, as Hugging Face's
// writer does), then the tensors' bytes back to back in header order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/state.h"

namespace sb {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
};

// "F32", "BF16", "F16": the safetensors spelling.
const char* safetensors_dtype_name(DType dtype);
uint64_t safetensors_nbytes(const SafetensorsEntry& entry);
// The length prefix and the padded JSON header for tensors laid out in the
// given order; "__metadata__" is {"format": "pt"}.
std::string safetensors_header(const std::vector<SafetensorsEntry>& entries);

}  // namespace sb
