// Damaging a State (or a bank object's part) on purpose, whatever the dtype
// a component is stored in (f32, or bf16 for the attention rows under the
// bf16 precision): the negative tests that prove a comparison with bypass
// would notice a wrong state.
// Header-only; a State is private to the thread that edits it.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "runtime/state.h"

namespace sb::testing {

// Values stored in component c (rows * row_elems).
inline size_t stored_values(const State& state, size_t c) {
  return state.bytes(c).size() / dtype_size(state.schema().components[c].dtype);
}

// Value i of component c, widened to f32.
inline float stored_value(const State& state, size_t c, size_t i) {
  float v = 0.0f;
  const DType dtype = state.schema().components[c].dtype;
  const uint8_t* p = state.bytes(c).data() + i * dtype_size(dtype);
  if (dtype == DType::kF32) {
    std::memcpy(&v, p, 4);
  } else {
    uint16_t h;
    std::memcpy(&h, p, 2);
    v = dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
  }
  return v;
}

// Sets value i of component c to v, rounded to the component's dtype.
inline void set_stored_value(State& state, size_t c, size_t i, float v) {
  const DType dtype = state.schema().components[c].dtype;
  encode_values(dtype, std::span<const float>(&v, 1), state.storage(c).data() + i * dtype_size(dtype));
}

// Moves value i of component c up by one bf16 ulp (2^-8 relative): the
// resolution at which the bf16 precision rounds the inputs of its products,
// so the smallest damage that must show whatever the storage dtype. In f32
// storage that is 2^16 f32 ulps; in bf16 storage one step of the stored value.
inline void bump_one_bf16_ulp(State& state, size_t c, size_t i) {
  const DType dtype = state.schema().components[c].dtype;
  uint8_t* p = state.storage(c).data() + i * dtype_size(dtype);
  if (dtype == DType::kF32) {
    uint32_t u;
    std::memcpy(&u, p, 4);
    u += 0x10000u;
    std::memcpy(p, &u, 4);
  } else {
    uint16_t h;
    std::memcpy(&h, p, 2);
    h += 1;
    std::memcpy(p, &h, 2);
  }
}

// Adds `delta` to every `every`-th value of stored bytes in `dtype` (a bank
// object's part), rounding back to the dtype: other numbers, same shape.
inline void add_to_every_nth_value(std::vector<uint8_t>& bytes, DType dtype, size_t every, float delta) {
  const size_t w = dtype_size(dtype);
  for (size_t at = 0; at + w <= bytes.size(); at += every * w) {
    float v;
    if (dtype == DType::kF32) {
      std::memcpy(&v, bytes.data() + at, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, bytes.data() + at, 2);
      v = dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
    v += delta;
    encode_values(dtype, std::span<const float>(&v, 1), bytes.data() + at);
  }
}

}  // namespace sb::testing
