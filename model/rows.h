// Rows: a forward step's working floats, not cleared when made.
//
// Each is written whole before it is read (a kernel's whole output, or rows
// copied in), so clearing it first would only cost time: an 8-row decode
// step of the 0.8b preset cleared about 18 MB, a millisecond of the calling
// thread while the pool's workers waited.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

namespace sb {

class Rows {
 public:
  Rows() = default;
  explicit Rows(size_t n) : data_(std::make_unique_for_overwrite<float[]>(n)), size_(n) {}

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  size_t size() const { return size_; }
  float& operator[](size_t i) { return data_[i]; }
  float operator[](size_t i) const { return data_[i]; }
  operator std::span<const float>() const { return {data_.get(), size_}; }

 private:
  std::unique_ptr<float[]> data_;
  size_t size_ = 0;
};

}  // namespace sb
