// qwen4exp's kernels (docs/model-spec.md section 7.3). Hyper-connections:
// each step gives the bits of its definition, the same bits whatever rows
// share the call and however many threads run, and the mixer they make
// agrees with the definition's formula in double. The PLE layer: the gate
// gives the bits of its definition; the dilated causal conv agrees with its
// definition in double, gives the undilated conv's bits at dilation 1, and
// the same bits whatever the prefill split.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/cpu/activations.h"
#include "runtime/cpu/backend.h"
#include "runtime/kernels.h"
#include "runtime/threads.h"

namespace sb {
namespace {

constexpr int64_t kRows = 5, kStreams = 4, kDim = 40, kRank = 12;

std::vector<float> randn(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class HyperConnectionTest : public ::testing::Test {
 protected:
  ThreadPool one_{1}, four_{4};
  std::unique_ptr<Kernels> k1_ = make_cpu_kernels(&one_), k4_ = make_cpu_kernels(&four_);
  std::mt19937 rng_{46};
};

TEST_F(HyperConnectionTest, GroupedNormIsEachGroupsOwnNorm) {
  auto x = randn(rng_, kRows * kStreams * kDim, 3.0f);
  auto w = randn(rng_, kStreams * kDim, 0.2f);
  std::vector<float> y(x.size()), want(x.size());
  k4_->rms_norm_groups(x.data(), kRows, kStreams, kDim, w.data(), 1e-6f, true, y.data());
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t s = 0; s < kStreams; ++s) {
      const int64_t at = (r * kStreams + s) * kDim;
      k1_->rms_norm(x.data() + at, 1, kDim, w.data() + s * kDim, 1e-6f, true, want.data() + at);
    }
  EXPECT_TRUE(same_bits(y, want));
  // With one weight vector for all streams it would differ: the groups' weights are used.
  std::vector<float> shared(x.size());
  k1_->rms_norm(x.data(), kRows * kStreams, kDim, w.data(), 1e-6f, true, shared.data());
  EXPECT_FALSE(same_bits(y, shared));
}

TEST_F(HyperConnectionTest, EachKernelGivesTheBitsOfItsDefinition) {
  auto mix = randn(rng_, kRows * kStreams * kDim, 2.0f);
  auto normed = randn(rng_, kRows * kStreams * kDim);
  std::vector<float> out(kRows * kDim), want(kRows * kDim, 0.0f);
  k4_->hc_mix(mix.data(), normed.data(), kRows, kStreams, kDim, out.data());
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t i = 0; i < kDim; ++i) {
      float acc = 0.0f;
      for (int64_t s = 0; s < kStreams; ++s) {
        const int64_t at = (r * kStreams + s) * kDim + i;
        const float p = cpu::sigmoid(mix[at]) * normed[at];
        acc = acc + p;
      }
      want[r * kDim + i] = acc / static_cast<float>(kStreams);
    }
  EXPECT_TRUE(same_bits(out, want));

  auto h = randn(rng_, kRows * kStreams * kDim);
  auto y = randn(rng_, kRows * kDim);
  auto inj = randn(rng_, kRows * kStreams, 2.0f);
  std::vector<float> h_want = h;
  k4_->hc_inject(h.data(), y.data(), inj.data(), kRows, kStreams, kDim);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t s = 0; s < kStreams; ++s) {
      const float j = 2.0f * cpu::sigmoid(inj[r * kStreams + s] / static_cast<float>(kStreams));
      for (int64_t i = 0; i < kDim; ++i) {
        const float p = j * y[r * kDim + i];
        h_want[(r * kStreams + s) * kDim + i] += p;
      }
    }
  EXPECT_TRUE(same_bits(h, h_want));

  auto x = randn(rng_, 37, 4.0f);
  std::vector<float> x_want = x;
  k4_->scale_activation(x.data(), 37, 0.25f, Activation::kSilu);
  for (float& v : x_want) v = cpu::silu(v * 0.25f);
  EXPECT_TRUE(same_bits(x, x_want));
}

TEST_F(HyperConnectionTest, RowsGetTheSameBitsAloneOrTogether) {
  auto mix = randn(rng_, kRows * kStreams * kDim, 2.0f);
  auto normed = randn(rng_, kRows * kStreams * kDim);
  auto h = randn(rng_, kRows * kStreams * kDim);
  auto y = randn(rng_, kRows * kDim);
  auto inj = randn(rng_, kRows * kStreams);
  std::vector<float> all(kRows * kDim), alone(kRows * kDim);
  std::vector<float> h_all = h, h_alone = h;
  k4_->hc_mix(mix.data(), normed.data(), kRows, kStreams, kDim, all.data());
  k4_->hc_inject(h_all.data(), y.data(), inj.data(), kRows, kStreams, kDim);
  for (int64_t r = 0; r < kRows; ++r) {
    const int64_t at = r * kStreams * kDim;
    k1_->hc_mix(mix.data() + at, normed.data() + at, 1, kStreams, kDim, alone.data() + r * kDim);
    k1_->hc_inject(h_alone.data() + at, y.data() + r * kDim, inj.data() + r * kStreams, 1, kStreams, kDim);
  }
  EXPECT_TRUE(same_bits(all, alone));
  EXPECT_TRUE(same_bits(h_all, h_alone));
}

// The whole mixer as qwen4exp defines it (transformers' gated residual),
// in double: x̂ = per-stream RMSNorm(1 + w); m = σ(up(SiLU(down(x̂) / n)));
// input = mean over streams of m ⊙ x̂; inject j = 2 σ(inject(x̂) / n);
// h' = h + y ⊗ j. The kernels with f32 products agree to float rounding.
TEST_F(HyperConnectionTest, MixerAgreesWithTheDefinitionInDouble) {
  const int64_t W = kStreams * kDim;
  auto h = randn(rng_, kRows * W, 2.0f);
  auto norm_w = randn(rng_, W, 0.2f);
  auto down = randn(rng_, kRank * W, 1.0f / std::sqrt(float(W)));
  auto up = randn(rng_, W * kRank, 1.0f / std::sqrt(float(kRank)));
  auto inject = randn(rng_, kStreams * W, 1.0f / std::sqrt(float(W)));
  auto y = randn(rng_, kRows * kDim);
  auto ref = [](const std::vector<float>& m, int64_t rows, int64_t cols) {
    return WeightRef{DType::kF32, rows, cols, m.data(), nullptr};
  };
  std::vector<float> hn(kRows * W), d(kRows * kRank), mx(kRows * W), inj(kRows * kStreams), input(kRows * kDim);
  k1_->rms_norm_groups(h.data(), kRows, kStreams, kDim, norm_w.data(), 1e-6f, true, hn.data());
  k1_->matmul(hn.data(), kRows, ref(down, kRank, W), d.data());
  k1_->scale_activation(d.data(), kRows * kRank, 1.0f / kStreams, Activation::kSilu);
  k1_->matmul(d.data(), kRows, ref(up, W, kRank), mx.data());
  k1_->hc_mix(mx.data(), hn.data(), kRows, kStreams, kDim, input.data());
  k1_->matmul(hn.data(), kRows, ref(inject, kStreams, W), inj.data());
  std::vector<float> out = h;
  k1_->hc_inject(out.data(), y.data(), inj.data(), kRows, kStreams, kDim);

  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  double worst_in = 0, worst_out = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    std::vector<double> xn(W), dd(kRank), m(W), j(kStreams);
    for (int64_t s = 0; s < kStreams; ++s) {
      double ss = 0;
      for (int64_t i = 0; i < kDim; ++i) ss += double(h[r * W + s * kDim + i]) * h[r * W + s * kDim + i];
      const double inv = 1.0 / std::sqrt(ss / kDim + 1e-6);
      for (int64_t i = 0; i < kDim; ++i) xn[s * kDim + i] = h[r * W + s * kDim + i] * inv * (1.0 + norm_w[s * kDim + i]);
    }
    for (int64_t q = 0; q < kRank; ++q) {
      double a = 0;
      for (int64_t c = 0; c < W; ++c) a += double(down[q * W + c]) * xn[c];
      a /= kStreams;
      dd[q] = a * sig(a);
    }
    for (int64_t c = 0; c < W; ++c) {
      double a = 0;
      for (int64_t q = 0; q < kRank; ++q) a += double(up[c * kRank + q]) * dd[q];
      m[c] = sig(a);
    }
    for (int64_t s = 0; s < kStreams; ++s) {
      double a = 0;
      for (int64_t c = 0; c < W; ++c) a += double(inject[s * W + c]) * xn[c];
      j[s] = 2.0 * sig(a / kStreams);
    }
    for (int64_t i = 0; i < kDim; ++i) {
      double mean = 0;
      for (int64_t s = 0; s < kStreams; ++s) mean += m[s * kDim + i] * xn[s * kDim + i];
      mean /= kStreams;
      worst_in = std::max(worst_in, std::abs(mean - input[r * kDim + i]));
      for (int64_t s = 0; s < kStreams; ++s) {
        const double want = h[r * W + s * kDim + i] + j[s] * y[r * kDim + i];
        worst_out = std::max(worst_out, std::abs(want - out[r * W + s * kDim + i]));
      }
    }
  }
  EXPECT_LT(worst_in, 1e-5);
  EXPECT_LT(worst_out, 1e-5);
}

class PleKernelsTest : public ::testing::Test {
 protected:
  ThreadPool pool_{4};
  std::unique_ptr<Kernels> k_ = make_cpu_kernels(&pool_);
  std::mt19937 rng_{2046};
};

TEST_F(PleKernelsTest, GateGivesTheBitsOfItsDefinition) {
  constexpr int64_t kRows = 3, kStreams = 4, kDim = 24;
  auto key = randn(rng_, kRows * kStreams * kDim), query = randn(rng_, kRows * kStreams * kDim);
  auto value = randn(rng_, kRows * kDim);
  std::fill(key.begin(), key.begin() + kDim, 0.0f);  // stream 0 of row 0: a zero score, gate sigmoid(0)
  std::vector<float> out(kRows * kStreams * kDim), want(out.size());
  k_->ple_gate(key.data(), query.data(), value.data(), kRows, kStreams, kDim, out.data());
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t s = 0; s < kStreams; ++s) {
      float dot = 0.0f;
      std::vector<float> kv(key.begin() + (r * kStreams + s) * kDim, key.begin() + (r * kStreams + s + 1) * kDim);
      std::vector<float> qv(query.begin() + (r * kStreams + s) * kDim,
                            query.begin() + (r * kStreams + s + 1) * kDim);
      dot = cpu::dot(kv.data(), qv.data(), kDim);
      const float t = dot * (1.0f / std::sqrt(float(kDim)));
      const float mag = std::sqrt(std::max(std::fabs(t), 1e-6f));
      const float g = cpu::sigmoid(t > 0 ? mag : t < 0 ? -mag : 0.0f);
      for (int64_t i = 0; i < kDim; ++i) want[(r * kStreams + s) * kDim + i] = g * value[r * kDim + i];
    }
  EXPECT_TRUE(same_bits(out, want));
  EXPECT_EQ(out[0], 0.5f * value[0]);
  // The gate is sigmoid of the signed square root, not of the score itself.
  const float t1 = cpu::dot(key.data() + kDim, query.data() + kDim, kDim) / std::sqrt(float(kDim));
  EXPECT_NE(out[kDim], cpu::sigmoid(t1) * value[0]);
}

TEST_F(PleKernelsTest, DilatedConvIsItsDefinitionAndSplitInvariant) {
  constexpr int64_t kT = 19, kC = 40, kK = 4, kDil = 3, kHist = (kK - 1) * kDil;
  auto x = randn(rng_, kT * kC), w = randn(rng_, kK * kC, 0.5f);
  std::vector<float> state(kHist * kC, 0.0f), out(kT * kC);
  k_->causal_conv_silu_dilated(x.data(), kT, kC, w.data(), kK, kDil, state.data(), out.data());
  double worst = 0;
  for (int64_t t = 0; t < kT; ++t)
    for (int64_t c = 0; c < kC; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < kK; ++j) {
        const int64_t src = t - (kK - 1 - j) * kDil;
        if (src >= 0) acc += double(w[j * kC + c]) * x[src * kC + c];
      }
      const double want = acc / (1.0 + std::exp(-acc));
      worst = std::max(worst, std::abs(want - out[t * kC + c]));
    }
  EXPECT_LT(worst, 1e-5);
  for (int64_t i = 0; i < kHist; ++i)  // the state holds the last kHist inputs
    EXPECT_EQ(std::memcmp(&state[i * kC], &x[(kT - kHist + i) * kC], kC * sizeof(float)), 0) << i;

  // Any split, carried by the state, gives the same bits.
  for (int64_t cut : {1, 5, 9, 10, 18}) {
    std::vector<float> st(kHist * kC, 0.0f), o(kT * kC);
    k_->causal_conv_silu_dilated(x.data(), cut, kC, w.data(), kK, kDil, st.data(), o.data());
    k_->causal_conv_silu_dilated(x.data() + cut * kC, kT - cut, kC, w.data(), kK, kDil, st.data(), o.data() + cut * kC);
    EXPECT_TRUE(same_bits(o, out)) << "cut at " << cut;
    EXPECT_TRUE(same_bits(st, state)) << "cut at " << cut;
  }

  // Dilation 1 is the undilated conv, bit for bit.
  std::vector<float> s1((kK - 1) * kC, 0.0f), s2 = s1, o1(kT * kC), o2(kT * kC);
  k_->causal_conv_silu_dilated(x.data(), kT, kC, w.data(), kK, 1, s1.data(), o1.data());
  float* states[] = {s2.data()};
  k_->causal_conv_silu(x.data(), kT, kC, w.data(), kK, states, 1, o2.data());
  EXPECT_TRUE(same_bits(o1, o2));
  EXPECT_FALSE(same_bits(o1, out));
}

}  // namespace
}  // namespace sb
