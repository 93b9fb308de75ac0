// CPU kernels: the chunked and recurrent delta rule agree; GEMM and attention
// give each row the same bits whatever rows share the call and whatever the
// thread count; RoPE rotates only the first `rot` dims, in rotate-half pairs.
#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "model/checkpoint.h"
#include "runtime/kernels.h"
#include "runtime/threads.h"

namespace sb {
namespace {

std::vector<float> randn(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

void normalise_heads(std::vector<float>& x, int64_t d, float scale) {
  for (size_t h = 0; h < x.size() / d; ++h) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += x[h * d + i] * x[h * d + i];
    for (int64_t i = 0; i < d; ++i) x[h * d + i] = static_cast<float>(x[h * d + i] / std::sqrt(ss) * scale);
  }
}

TEST(DeltaRule, ChunkedAndRecurrentFormsAgree) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool);
  std::mt19937 rng(3);
  const int64_t L = 64, nk = 2, nv = 4, dk = 16, dv = 24;
  for (int trial = 0; trial < 5; ++trial) {
    auto q = randn(rng, L * nk * dk), key = randn(rng, L * nk * dk), v = randn(rng, L * nv * dv);
    normalise_heads(q, dk, 1.0f / 4.0f);
    normalise_heads(key, dk, 1.0f);
    std::vector<float> g(L * nv), beta(L * nv);
    std::uniform_real_distribution<float> ug(-2.0f, 0.0f), ub(0.0f, 1.0f);
    for (auto& x : g) x = ug(rng);
    for (auto& x : beta) x = ub(rng);
    auto state0 = randn(rng, nv * dk * dv, 0.5f);
    DeltaRuleInput in{L, nk, nv, dk, dv, q.data(), key.data(), v.data(), g.data(), beta.data()};
    std::vector<float> s_chunk = state0, s_rec = state0, o_chunk(L * nv * dv), o_rec(L * nv * dv);
    k->delta_rule_chunk(in, s_chunk.data(), o_chunk.data());
    k->delta_rule_recurrent(in, s_rec.data(), o_rec.data());
    EXPECT_LT(rel_err(o_chunk, o_rec), 1e-5) << "trial " << trial;
    EXPECT_LT(rel_err(s_chunk, s_rec), 1e-5) << "trial " << trial;
  }
}

// What PrefillCarry relies on: the chunked form's output row i reads only
// rows <= i and the state at the chunk's start, so the first t rows of a
// chunk give the bits of the whole chunk's first t output rows.
TEST(DeltaRule, AChunksFirstRowsGiveTheWholeChunksFirstOutputs) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool);
  std::mt19937 rng(8);
  const int64_t L = 64, nk = 2, nv = 4, dk = 16, dv = 24;
  auto q = randn(rng, L * nk * dk), key = randn(rng, L * nk * dk), v = randn(rng, L * nv * dv);
  normalise_heads(q, dk, 1.0f / 4.0f);
  normalise_heads(key, dk, 1.0f);
  std::vector<float> g(L * nv), beta(L * nv);
  std::uniform_real_distribution<float> ug(-2.0f, 0.0f), ub(0.0f, 1.0f);
  for (auto& x : g) x = ug(rng);
  for (auto& x : beta) x = ub(rng);
  const auto state0 = randn(rng, nv * dk * dv, 0.5f);
  std::vector<float> s_all = state0, o_all(L * nv * dv);
  DeltaRuleInput all{L, nk, nv, dk, dv, q.data(), key.data(), v.data(), g.data(), beta.data()};
  k->delta_rule_chunk(all, s_all.data(), o_all.data());
  for (int64_t t : {1, 2, 17, 40, 63}) {
    std::vector<float> s = state0, o(t * nv * dv);
    DeltaRuleInput part{t, nk, nv, dk, dv, q.data(), key.data(), v.data(), g.data(), beta.data()};
    k->delta_rule_chunk(part, s.data(), o.data());
    EXPECT_EQ(std::memcmp(o.data(), o_all.data(), o.size() * 4), 0) << "first " << t << " rows";
  }
}

TEST(Matmul, EachRowGetsTheSameBitsWhateverTheCall) {
  std::mt19937 rng(5);
  const int64_t M = 37, K = 72, N = 45;  // K and N deliberately not multiples of 16 or 4
  auto x = randn(rng, M * K);
  auto wf = randn(rng, N * K);
  std::vector<uint16_t> wb(N * K);
  for (size_t i = 0; i < wb.size(); ++i) wb[i] = f32_to_bf16(wf[i]);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    WeightRef w{dt, N, K, dt == DType::kF32 ? static_cast<const void*>(wf.data()) : wb.data()};
    ThreadPool p1(1), p2(2);
    auto k1 = make_cpu_kernels(&p1), k2 = make_cpu_kernels(&p2);
    std::vector<float> all(M * N), all2(M * N);
    k1->matmul(x.data(), M, w, all.data());
    k2->matmul(x.data(), M, w, all2.data());
    EXPECT_EQ(std::memcmp(all.data(), all2.data(), all.size() * 4), 0) << "thread count changed bits";
    for (int64_t start = 0; start < M; start += 5) {
      const int64_t rows = std::min<int64_t>(1 + start % 7, M - start);
      std::vector<float> part(rows * N);
      k1->matmul(x.data() + start * K, rows, w, part.data());
      EXPECT_EQ(std::memcmp(part.data(), all.data() + start * N, part.size() * 4), 0) << "rows " << start << "+" << rows;
    }
    // And the values are a correct product.
    double worst = 0;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double ref = 0;
        for (int64_t kk = 0; kk < K; ++kk)
          ref += double(x[i * K + kk]) * (dt == DType::kF32 ? wf[j * K + kk] : bf16_to_f32(wb[j * K + kk]));
        worst = std::max(worst, std::abs(ref - all[i * N + j]));
      }
    EXPECT_LT(worst, 1e-4);
  }
}

TEST(Attention, RowsGetTheSameBitsWhateverRowsShareTheCall) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool);
  std::mt19937 rng(9);
  const int64_t n = 90, nh = 4, nkv = 2, d = 32;
  auto q = randn(rng, n * nh * d), key = randn(rng, n * nkv * d), v = randn(rng, n * nkv * d);
  AttentionInput in{n, 0, nh, nkv, d, q.data(), key.data(), v.data(), 0.17f};
  std::vector<float> all(n * nh * d);
  k->attention(in, all.data());
  for (int64_t start : {0, 17, 63, 64, 89}) {
    AttentionInput part = in;
    part.first_pos = start;
    part.rows = std::min<int64_t>(n - start, 11);
    part.q = q.data() + start * nh * d;
    std::vector<float> out(part.rows * nh * d);
    k->attention(part, out.data());
    EXPECT_EQ(std::memcmp(out.data(), all.data() + start * nh * d, out.size() * 4), 0) << "start " << start;
  }
  // Row 0 sees only key 0: its output is v of its KV head exactly.
  for (int64_t h = 0; h < nh; ++h)
    for (int64_t i = 0; i < d; ++i) EXPECT_EQ(all[h * d + i], v[(h / 2) * d + i]);
}

TEST(Rope, RotatesOnlyTheFirstRotDimsInRotateHalfPairs) {
  ThreadPool pool(1);
  auto k = make_cpu_kernels(&pool);
  const int64_t d = 32, rot = 8;
  std::vector<float> x(d);
  for (int64_t i = 0; i < d; ++i) x[i] = 1.0f + i;
  std::vector<float> y = x;
  const int64_t pos = 7;
  const double theta = 1e7;
  k->rope(y.data(), 1, 1, d, rot, &pos, theta);
  for (int64_t i = rot; i < d; ++i) EXPECT_EQ(y[i], x[i]) << "dim " << i << " must pass through";
  for (int64_t i = 0; i < rot / 2; ++i) {
    const double a = pos * std::pow(theta, -2.0 * i / rot);  // inv_freq over rot dims, not d
    EXPECT_NEAR(y[i], x[i] * std::cos(a) - x[i + rot / 2] * std::sin(a), 1e-5);
    EXPECT_NEAR(y[i + rot / 2], x[i + rot / 2] * std::cos(a) + x[i] * std::sin(a), 1e-5);
  }
}

TEST(ThreadPool, ConcurrentCallersEachGetAllTheirWork) {
  ThreadPool pool(2);
  std::vector<std::thread> callers;
  std::atomic<int64_t> total{0};
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep) pool.parallel_for(17, [&](int64_t i) { total += i; });
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 50 * (16 * 17 / 2));
}

}  // namespace
}  // namespace sb
