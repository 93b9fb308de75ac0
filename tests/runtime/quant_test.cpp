// The quantized formats against llama.cpp: dequantization bit for bit as
// gguf-py's, quantization byte for byte as llama-quantize's reference
// quantizers (fixtures from tools/quant/make_fixtures.py), and bad rows refused.
#include "runtime/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace sb {
namespace {

struct Type {
  DType dtype;
  const char* file;
};
constexpr Type kTypes[] = {{DType::kQ8_0, "q8_0"}, {DType::kQ4_0, "q4_0"}, {DType::kQ4_K, "q4_k"},
                           {DType::kQ5_K, "q5_k"}, {DType::kQ6_K, "q6_k"}, {DType::kQ5_0, "q5_0"},
                           {DType::kQ5_1, "q5_1"}, {DType::kQ2_K, "q2_k"}, {DType::kQ3_K, "q3_k"},
                           {DType::kIQ4_NL, "iq4_nl"}, {DType::kIQ4_XS, "iq4_xs"}};

std::vector<uint8_t> fixture(const std::string& name) {
  const char* src = std::getenv("SB_SOURCE_DIR");
  EXPECT_NE(src, nullptr) << "SB_SOURCE_DIR is not set (run through ctest)";
  std::ifstream in(std::string(src ? src : ".") + "/tests/runtime/data/quant/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::vector<float> floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> f(bytes.size() / 4);
  std::memcpy(f.data(), bytes.data(), f.size() * 4);
  return f;
}

TEST(QuantTest, DequantizesAsGgufPyBitForBit) {
  for (const Type& t : kTypes) {
    SCOPED_TRACE(t.file);
    const std::vector<uint8_t> blocks = fixture(std::string(t.file) + ".blocks");
    const std::vector<float> want = floats(fixture(std::string(t.file) + ".dequant"));
    const DTypeBlock block = dtype_block(t.dtype);
    ASSERT_EQ(static_cast<int64_t>(blocks.size()) / block.bytes * block.elems, static_cast<int64_t>(want.size()));
    std::vector<float> got(want.size());
    ASSERT_TRUE(dequantize_row(t.dtype, blocks.data(), static_cast<int64_t>(got.size()), got.data()).is_ok());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(0, std::memcmp(&got[i], &want[i], 4)) << "element " << i << ": " << got[i] << " vs " << want[i];
  }
}

TEST(QuantTest, QuantizesAsLlamaQuantizeByteForByte) {
  const std::vector<float> x = floats(fixture("input.f32"));
  constexpr int64_t kCols = 512;
  const int64_t rows = static_cast<int64_t>(x.size()) / kCols;
  ASSERT_EQ(rows, 4);
  for (const Type& t : kTypes) {
    SCOPED_TRACE(t.file);
    const std::vector<uint8_t> want = fixture(std::string(t.file) + ".quant");
    const int64_t row_bytes = dtype_row_bytes(t.dtype, kCols);
    ASSERT_EQ(static_cast<int64_t>(want.size()), rows * row_bytes);
    std::vector<uint8_t> got(want.size());
    for (int64_t r = 0; r < rows; ++r)
      ASSERT_TRUE(quantize_row(t.dtype, x.data() + r * kCols, kCols, got.data() + r * row_bytes).is_ok());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << "byte " << i << " (row " << static_cast<int64_t>(i) / row_bytes << ")";
  }
}

TEST(QuantTest, RoundTripStaysWithinHalfAStep) {
  // Q8_0 of values already on its grid comes back exactly.
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = static_cast<float>(i % 32 - 16) * 0.5f;
  x[31] = 63.5f;  // amax 63.5: step 0.5
  x[63] = 63.5f;
  std::vector<uint8_t> q(static_cast<size_t>(dtype_row_bytes(DType::kQ8_0, 64)));
  ASSERT_TRUE(quantize_row(DType::kQ8_0, x.data(), 64, q.data()).is_ok());
  std::vector<float> back(64);
  ASSERT_TRUE(dequantize_row(DType::kQ8_0, q.data(), 64, back.data()).is_ok());
  EXPECT_EQ(back, x);
}

TEST(QuantTest, RefusesRowsThatAreNotWholeBlocksAndNonFiniteValues) {
  std::vector<float> x(300, 1.0f);
  std::vector<uint8_t> q(1024);
  const Status s = quantize_row(DType::kQ4_K, x.data(), 300, q.data());
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("256"), std::string::npos) << s.message();
  EXPECT_FALSE(dequantize_row(DType::kQ6_K, q.data(), 100, x.data()).is_ok());
  EXPECT_FALSE(quantize_row(DType::kBF16, x.data(), 256, q.data()).is_ok());
  EXPECT_FALSE(dequantize_row(DType::kQ8_0, q.data(), 0, x.data()).is_ok());
  x[7] = std::nanf("");
  const Status nan = quantize_row(DType::kQ8_0, x.data(), 256, q.data());
  EXPECT_NE(nan.message().find("non-finite"), std::string::npos) << nan.message();
  x[7] = -INFINITY;
  EXPECT_FALSE(quantize_row(DType::kQ6_K, x.data(), 256, q.data()).is_ok());
}

}  // namespace
}  // namespace sb
