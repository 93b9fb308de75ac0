// The quantized products: every kernel variant gives quant_dot_ref's bits
// for every row whatever the rows in the call, the thread count or the
// variant (batch and split invariance), a mutated reduction order in any
// type's kernel is caught, and the other readers of quantized weights (the
// embedding lookup, fused projections) agree.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "runtime/cpu/backend.h"
#include "runtime/cpu/quant_kernels.h"
#include "runtime/quant.h"
#include "runtime/threads.h"
#include "tests/util/mutated_kernels.h"

namespace sb::cpu {
namespace {

constexpr DType kTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ5_0,  DType::kQ5_1,   DType::kQ4_K, DType::kQ5_K,
                            DType::kQ6_K, DType::kQ2_K, DType::kQ3_K, DType::kIQ4_NL, DType::kIQ4_XS};
constexpr int64_t kCols = 1024, kOut = 37, kMaxRows = 511;

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

// kOut rows of random weights quantized to dtype; one block's f16 scale made
// subnormal, so that the kernels' reading of halves is checked there too, and
// row kLevelsAtTheTop all 1 (every level of Q4_K 15, of Q6_K 63).
constexpr int64_t kLevelsAtTheTop = 2;
std::vector<uint8_t> random_weights(DType dtype, uint32_t seed) {
  std::vector<float> w = random_floats(kOut * kCols, seed);
  std::fill_n(w.begin() + kLevelsAtTheTop * kCols, kCols, 1.0f);
  const int64_t row_bytes = dtype_row_bytes(dtype, kCols);
  std::vector<uint8_t> q(static_cast<size_t>(kOut * row_bytes));
  for (int64_t j = 0; j < kOut; ++j)
    EXPECT_TRUE(quantize_row(dtype, w.data() + j * kCols, kCols, q.data() + j * row_bytes).is_ok());
  const uint16_t subnormal = 0x0123;
  const int d_at = dtype == DType::kQ6_K ? 208 : dtype == DType::kQ2_K ? 80 : dtype == DType::kQ3_K ? 108 : 0;
  std::memcpy(q.data() + row_bytes + d_at, &subnormal, 2);
  return q;
}

bool same_bits(const float* a, const float* b, int64_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

struct Case {
  DType dtype;
  std::vector<uint8_t> weights;
  std::vector<float> x;
  std::vector<float> want;  // quant_dot_ref of every row
  WeightRef ref() const { return WeightRef{dtype, kOut, kCols, weights.data(), nullptr}; }
};

// Activations whose levels are all 127, so that the repacked Q4_K and Q6_K
// tiles' sums of 32 or 16 need more than 16 bits against weight row
// kLevelsAtTheTop (quant_packed_offsets): row kWideRow whole, block
// kWideBlock of row 0.
constexpr int64_t kWideRow = 5, kWideBlock = 1;
void make_wide(float* x, int64_t n) { std::fill_n(x, n, 1.0f); }

Case make_case(DType dtype) {
  Case c{dtype, random_weights(dtype, 7 + static_cast<uint32_t>(dtype)), random_floats(kMaxRows * kCols, 99), {}};
  for (int64_t i = 0; i < kCols; ++i) c.x[static_cast<size_t>(3 * kCols + i)] *= 1e-30f;  // a row of tiny values
  make_wide(c.x.data() + kWideRow * kCols, kCols);
  make_wide(c.x.data() + kWideBlock * kSuperBlock, kSuperBlock);
  QuantizedRows xq;
  quantize_rows(dtype, c.x.data(), kMaxRows, kCols, &xq);
  c.want.resize(static_cast<size_t>(kMaxRows * kOut));
  for (int64_t i = 0; i < kMaxRows; ++i)
    for (int64_t j = 0; j < kOut; ++j)
      c.want[static_cast<size_t>(i * kOut + j)] =
          quant_dot_ref(dtype, c.weights.data() + j * dtype_row_bytes(dtype, kCols), xq, i);
  return c;
}

std::vector<QuantIsa> supported_isas() {
  std::vector<QuantIsa> isas;
  for (QuantIsa isa : {QuantIsa::kScalar, QuantIsa::kAvx2, QuantIsa::kAvx512Vnni})
    if (quant_isa_supported(isa)) isas.push_back(isa);
  return isas;
}

// Every step size a batch of decodes or a verification makes (1..33: tiles
// of 1..8 rows, one tile or several of unequal sizes), and prefill's.
std::vector<int64_t> row_counts() {
  std::vector<int64_t> m;
  for (int64_t i = 1; i <= 33; ++i) m.push_back(i);
  m.push_back(64);
  m.push_back(kMaxRows);
  return m;
}

class QuantMatmulTest : public ::testing::Test {
 protected:
  void TearDown() override { force_quant_isa(QuantIsa::kAuto); }
  // prepared: as the model runs it (Q8_0 and Q4_K repacked where AVX512-VNNI
  // runs the products); else the file's blocks as they are.
  std::vector<float> run(Kernels& k, const Case& c, int64_t m, bool prepared = true) {
    return run(k, c, m, prepared ? k.prepare(c.ref()) : c.ref());
  }
  std::vector<float> run(Kernels& k, const Case& c, int64_t m, const WeightRef& w) {
    std::vector<float> y(static_cast<size_t>(m * kOut));
    k.matmul(c.x.data(), m, w, y.data());
    return y;
  }
};

TEST_F(QuantMatmulTest, EveryVariantGivesTheReferenceBitsForEveryBatchAndThreadCount) {
#if defined(__x86_64__)
  ASSERT_NE(quant_isa_best(), QuantIsa::kScalar);  // CI's machines have AVX2 at least
#endif
  ThreadPool one(1), two(2);
  for (DType dtype : kTypes) {
    const Case c = make_case(dtype);
    for (QuantIsa isa : supported_isas()) {
      force_quant_isa(isa);
      for (ThreadPool* pool : {&one, &two}) {
        auto k = make_cpu_kernels(pool, {.precision = Precision::kBF16});
        for (bool prepared : {false, true}) {
          const WeightRef w = prepared ? k->prepare(c.ref()) : c.ref();
          for (int64_t m : row_counts()) {
            if (isa == QuantIsa::kScalar && m > 7) continue;  // the reference itself: the small calls suffice
            // Every count on the kernels that run; a sample on the others.
            if (isa != quant_isa_best() && m > 3 && m != 7 && m != 8 && m != 33 && m < 64) continue;
            SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + quant_isa_name(isa) + " threads " +
                         std::to_string(pool->size()) + " rows " + std::to_string(m) +
                         (prepared ? " prepared" : " unprepared"));
            const std::vector<float> y = run(*k, c, m, w);
            for (int64_t i = 0; i < m; ++i)
              ASSERT_TRUE(same_bits(y.data() + i * kOut, c.want.data() + i * kOut, kOut)) << "row " << i;
          }
        }
      }
    }
  }
}

// The cases above run both of the repacked Q4_K and Q6_K tiles' ways of
// scaling their sums: the rows of normal values fit 16 bits (two sub-blocks
// at once), the wide blocks do not (one multiply each).
TEST(QuantPackedOffsetsTest, TheCasesRunSumsThatFitSixteenBitsAndSumsThatDoNot) {
  for (DType dtype : {DType::kQ4_K, DType::kQ6_K}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Case c = make_case(dtype);
    QuantizedRows xq;
    quantize_rows(dtype, c.x.data(), kMaxRows, kCols, &xq);
    const std::vector<int32_t> offsets = quant_packed_offsets(dtype, xq);
    const int64_t per_row = quant_packed_offsets_per_row(dtype, kCols), nb = kCols / kSuperBlock;
    ASSERT_EQ(offsets.size(), static_cast<size_t>(kMaxRows * per_row));
    int64_t fit = 0;
    for (int64_t r = 0; r < kMaxRows; ++r)
      for (int64_t b = 0; b < nb; ++b) {
        const int32_t fits = offsets[static_cast<size_t>(r * per_row + per_row - nb + b)];
        ASSERT_TRUE(fits == 0 || fits == 1);
        if (r == kWideRow || (r == 0 && b == kWideBlock))
          EXPECT_EQ(fits, 0) << "row " << r << " block " << b;
        else
          fit += fits;
      }
    // Normal values fit but for a few blocks (Q6_K: 2 of the 2039 here)
    // whose largest level stands out less than most.
    EXPECT_GE(fit, (kMaxRows * nb - nb - 1) * 99 / 100);
    // And a wide block's first sum against the weight row of top levels
    // really needs more than 16 bits, so that a tile pairing it anyway
    // would miss the reference bits above.
    int lev[kSuperBlock];
    block_levels(dtype, c.weights.data() + kLevelsAtTheTop * dtype_row_bytes(dtype, kCols) +
                            kWideBlock * dtype_block(dtype).bytes, lev);
    const int group = dtype == DType::kQ4_K ? 32 : 16, offset = dtype == DType::kQ6_K ? 32 : 0;
    int sum = 0;
    for (int i = 0; i < group; ++i) sum += (lev[i] - offset) * xq.row_q(0)[kWideBlock * kSuperBlock + i];
    EXPECT_GT(std::abs(sum), 32767);
  }
}

// Every SIMD kernel: each type, each variant (the file layout's avx2 and
// avx512vnni, and the repacked avx512vnni one, which prepare() gives), as
// test code injects the mutated kernels (tests/util/mutated_kernels.h).
TEST_F(QuantMatmulTest, AMutatedReductionOrderInAnyKernelIsCaught) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool, {.precision = Precision::kF32});
  auto mutated = make_mutated_cpu_kernels(&pool, {.precision = Precision::kF32});
  int kernels = 0;
  for (DType dtype : kTypes) {
    const Case c = make_case(dtype);
    for (QuantIsa isa : supported_isas())
      for (bool prepared : {false, true}) {
        if (isa == QuantIsa::kScalar) continue;  // the reference has no tiles to mutate
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + quant_isa_name(isa) + (prepared ? " prepared" : ""));
        force_quant_isa(isa);
        // 4: Q8_0's tile that loads a block ahead; 7: one tile; 8: the
        // largest; 33: five tiles of 6 and 7 rows.
        for (int64_t m : {4, 7, 8, 33}) {
          SCOPED_TRACE("rows " + std::to_string(m));
          const std::vector<float> alone = run(*mutated, c, 1, prepared), batch = run(*mutated, c, m, prepared);
          EXPECT_TRUE(same_bits(alone.data(), c.want.data(), kOut)) << "a lone row keeps the order";
          EXPECT_FALSE(same_bits(batch.data(), c.want.data(), m * kOut)) << "the reference comparison misses it";
          EXPECT_FALSE(same_bits(batch.data(), alone.data(), kOut)) << "the batch invariance comparison misses it";
          const std::vector<float> fixed = run(*k, c, m, prepared);
          EXPECT_TRUE(same_bits(fixed.data(), c.want.data(), m * kOut));
        }
        ++kernels;
      }
  }
#if defined(__x86_64__)
  EXPECT_GE(kernels, 2 * static_cast<int>(std::size(kTypes)));  // avx2 at least, both layouts
#endif
}

TEST_F(QuantMatmulTest, FusedPartsAndEmbeddingRowsReadTheBlocks) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool, {.precision = Precision::kBF16});
  // A step of up to kQuantFewRows rows runs every part in one region, a
  // larger one in two (matmul_quant_many); either way a type's activations
  // are quantized once, shared by its parts.
  const Case a = make_case(DType::kQ4_K), b = make_case(DType::kQ8_0);
  const WeightRef parts[3] = {a.ref(), b.ref(), a.ref()};
  const FusedWeight fused = k->fuse(parts);
  for (int64_t m : {int64_t{1}, int64_t{5}, kQuantFewRows + 1}) {
    SCOPED_TRACE("rows " + std::to_string(m));
    std::vector<float> ya(m * kOut), yb(m * kOut), ya2(m * kOut);
    float* const outs[3] = {ya.data(), yb.data(), ya2.data()};
    k->matmul(a.x.data(), m, fused, outs);
    EXPECT_TRUE(same_bits(ya.data(), a.want.data(), m * kOut));
    EXPECT_TRUE(same_bits(yb.data(), b.want.data(), m * kOut));
    EXPECT_TRUE(same_bits(ya2.data(), a.want.data(), m * kOut));
  }

  // Each weight with rows of its own (a prefill's experts): two slabs and a
  // part of one, 17 rows (more than kQuantFewRows), a lone row, and two
  // parts that share their input; every row the bits of its product alone.
  const WeightRef pa = k->prepare(a.ref()), pb = k->prepare(b.ref());
  const WeightRef ws[4] = {pa, pb, pa, pa};
  const int64_t first[4] = {0, 3, 100, 0}, ms[4] = {70, 17, 1, 70};
  std::vector<std::vector<float>> ys(4);
  const float* xs[4];
  float* outs[4];
  for (int i = 0; i < 4; ++i) {
    xs[i] = (i == 1 ? b : a).x.data() + first[i] * kCols;
    ys[i].resize(ms[i] * kOut);
    outs[i] = ys[i].data();
  }
  k->matmul_each(xs, {}, ms, ws, outs);
  for (int i = 0; i < 4; ++i)
    EXPECT_TRUE(same_bits(ys[i].data(), (i == 1 ? b : a).want.data() + first[i] * kOut, ms[i] * kOut)) << "part " << i;

  // Rows picked from the input where they are (a prefill's experts reading
  // the routed rows in place), repeats and all, the tiny row among them; two
  // parts share a list and one reads its input's first rows.
  std::vector<int64_t> list_a(70), list_b(17);
  for (int64_t j = 0; j < 70; ++j) list_a[j] = (37 * j + 3) % 100;
  for (int64_t j = 0; j < 17; ++j) list_b[j] = 99 - 5 * j;
  const int64_t* picked[4] = {list_a.data(), list_b.data(), list_a.data(), nullptr};
  const int64_t pms[4] = {70, 17, 70, 20};
  const float* pxs[4] = {a.x.data(), b.x.data(), a.x.data(), a.x.data()};
  // Then with a weight not repacked among them (each part a product of its own).
  const WeightRef unpacked[4] = {pa, pb, a.ref(), pa};
  for (const WeightRef* set : {ws, unpacked}) {
    for (int i = 0; i < 4; ++i) ys[i].assign(pms[i] * kOut, 0.0f), outs[i] = ys[i].data();
    k->matmul_each(pxs, picked, pms, std::span<const WeightRef>(set, 4), outs);
    for (int i = 0; i < 4; ++i)
      for (int64_t j = 0; j < pms[i]; ++j) {
        const int64_t row = picked[i] ? picked[i][j] : j;
        EXPECT_TRUE(same_bits(ys[i].data() + j * kOut, (i == 1 ? b : a).want.data() + row * kOut, kOut))
            << "part " << i << " row " << j << (set == ws ? "" : ", one weight not repacked");
      }
  }

  // An embedding table of each type (Qwen3.8-Flash-Next's n-gram table is
  // IQ4_NL): the rows looked up are the dequantized rows.
  const int32_t tokens[] = {5, 0, 36, 5};
  std::vector<float> rows(4 * kCols), want(kCols);
  for (DType dtype : kTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<uint8_t> table = random_weights(dtype, 11);
    k->embed_rows(WeightRef{dtype, kOut, kCols, table.data(), nullptr}, tokens, rows.data());
    for (int t = 0; t < 4; ++t) {
      ASSERT_TRUE(
          dequantize_row(dtype, table.data() + tokens[t] * dtype_row_bytes(dtype, kCols), kCols, want.data()).is_ok());
      EXPECT_TRUE(same_bits(rows.data() + t * kCols, want.data(), kCols)) << "token " << tokens[t];
    }
  }
}

// The integer product means the float one: for every type, quant_dot_ref is
// the dot product of the dequantized weights and the activations within the
// activations' rounding (half a level of 127 per block), where a wrong offset,
// min or scale would miss by the size of the result.
TEST(QuantRowsTest, TheProductIsTheDequantizedWeightsDotTheActivations) {
  for (DType dtype : kTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<uint8_t> w = random_weights(dtype, 3);
    const std::vector<float> x = random_floats(kCols, 5);
    QuantizedRows xq;
    quantize_rows(dtype, x.data(), 1, kCols, &xq);
    std::vector<float> wf(kCols);
    const int64_t row_bytes = dtype_row_bytes(dtype, kCols);
    for (int64_t j = 2; j < kOut; ++j) {  // rows 0 and 1: the subnormal scale's
      ASSERT_TRUE(dequantize_row(dtype, w.data() + j * row_bytes, kCols, wf.data()).is_ok());
      double exact = 0, bound = 0;
      for (int64_t i = 0; i < kCols; ++i) {
        exact += static_cast<double>(wf[i]) * x[i];
        // Half a level, plus the f16 scale's rounding (2^-11 relative) over 127 levels.
        bound += std::fabs(wf[i]) * xq.row_d(0)[i / xq.block] * (0.5 + 127.0 / 2048.0);
      }
      EXPECT_NEAR(quant_dot_ref(dtype, w.data() + j * row_bytes, xq, 0), exact, bound + 1e-3) << "row " << j;
    }
  }
}

// Rows of every kind the activation quantizer meets, and some it should
// not: random, huge, tiny and subnormal, zeros, ties, NaN, infinities.
std::vector<float> edge_rows(int64_t cols, int64_t* rows) {
  std::vector<std::vector<float>> r;
  r.push_back(random_floats(cols, 11));
  std::vector<float> v = random_floats(cols, 12);
  for (float& f : v) f *= 3e37f;
  r.push_back(v);
  r.push_back(std::vector<float>(cols, 0.0f));
  v = random_floats(cols, 13);
  for (size_t i = 0; i < v.size(); ++i) v[i] *= i % 3 ? 1e-39f : 1e-30f;  // subnormals beside tiny normals
  r.push_back(v);
  v.assign(cols, 1e-40f);  // all subnormal
  v[5] = -1e-45f;
  r.push_back(v);
  v = random_floats(cols, 14);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i % 9) - 4) * 0.5f;  // ties
  v[3] = -0.0f;
  r.push_back(v);
  v = random_floats(cols, 15);
  v[0] = std::nanf("");
  v[40] = -std::nanf("");
  v[7] = INFINITY;  // block 0: amax inf
  v[cols - 1] = -INFINITY;
  v[100] = FLT_MAX;
  v[cols / 2] = std::nanf("");
  r.push_back(v);
  v.assign(cols, std::nanf(""));  // nothing but NaN
  r.push_back(v);
  *rows = static_cast<int64_t>(r.size());
  std::vector<float> all;
  for (const auto& row : r) all.insert(all.end(), row.begin(), row.end());
  return all;
}

TEST(QuantRowsTest, EveryActivationVariantGivesTheReferenceBits) {
  for (DType dtype : {DType::kQ8_0, DType::kQ4_K}) {
    int64_t rows = 0;
    const std::vector<float> x = edge_rows(512, &rows);
    QuantizedRows want;
    quantize_rows(dtype, x.data(), rows, 512, &want);
    for (QuantIsa isa : supported_isas()) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + quant_isa_name(isa));
      QuantizedRows got;
      got.reset(dtype, rows, 512);
      quantize_activations(isa, x.data(), 0, 3, &got);  // two ranges, as threads split them
      quantize_activations(isa, x.data() + 3 * 512, 3, rows, &got);
      for (int64_t r = 0; r < rows; ++r) {
        EXPECT_EQ(0, std::memcmp(got.row_q(r), want.row_q(r), 512)) << "levels of row " << r;
        EXPECT_TRUE(same_bits(got.row_d(r), want.row_d(r), 512 / want.block)) << "scales of row " << r;
        EXPECT_EQ(0, std::memcmp(got.row_sums(r), want.row_sums(r), 512 / 16 * 2)) << "sums of row " << r;
        EXPECT_EQ(0, std::memcmp(got.row_magnitudes(r), want.row_magnitudes(r), 512 / 16 * 2))
            << "magnitudes of row " << r;
      }
    }
  }
}

TEST(QuantRowsTest, ActivationBlocksScaleTheirLargestMagnitudeTo127) {
  std::vector<float> x(64, 0.0f);
  x[0] = -2.0f;  // amax of block 0
  x[1] = 1.0f;   // 63.5: a tie, to even
  x[2] = 0.5f / 127.0f * 2.0f;
  QuantizedRows q;
  quantize_rows(DType::kQ8_0, x.data(), 1, 64, &q);
  EXPECT_EQ(q.row_q(0)[0], -127);
  EXPECT_EQ(q.row_q(0)[1], 64);
  EXPECT_EQ(q.row_q(0)[2], 0);  // 0.5 after scaling: a tie, to even
  EXPECT_EQ(q.row_d(0)[0], f16_to_f32(f32_to_f16(2.0f / 127.0f)));
  EXPECT_EQ(q.row_d(0)[1], 0.0f);  // a block of zeros
  EXPECT_EQ(q.row_q(0)[40], 0);
  EXPECT_EQ(q.row_sums(0)[0], -127 + 64);
  EXPECT_EQ(q.row_magnitudes(0)[0], 127 + 64);
  EXPECT_EQ(q.block, 32);
  quantize_rows(DType::kQ6_K, random_floats(512, 1).data(), 1, 512, &q);
  EXPECT_EQ(q.block, 256);
  EXPECT_EQ(q.d.size(), 2u);
  EXPECT_EQ(q.sums.size(), 32u);
  EXPECT_EQ(q.magnitudes.size(), 32u);
}

// The scales of llama.cpp's x86 activations: q8_0's (blocks of 32) is stored
// as f16, q8_K's (blocks of 256) is the inverse of the inverse scale. Both
// differ from amax / 127 in f32 for most amax; this checks a sweep of them.
TEST(QuantRowsTest, ActivationScalesAreLlamaCppsF16AndInverseOfInverse) {
  int f16_differs = 0, inverse_differs = 0;
  for (int i = 1; i <= 1000; ++i) {
    const float amax = 0.001f * static_cast<float>(i) + 0.37f;
    const float d32 = amax / 127.0f;
    const float d16 = activation_block_scale(32, amax);
    EXPECT_EQ(d16, f16_to_f32(f32_to_f16(d32))) << amax;
    EXPECT_LE(std::fabs(d16 - d32), d32 * (1.0f / 2048.0f)) << amax;
    f16_differs += d16 != d32;
    const float dk = activation_block_scale(kSuperBlock, amax);
    EXPECT_EQ(dk, 1.0f / (127.0f / amax)) << amax;
    inverse_differs += dk != d32;
  }
  EXPECT_GT(f16_differs, 900);
  EXPECT_GT(inverse_differs, 0);
  EXPECT_EQ(activation_block_scale(32, 0.0f), 0.0f);
  EXPECT_EQ(activation_block_scale(kSuperBlock, 0.0f), 0.0f);
  EXPECT_EQ(activation_block_scale(32, 127.0f * 70000.0f), INFINITY);  // past f16's range, as llama.cpp

  // What a row's blocks carry: the scale of their own amax.
  std::vector<float> x = random_floats(512, 21);
  x[3] = 7.25f;
  x[300] = -9.0f;
  QuantizedRows q;
  quantize_rows(DType::kQ8_0, x.data(), 1, 512, &q);
  EXPECT_EQ(q.row_d(0)[0], activation_block_scale(32, 7.25f));
  quantize_rows(DType::kQ4_K, x.data(), 1, 512, &q);
  EXPECT_EQ(q.row_d(0)[0], activation_block_scale(kSuperBlock, 7.25f));
  EXPECT_EQ(q.row_d(0)[1], activation_block_scale(kSuperBlock, 9.0f));
}

}  // namespace
}  // namespace sb::cpu
