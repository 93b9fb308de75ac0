// runtime/math.h: statebank's own e^x, log, sin, cos. Two kinds of test:
//  - accuracy against the C library in double, with the bounds the header
//    states (the C library is the yardstick here, never the kernels' source);
//  - the bits pinned: hashes of the functions over fixed sweeps and of what
//    the kernels make of them (a RoPE table, a softmax row, a routing, a
//    log-normaliser), constants below. Any change of bits fails these; a
//    deliberate one updates the constants and bumps the numerics version
//    (runtime/kernels.h, kernel_numerics). The constants are the same on
//    every V16 backend (AVX-512, AVX2+FMA, scalar; docs/kernels.md).
#include "runtime/math.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/cpu/activations.h"
#include "runtime/cpu/simd.h"
#include "runtime/cpu/backend.h"
#include "runtime/kernels.h"
#include "runtime/sampling.h"
#include "runtime/threads.h"

namespace sb {
namespace {

// FNV-1a over the bits of each value.
struct Fnv {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  }
  void add(float f) { add(std::bit_cast<uint32_t>(f), 4); }
  void add(double d) { add(std::bit_cast<uint64_t>(d), 8); }
};

// |got - want| in units of the last place of float at want.
double ulp_f(float got, double want) {
  const float w = static_cast<float>(want);
  if (w == 0.0f) return got == 0.0f ? 0.0 : std::numeric_limits<double>::infinity();
  int e;
  std::frexp(static_cast<double>(std::fabs(w)), &e);  // |w| in [2^(e-1), 2^e)
  return std::fabs(static_cast<double>(got) - want) / std::ldexp(1.0, std::max(e - 24, -149));
}

// |got - want| in units of the last place of double at want (want from the C
// library, itself within about half an ulp of the truth).
double ulp_d(double got, double want) {
  if (want == 0.0) return got == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  int e;
  std::frexp(std::fabs(want), &e);
  return std::fabs(got - want) / std::ldexp(1.0, e - 53);
}

// Every float in [lo, hi] whose bits are a multiple of `stride` apart
// (from 0 outwards on each side).
std::vector<float> floats_in(float lo, float hi, uint32_t stride) {
  std::vector<float> out;
  if (hi > 0.0f)
    for (uint64_t u = std::bit_cast<uint32_t>(lo > 0.0f ? lo : 0.0f); u <= std::bit_cast<uint32_t>(hi); u += stride)
      out.push_back(std::bit_cast<float>(static_cast<uint32_t>(u)));
  if (lo < 0.0f)
    for (uint64_t u = std::bit_cast<uint32_t>(hi < 0.0f ? -hi : 0.0f) + 1; u <= std::bit_cast<uint32_t>(-lo);
         u += stride)
      out.push_back(-std::bit_cast<float>(static_cast<uint32_t>(u)));
  return out;
}

TEST(OwnMath, ExpFIsALaneOfVexpBitForBit) {
  std::vector<float> xs = floats_in(-200.0f, 200.0f, 509);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {-inf, inf, std::numeric_limits<float>::quiet_NaN(), -87.0f, std::nextafter(-87.0f, 0.0f),
                  std::nextafter(-87.0f, -inf), 88.0f, std::nextafter(88.0f, inf), 0.0f, -0.0f, 1e-30f, -1e-30f})
    xs.push_back(x);
  while (xs.size() % 16) xs.push_back(0.5f);
  for (size_t i = 0; i < xs.size(); i += 16) {
    float lanes[16];
    cpu::vexp(cpu::V16::load(xs.data() + i)).store(lanes);
    for (int l = 0; l < 16; ++l) {
      const float s = exp_f(xs[i + l]);
      if (std::isnan(s) && std::isnan(lanes[l])) continue;
      ASSERT_EQ(std::bit_cast<uint32_t>(s), std::bit_cast<uint32_t>(lanes[l])) << "x = " << xs[i + l];
    }
  }
}

TEST(OwnMath, ExpFWithinTwoUlpAndItsEdges) {
  double worst = 0.0;
  for (float x : floats_in(-86.99f, 88.0f, 1009)) worst = std::max(worst, ulp_f(exp_f(x), std::exp(double{x})));
  std::printf("exp_f: max %.3f ulp over (-87, 88]\n", worst);
  EXPECT_LE(worst, 2.0);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(std::bit_cast<uint32_t>(exp_f(-inf)), 0u) << "+0: a softmax's masked scores";
  EXPECT_EQ(std::bit_cast<uint32_t>(exp_f(-87.0f)), 0u);
  EXPECT_EQ(std::bit_cast<uint32_t>(exp_f(-1000.0f)), 0u);
  EXPECT_GT(exp_f(std::nextafter(-87.0f, 0.0f)), 1e-38f);
  EXPECT_EQ(exp_f(inf), exp_f(88.0f));
  EXPECT_TRUE(std::isnan(exp_f(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(exp_f(0.0f), 1.0f);
}

TEST(OwnMath, ExpDWithinTwoUlpLogDWithinFour) {
  double worst_exp = 0.0, worst_log = 0.0;
  for (float xf : floats_in(-708.0f, 709.0f, 1009)) {
    // Doubles with bits below a float's too.
    const double x = double{xf} * (1.0 + 0x1p-30);
    if (x < -708.0 || x > 709.0) continue;
    worst_exp = std::max(worst_exp, ulp_d(exp_d(x), std::exp(x)));
  }
  for (float xf : floats_in(1e-37f, 3e38f, 1009)) {
    const double x = double{xf} * (1.0 + 0x1p-30);
    worst_log = std::max(worst_log, ulp_d(log_d(x), std::log(x)));
  }
  for (double x : {0x1p-1074, 1e-310, 1e300, 1.7e308, 0.5, 2.0})
    worst_log = std::max(worst_log, ulp_d(log_d(x), std::log(x)));
  std::printf("exp_d: max %.3f ulp over [-708, 709]; log_d: max %.3f ulp over (0, 1.8e308)\n", worst_exp, worst_log);
  EXPECT_LE(worst_exp, 2.0);
  EXPECT_LE(worst_log, 4.0);
  EXPECT_EQ(exp_d(0.0), 1.0);
  EXPECT_EQ(log_d(1.0), 0.0);
  EXPECT_EQ(exp_d(-std::numeric_limits<double>::infinity()), 0.0);
  EXPECT_EQ(exp_d(-708.5), 0.0) << "never a subnormal";
  EXPECT_EQ(exp_d(710.0), std::numeric_limits<double>::infinity());
  EXPECT_EQ(log_d(0.0), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(log_d(-1.0)));
  EXPECT_TRUE(std::isnan(exp_d(std::numeric_limits<double>::quiet_NaN())));
}

TEST(OwnMath, SinCosWithinFourUlpOverTheRopeArguments) {
  double worst = 0.0, worst_f = 0.0;
  for (float x : floats_in(-16777216.0f, 16777216.0f, 1009)) {
    double s, c;
    sincos_d(x, &s, &c);
    const double ws = std::sin(double{x}), wc = std::cos(double{x});
    // Near a zero of the function an ulp of the result is tiny: measure
    // against the larger of the result and 2^-30 (the reduction's own
    // absolute error is under 2^-80 there).
    auto ulp = [](double got, double want) {
      return std::fabs(got - want) / std::ldexp(1.0, std::ilogb(std::max(std::fabs(want), 0x1p-30)) - 52);
    };
    worst = std::max({worst, ulp(s, ws), ulp(c, wc)});
    worst_f = std::max({worst_f, ulp_f(static_cast<float>(s), ws), ulp_f(static_cast<float>(c), wc)});
  }
  std::printf("sin_d/cos_d: max %.3f ulp (double) for |x| <= 2^24, %.3f ulp rounded to float\n", worst, worst_f);
  EXPECT_LE(worst, 4.0);
  EXPECT_LE(worst_f, 1.0);
}

TEST(OwnMath, PowAndSoftplusWithinOneUlpRoundedToFloat) {
  double worst_pow = 0.0, worst_sp = 0.0;
  for (double theta : {10000.0, 1000000.0, 10000000.0, 5000000.0, 500000.0})
    for (int rot = 16; rot <= 256; rot *= 2)
      for (int i = 0; i < rot / 2; ++i) {
        const double e = static_cast<double>(2 * i) / rot;
        const float got = static_cast<float>(exp_d(-e * log_d(theta)));
        worst_pow = std::max(worst_pow, ulp_f(got, 1.0 / std::pow(theta, e)));
      }
  for (float x : floats_in(-87.0f, 20.0f, 1009))
    worst_sp = std::max(worst_sp, ulp_f(softplus_f(x), std::log1p(std::exp(double{x}))));
  EXPECT_EQ(std::bit_cast<uint32_t>(softplus_f(-88.0f)), 0u) << "+0, never a subnormal";
  EXPECT_EQ(std::bit_cast<uint32_t>(softplus_f(-std::numeric_limits<float>::infinity())), 0u);
  std::printf("theta^-e: max %.3f ulp; softplus_f: max %.3f ulp (float)\n", worst_pow, worst_sp);
  EXPECT_LE(worst_pow, 1.0);
  EXPECT_LE(worst_sp, 1.0);
}

// ---- The bits, pinned. ----

TEST(OwnMath, FunctionsGiveThePinnedBits) {
  Fnv ef, ed, ld, sc, sp;
  for (float x : floats_in(-100.0f, 100.0f, 1009)) ef.add(exp_f(x)), sp.add(cpu::softplus(x));
  for (float x : floats_in(-700.0f, 700.0f, 1009)) ed.add(exp_d(double{x} * (1.0 + 0x1p-30)));
  for (float x : floats_in(1e-30f, 1e30f, 1009)) ld.add(log_d(double{x} * (1.0 + 0x1p-30)));
  for (float x : floats_in(-1048576.0f, 1048576.0f, 1009)) {
    double s, c;
    sincos_d(x, &s, &c);
    sc.add(s), sc.add(c);
  }
  std::printf("exp_f %#llx exp_d %#llx log_d %#llx sincos_d %#llx softplus %#llx\n",
              static_cast<unsigned long long>(ef.h), static_cast<unsigned long long>(ed.h),
              static_cast<unsigned long long>(ld.h), static_cast<unsigned long long>(sc.h),
              static_cast<unsigned long long>(sp.h));
  EXPECT_EQ(ef.h, 0xe9c11120be2cf5f7ull);
  EXPECT_EQ(ed.h, 0xc57ef7c627d55ad4ull);
  EXPECT_EQ(ld.h, 0x450e8eb072e6c107ull);
  EXPECT_EQ(sc.h, 0x10240dd61a9b0ed1ull);
  EXPECT_EQ(sp.h, 0xc10ba4b9a77438c4ull);
}

// A small deterministic generator for test data.
float next_value(uint64_t* s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<int64_t>(*s >> 40) - (1 << 23)) / static_cast<float>(1 << 23);
}

TEST(OwnMath, KernelsGiveThePinnedBits) {
  ThreadPool pool(1);
  auto k = make_cpu_kernels(&pool);

  // The RoPE table: rotating (1, 0) pairs leaves cos in the first half and
  // sin in the second. Positions up to 262,143, theta 10^7, rot 64.
  {
    const int64_t rot = 64, rows = 300;
    std::vector<int64_t> pos(rows);
    for (int64_t r = 0; r < rows; ++r) pos[r] = r * r * 3 - r;  // up to about 268,000
    std::vector<float> x(rows * rot);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < rot / 2; ++i) x[r * rot + i] = 1.0f;
    k->rope(x.data(), rows, 1, rot, rot, pos.data(), 10000000.0);
    Fnv h;
    for (float v : x) h.add(v);
    std::printf("rope table %#llx\n", static_cast<unsigned long long>(h.h));
    EXPECT_EQ(h.h, 0xe51ebe0acb8e5ebdull);
  }

  // A softmax row: one query over 100 keys (two key blocks, so the running
  // max rescales), values the unit vectors, so output element j is the
  // softmax's weight of key j.
  {
    const int64_t n = 100, d = 128;
    uint64_t seed = 7;
    std::vector<float> q(d), kk(n * d), v(n * d, 0.0f), out(d);
    for (float& f : q) f = next_value(&seed);
    for (float& f : kk) f = 4.0f * next_value(&seed);
    for (int64_t j = 0; j < n; ++j) v[j * d + j] = 1.0f;
    AttentionInput in;
    in.rows = 1;
    in.first_pos = n - 1;
    in.n_heads = in.n_kv = 1;
    in.head_dim = d;
    in.q = q.data();
    in.k = kk.data();
    in.v = v.data();
    in.scale = 0.25f;
    k->attention(in, out.data());
    Fnv h;
    for (float f : out) h.add(f);
    std::printf("softmax row %#llx\n", static_cast<unsigned long long>(h.h));
    EXPECT_EQ(h.h, 0xd0d36617e0ade68full);
  }

  // The MoE router's softmax and top-k, and the log-normaliser.
  {
    const int64_t experts = 64, rows = 4, top = 8;
    uint64_t seed = 11;
    std::vector<float> logits(experts * rows);
    for (float& f : logits) f = 8.0f * next_value(&seed);
    std::vector<int64_t> chosen(rows * top);
    std::vector<float> weights(rows * top);
    k->route(logits.data(), rows, experts, top, true, chosen.data(), weights.data());
    Fnv h;
    for (float f : weights) h.add(f);
    for (int64_t c : chosen) h.add(static_cast<uint64_t>(c), 8);
    std::vector<float> vocab(1003);
    for (float& f : vocab) f = 20.0f * next_value(&seed);
    vocab[17] = -std::numeric_limits<float>::infinity();
    h.add(log_normaliser(vocab));
    std::printf("routing and normaliser %#llx\n", static_cast<unsigned long long>(h.h));
    EXPECT_EQ(h.h, 0xd312bf312cecb5fdull);
  }
}

}  // namespace
}  // namespace sb
