// CPU kernels: the chunked and recurrent delta rule agree, and the recurrent
// one and the causal conv give the bits of their definitions; GEMM and attention
// give each row the same bits whatever rows share the call and whatever the
// thread count, small_gemm those of its definition; RoPE rotates only the
// first `rot` dims, in rotate-half pairs.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "model/checkpoint.h"
#include "runtime/cpu/activations.h"
#include "runtime/cpu/bf16.h"
#include "runtime/cpu/float_mode.h"
#include "runtime/cpu/logits.h"
#include "runtime/cpu/simd.h"
#include "runtime/cpu/small_gemm.h"
#include "runtime/cpu/backend.h"
#include "runtime/kernels.h"
#include "runtime/math.h"
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

// One random chunk of the delta rule's inputs (64 rows, small heads) and a
// start state, drawn from rng.
struct DeltaChunk {
  static constexpr int64_t L = 64, nk = 2, nv = 4, dk = 16, dv = 24;
  std::vector<float> q, key, v, g, beta, state0;
  explicit DeltaChunk(std::mt19937& rng, int64_t rows = L) {
    q = randn(rng, rows * nk * dk), key = randn(rng, rows * nk * dk), v = randn(rng, rows * nv * dv);
    normalise_heads(q, dk, 1.0f / 4.0f);
    normalise_heads(key, dk, 1.0f);
    g.resize(rows * nv), beta.resize(rows * nv);
    std::uniform_real_distribution<float> ug(-2.0f, 0.0f), ub(0.0f, 1.0f);
    for (auto& x : g) x = ug(rng);
    for (auto& x : beta) x = ub(rng);
    state0 = randn(rng, nv * dk * dv, 0.5f);
  }
  // Its first t rows.
  DeltaRuleInput rows(int64_t t) const { return rows(0, t); }
  // Rows [a, b).
  DeltaRuleInput rows(int64_t a, int64_t b) const {
    return DeltaRuleInput{b - a, nk, nv, dk, dv, q.data() + a * nk * dk, key.data() + a * nk * dk,
                          v.data() + a * nv * dv, g.data() + a * nv, beta.data() + a * nv};
  }
};

// The recurrent form over the tokens of one sequence: a call per token.
void recurrent_tokens(Kernels& k, const DeltaRuleInput& in, float* state, float* out) {
  for (int64_t t = 0; t < in.tokens; ++t) {
    DeltaRuleInput one = in;
    one.tokens = 1;
    one.q = in.q + t * in.n_k * in.d_k, one.k = in.k + t * in.n_k * in.d_k, one.v = in.v + t * in.n_v * in.d_v;
    one.g = in.g + t * in.n_v, one.beta = in.beta + t * in.n_v;
    k.delta_rule_recurrent(one, &state, out + t * in.n_v * in.d_v);
  }
}

TEST(DeltaRule, ChunkedAndRecurrentFormsAgree) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool);
  std::mt19937 rng(3);
  constexpr int64_t L = DeltaChunk::L, nv = DeltaChunk::nv, dv = DeltaChunk::dv;
  for (int trial = 0; trial < 5; ++trial) {
    const DeltaChunk c(rng);
    const DeltaRuleInput in = c.rows(L);
    std::vector<float> s_chunk = c.state0, s_rec = c.state0, o_chunk(L * nv * dv), o_rec(L * nv * dv);
    k->delta_rule_chunk(in, s_chunk.data(), o_chunk.data());
    recurrent_tokens(*k, in, s_rec.data(), o_rec.data());
    EXPECT_LT(rel_err(o_chunk, o_rec), 1e-5) << "trial " << trial;
    EXPECT_LT(rel_err(s_chunk, s_rec), 1e-5) << "trial " << trial;
    // A shorter chunk gives its rows the bits they get in the full one: a
    // row's output never depends on the rows after it.
    for (int64_t len : {1, 5, 33, 63}) {
      std::vector<float> s_part = c.state0, o_part(len * nv * dv);
      k->delta_rule_chunk(c.rows(len), s_part.data(), o_part.data());
      EXPECT_EQ(std::memcmp(o_part.data(), o_chunk.data(), o_part.size() * 4), 0) << len << " rows";
    }
  }
}

// The recurrent form by its definition, one element at a time: per token,
// the decay, k^T S summed over rows in ascending order, then the rank-one
// update and q^T S over rows in ascending order, each step one rounding.
void recurrent_by_definition(const DeltaRuleInput& in, float* state, float* out) {
  const int64_t dk = in.d_k, dv = in.d_v;
  for (int64_t t = 0; t < in.tokens; ++t)
    for (int64_t h = 0; h < in.n_v; ++h) {
      const int64_t kh = h / (in.n_v / in.n_k);
      const float* q = in.q + (t * in.n_k + kh) * dk;
      const float* k = in.k + (t * in.n_k + kh) * dk;
      const float* v = in.v + (t * in.n_v + h) * dv;
      const float alpha = exp_f(in.g[t * in.n_v + h]), beta = in.beta[t * in.n_v + h];  // the kernels' e^x
      float* S = state + h * dk * dv;
      float* o = out + (t * in.n_v + h) * dv;
      for (int64_t c = 0; c < dv; ++c) {
        float mem = 0.0f;
        for (int64_t a = 0; a < dk; ++a) {
          S[a * dv + c] *= alpha;
          mem = std::fma(k[a], S[a * dv + c], mem);
        }
        const float u = beta * (v[c] - mem);
        float acc = 0.0f;
        for (int64_t a = 0; a < dk; ++a) {
          S[a * dv + c] = std::fma(k[a], u, S[a * dv + c]);
          acc = std::fma(q[a], S[a * dv + c], acc);
        }
        o[c] = acc;
      }
    }
}

// The decode form gives the bits of that definition whatever the head's
// width: 128 columns at a time in registers, 16 at a time, and the last few
// one by one (a reordering of any step would show in the state or output);
// token after token of one sequence, and for one token of each of several
// sequences in one call, each row on its own state.
TEST(DeltaRule, RecurrentFormGivesTheBitsOfItsDefinition) {
  ThreadPool pool(2), pool1(1);
  auto k = make_cpu_kernels(&pool), k1 = make_cpu_kernels(&pool1);
  std::mt19937 rng(12);
  constexpr int64_t T = 3, nk = 2, nv = 4, dk = 32;
  for (int64_t dv : {24, 128, 144, 152}) {
    std::vector<float> q = randn(rng, T * nk * dk), key = randn(rng, T * nk * dk), v = randn(rng, T * nv * dv);
    normalise_heads(q, dk, 1.0f / std::sqrt(float(dk)));
    normalise_heads(key, dk, 1.0f);
    std::vector<float> g(T * nv), beta(T * nv);
    std::uniform_real_distribution<float> ug(-2.0f, 0.0f), ub(0.0f, 1.0f);
    for (auto& x : g) x = ug(rng);
    for (auto& x : beta) x = ub(rng);
    const DeltaRuleInput in{T, nk, nv, dk, dv, q.data(), key.data(), v.data(), g.data(), beta.data()};
    const int64_t S = nv * dk * dv, O = nv * dv;
    std::vector<float> s_kernel = randn(rng, S, 0.5f), s_def = s_kernel;
    std::vector<float> o_kernel(T * O), o_def(T * O);
    recurrent_tokens(*k, in, s_kernel.data(), o_kernel.data());
    recurrent_by_definition(in, s_def.data(), o_def.data());
    EXPECT_TRUE(std::memcmp(o_kernel.data(), o_def.data(), o_def.size() * 4) == 0) << "output, d_v " << dv;
    EXPECT_TRUE(std::memcmp(s_kernel.data(), s_def.data(), s_def.size() * 4) == 0) << "state, d_v " << dv;

    // Row t of one call on its own state: the bits of that token alone; with
    // one thread a task is a row's every head, with two each head its own.
    for (auto* kern : {k.get(), k1.get()}) {
      std::vector<float> states = randn(rng, T * S, 0.5f), states_def = states;
      float* const rows[] = {states.data(), states.data() + S, states.data() + 2 * S};
      kern->delta_rule_recurrent(in, rows, o_kernel.data());
      for (int64_t t = 0; t < T; ++t) {
        DeltaRuleInput one = in;
        one.tokens = 1;
        one.q += t * nk * dk, one.k += t * nk * dk, one.v += t * O, one.g += t * nv, one.beta += t * nv;
        recurrent_by_definition(one, states_def.data() + t * S, o_def.data() + t * O);
      }
      EXPECT_TRUE(std::memcmp(o_kernel.data(), o_def.data(), o_def.size() * 4) == 0) << "rows' outputs, d_v " << dv;
      EXPECT_TRUE(std::memcmp(states.data(), states_def.data(), states.size() * 4) == 0) << "rows' states, d_v " << dv;
    }

    // A verify step's rows of one sequence as one chain: row t's state and
    // output those of the tokens one at a time, the start state untouched;
    // and in place, the last state the same.
    std::vector<float> start = randn(rng, S, 0.5f), start_copy = start, seq = start, chain(T * S);
    std::vector<float> o_chain(T * O), o_seq(T * O), states_seq(T * S);
    float* const chained[] = {chain.data(), chain.data() + S, chain.data() + 2 * S};
    k->delta_rule_rows(in, start.data(), chained, o_chain.data());
    for (int64_t t = 0; t < T; ++t) {
      DeltaRuleInput one = in;
      one.tokens = 1;
      one.q += t * nk * dk, one.k += t * nk * dk, one.v += t * O, one.g += t * nv, one.beta += t * nv;
      recurrent_by_definition(one, seq.data(), o_seq.data() + t * O);
      std::copy(seq.begin(), seq.end(), states_seq.begin() + t * S);
    }
    EXPECT_TRUE(std::memcmp(o_chain.data(), o_seq.data(), o_seq.size() * 4) == 0) << "chain: outputs, d_v " << dv;
    EXPECT_TRUE(std::memcmp(chain.data(), states_seq.data(), chain.size() * 4) == 0) << "chain: states, d_v " << dv;
    EXPECT_TRUE(start == start_copy) << "chain: the start state changed, d_v " << dv;
    float* const in_place_rows[] = {start.data(), start.data(), start.data()};
    k->delta_rule_rows(in, start.data(), in_place_rows, o_chain.data());
    EXPECT_TRUE(std::memcmp(o_chain.data(), o_seq.data(), o_seq.size() * 4) == 0) << "chain in place, d_v " << dv;
    EXPECT_TRUE(std::memcmp(start.data(), seq.data(), seq.size() * 4) == 0) << "chain in place: state, d_v " << dv;
    // From a state kept aside into the sequence's state, every row's state
    // that one buffer (a speculative verify): the last row's state, the kept
    // state untouched; on one thread and on two.
    for (auto* kern : {k.get(), k1.get()}) {
      const std::vector<float> kept = start_copy;
      std::vector<float> into(S, 0.0f);
      float* const into_rows[] = {into.data(), into.data(), into.data()};
      kern->delta_rule_rows(in, kept.data(), into_rows, o_chain.data());
      EXPECT_TRUE(std::memcmp(o_chain.data(), o_seq.data(), o_seq.size() * 4) == 0) << "chain from kept, d_v " << dv;
      EXPECT_TRUE(std::memcmp(into.data(), seq.data(), seq.size() * 4) == 0) << "chain from kept: state, d_v " << dv;
      EXPECT_TRUE(kept == start_copy) << "chain from kept: the kept state changed, d_v " << dv;
    }

    // The replay of the first n rows' updates gives the state after row n - 1
    // bit for bit, out of place and in place; a replay that misses a row's
    // decay or takes another row's update does not.
    std::vector<float> updates(T * O, -1.0f), o_rows(T * O);
    DeltaRuleInput with_updates = in;
    with_updates.updates = updates.data();
    k->delta_rule_rows(with_updates, start_copy.data(), chained, o_rows.data());
    EXPECT_TRUE(std::memcmp(o_rows.data(), o_seq.data(), o_seq.size() * 4) == 0) << "updates kept: outputs, d_v " << dv;
    for (auto* kern : {k.get(), k1.get()})
      for (int64_t n = 1; n <= T; ++n) {
        DeltaRuleInput first = in;
        first.tokens = n;
        std::vector<float> replayed(S, 0.0f), in_place = start_copy;
        kern->delta_rule_replay(first, updates.data(), start_copy.data(), replayed.data());
        kern->delta_rule_replay(first, updates.data(), in_place.data(), in_place.data());
        const float* want = states_seq.data() + (n - 1) * S;
        EXPECT_TRUE(std::memcmp(replayed.data(), want, S * 4) == 0) << "replay of " << n << " rows, d_v " << dv;
        EXPECT_TRUE(std::memcmp(in_place.data(), want, S * 4) == 0) << "replay in place, " << n << " rows, d_v " << dv;
        std::vector<float> no_decay_g(T * nv, 0.0f), wrong_u = updates;
        DeltaRuleInput undecayed = first;
        undecayed.g = no_decay_g.data();
        kern->delta_rule_replay(undecayed, updates.data(), start_copy.data(), replayed.data());
        EXPECT_FALSE(std::memcmp(replayed.data(), want, S * 4) == 0) << "replay without decay, d_v " << dv;
        std::rotate(wrong_u.begin(), wrong_u.begin() + O, wrong_u.end());  // row t gets row t + 1's updates
        kern->delta_rule_replay(first, wrong_u.data(), start_copy.data(), replayed.data());
        EXPECT_FALSE(std::memcmp(replayed.data(), want, S * 4) == 0) << "replay of other updates, d_v " << dv;
      }
  }
}

// The L2 norm gives each row the bits of its definition (the sum of squares
// one fma chain in ascending order), whatever rows share the call.
TEST(L2Normalise, EachRowGetsTheBitsOfItsDefinition) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool);
  std::mt19937 rng(8);
  for (int64_t dim : {24, 128})
    for (int64_t rows : {1, 7, 8, 21, 600}) {
      const std::vector<float> x = randn(rng, rows * dim);
      std::vector<float> got = x, want = x;
      k->l2_normalise(got.data(), rows, dim, 0.25f);
      for (int64_t r = 0; r < rows; ++r) {
        float* v = want.data() + r * dim;
        float ss = 0.0f;
        for (int64_t i = 0; i < dim; ++i) ss = std::fma(v[i], v[i], ss);
        const float inv = 1.0f / std::sqrt(ss + 1e-6f);
        for (int64_t i = 0; i < dim; ++i) v[i] = (v[i] * inv) * 0.25f;
      }
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << rows << " rows of " << dim;
    }
}

// The causal conv by its definition, one channel at a time: per row, the
// taps over [state | x] in ascending order from +0, then SiLU.
void conv_by_definition(const float* x, int64_t t, int64_t channels, const float* w, int64_t kernel, float* state,
                        float* out) {
  const int64_t hist = kernel - 1;
  std::vector<float> ext((hist + t) * channels);
  std::copy(state, state + hist * channels, ext.begin());
  std::copy(x, x + t * channels, ext.begin() + hist * channels);
  for (int64_t s = 0; s < t; ++s)
    for (int64_t c = 0; c < channels; ++c) {
      float acc = 0.0f;
      for (int64_t j = 0; j < kernel; ++j) acc = std::fma(w[j * channels + c], ext[(s + j) * channels + c], acc);
      out[s * channels + c] = cpu::silu(acc);
    }
  std::copy(ext.end() - hist * channels, ext.end(), state);
}

// The conv gives the bits of its definition for one sequence's rows (fewer
// and more rows than its history) and for one row of each of several
// sequences in a call, channel counts on and off the vector width and the
// kernel's strips of 64 channels, for the models' kernel of 4 and another.
TEST(CausalConv, GivesTheBitsOfItsDefinitionForOneSequenceOrOneRowOfEach) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool);
  std::mt19937 rng(5);
  for (int64_t kernel : {4, 2}) {
    for (int64_t channels : {40, 100, 6144}) {
      const int64_t hist = kernel - 1;
      const std::vector<float> w = randn(rng, kernel * channels, 0.5f);
      for (int64_t t : {1, 2, 5, 64}) {
        const std::vector<float> x = randn(rng, t * channels);
        std::vector<float> state = randn(rng, hist * channels), state_def = state;
        std::vector<float> out(t * channels), out_def(t * channels);
        float* const one[] = {state.data()};
        k->causal_conv_silu(x.data(), t, channels, w.data(), kernel, one, 1, out.data());
        conv_by_definition(x.data(), t, channels, w.data(), kernel, state_def.data(), out_def.data());
        EXPECT_EQ(std::memcmp(out.data(), out_def.data(), out.size() * 4), 0)
            << kernel << "-tap, " << channels << " channels, " << t << " rows";
        EXPECT_EQ(std::memcmp(state.data(), state_def.data(), state.size() * 4), 0)
            << kernel << ", " << channels << ", " << t;
      }
      constexpr int64_t n = 5;
      const std::vector<float> x = randn(rng, n * channels);
      std::vector<float> states = randn(rng, n * hist * channels), states_def = states;
      std::vector<float*> ptrs;
      for (int64_t i = 0; i < n; ++i) ptrs.push_back(states.data() + i * hist * channels);
      std::vector<float> out(n * channels), out_def(n * channels);
      k->causal_conv_silu(x.data(), n, channels, w.data(), kernel, ptrs.data(), n, out.data());
      for (int64_t i = 0; i < n; ++i)
        conv_by_definition(x.data() + i * channels, 1, channels, w.data(), kernel,
                           states_def.data() + i * hist * channels, out_def.data() + i * channels);
      EXPECT_EQ(std::memcmp(out.data(), out_def.data(), out.size() * 4), 0)
          << kernel << "-tap, " << channels << " channels, one row of each";
      EXPECT_EQ(std::memcmp(states.data(), states_def.data(), states.size() * 4), 0)
          << kernel << ", " << channels << ", states";
    }
  }
}

// A prefill's conv writes q, k and v into their own arrays: every part gets
// the bits of the same channels of the one-array output, with strips of 64
// and 16 channels and single channels on either side of a part's edge, and
// the state advances the same.
TEST(CausalConv, WritesItsChannelsIntoPartsWithTheBitsOfOneArray) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool);
  std::mt19937 rng(9);
  constexpr int64_t kernel = 4, hist = kernel - 1;
  const std::vector<std::vector<int64_t>> splits = {{2048, 2048, 2048}, {40, 1000, 5104}, {1, 63, 6080}};
  for (const std::vector<int64_t>& widths : splits) {
    constexpr int64_t channels = 6144;
    const std::vector<float> w = randn(rng, kernel * channels, 0.5f), x_all = randn(rng, 70 * channels);
    for (int64_t t : {1, 5, 70}) {
      const std::vector<float> x(x_all.begin(), x_all.begin() + t * channels);
      std::vector<float> state = randn(rng, hist * channels), state_parts = state;
      std::vector<float> whole(t * channels);
      float* const one[] = {state.data()};
      k->causal_conv_silu(x.data(), t, channels, w.data(), kernel, one, 1, whole.data());
      std::vector<std::vector<float>> outs;
      std::vector<RowPart> parts;
      for (const int64_t width : widths) outs.emplace_back(t * (width + 3), -1.0f);  // 3 floats between rows
      for (size_t p = 0; p < widths.size(); ++p) parts.push_back({widths[p], outs[p].data(), widths[p] + 3});
      float* const other[] = {state_parts.data()};
      k->causal_conv_silu(x.data(), t, channels, w.data(), kernel, other, 1, parts);
      int64_t first = 0;
      for (size_t p = 0; p < widths.size(); first += widths[p], ++p)
        for (int64_t s = 0; s < t; ++s) {
          EXPECT_EQ(std::memcmp(outs[p].data() + s * (widths[p] + 3), whole.data() + s * channels + first,
                                widths[p] * 4), 0)
              << "part " << p << " of " << widths.size() << ", row " << s << " of " << t;
          for (int64_t i = widths[p]; i < widths[p] + 3; ++i) EXPECT_EQ(outs[p][s * (widths[p] + 3) + i], -1.0f);
        }
      EXPECT_EQ(std::memcmp(state.data(), state_parts.data(), state.size() * 4), 0) << t << " rows";
    }
  }
}

// What PrefillCarry relies on: the chunked form's output row i reads only
// rows <= i and the state at the chunk's start, so the first t rows of a
// chunk give the bits of the whole chunk's first t output rows.
TEST(DeltaRule, AChunksFirstRowsGiveTheWholeChunksFirstOutputs) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool);
  std::mt19937 rng(8);
  constexpr int64_t L = DeltaChunk::L, nv = DeltaChunk::nv, dv = DeltaChunk::dv;
  const DeltaChunk c(rng);
  std::vector<float> s_all = c.state0, o_all(L * nv * dv);
  k->delta_rule_chunk(c.rows(L), s_all.data(), o_all.data());
  for (int64_t t : {1, 2, 17, 40, 63}) {
    std::vector<float> s = c.state0, o(t * nv * dv);
    k->delta_rule_chunk(c.rows(t), s.data(), o.data());
    EXPECT_EQ(std::memcmp(o.data(), o_all.data(), o.size() * 4), 0) << "first " << t << " rows";
  }
}

// Rows over several chunks of the grid (DeltaRuleInput::phase) give the bits
// of a call per chunk: the first chunk ends where the phase says, then every
// 64 rows.
TEST(DeltaRule, RowsOverSeveralChunksGiveACallPerChunksBits) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool);
  std::mt19937 rng(10);
  constexpr int64_t T = 200, L = DeltaChunk::L, nv = DeltaChunk::nv, dv = DeltaChunk::dv;
  const DeltaChunk c(rng, T);
  for (int64_t phase : {0, 5, 63}) {
    std::vector<float> s = c.state0, o(T * nv * dv), s_each = c.state0, o_each(T * nv * dv);
    DeltaRuleInput in = c.rows(0, T);
    in.phase = phase;
    k->delta_rule_chunk(in, s.data(), o.data());
    for (int64_t a = 0; a < T;) {
      const int64_t b = std::min(T, a + L - (phase + a) % L);
      k->delta_rule_chunk(c.rows(a, b), s_each.data(), o_each.data() + a * nv * dv);
      a = b;
    }
    EXPECT_EQ(std::memcmp(o.data(), o_each.data(), o.size() * 4), 0) << "phase " << phase;
    EXPECT_EQ(std::memcmp(s.data(), s_each.data(), s.size() * 4), 0) << "phase " << phase;
  }
}

// A chunk in parts (DeltaRuleInput::parts): each part writes only its own
// output rows, with the bits the whole chunk gives them, and leaves the state
// the chunk of its rows so far leaves; the kept rows are what it reads (spoilt
// between two parts, the next part's rows change).
TEST(DeltaRule, AChunkInPartsGivesTheWholeChunksBits) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool);
  std::mt19937 rng(9);
  constexpr int64_t nv = DeltaChunk::nv, dv = DeltaChunk::dv;
  const DeltaChunk c(rng);
  auto whole = [&](int64_t t, std::vector<float>* s, std::vector<float>* o) {
    *s = c.state0;
    o->assign(t * nv * dv, 0.0f);
    k->delta_rule_chunk(c.rows(t), s->data(), o->data());
  };
  auto part = [&](int64_t first, int64_t end, std::vector<float>& parts) {
    DeltaRuleInput in = c.rows(end);
    in.first = first;
    in.parts = parts.data();
    return in;
  };
  for (const std::vector<int64_t>& ends : {std::vector<int64_t>{1, 2, 64}, {5, 13, 40, 63, 64}, {31, 33}, {8, 16, 24}}) {
    std::vector<float> parts(delta_rule_parts_floats(nv, dv), std::nanf(""));
    int64_t first = 0;
    for (int64_t end : ends) {
      std::vector<float> s = c.state0, o((end - first) * nv * dv), s_whole, o_whole;
      k->delta_rule_chunk(part(first, end, parts), s.data(), o.data());
      whole(end, &s_whole, &o_whole);
      EXPECT_EQ(std::memcmp(o.data(), o_whole.data() + first * nv * dv, o.size() * 4), 0) << "rows " << first << ".." << end;
      EXPECT_EQ(std::memcmp(s.data(), s_whole.data(), s.size() * 4), 0) << "state at " << end;
      first = end;
    }
  }
  // The kept rows are read: spoil them between two parts.
  std::vector<float> parts(delta_rule_parts_floats(nv, dv));
  std::vector<float> s = c.state0, o(10 * nv * dv), s_whole, o_whole;
  k->delta_rule_chunk(part(0, 10, parts), s.data(), o.data());
  for (float& x : parts) x *= 1.5f;
  s = c.state0;
  k->delta_rule_chunk(part(10, 20, parts), s.data(), o.data());
  whole(20, &s_whole, &o_whole);
  EXPECT_NE(std::memcmp(o.data(), o_whole.data() + 10 * nv * dv, o.size() * 4), 0);
  EXPECT_NE(std::memcmp(s.data(), s_whole.data(), s.size() * 4), 0);
}

std::unique_ptr<Kernels> kernels(ThreadPool* pool, Precision p,
                                 KernelOptions::Bf16Path path = KernelOptions::Bf16Path::kAuto) {
  KernelOptions o;
  o.precision = p;
  o.bf16_path = path;
  return make_cpu_kernels(pool, o);
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// The bf16 product by its definition (runtime/cpu/bf16.h), one element at a time.
float bf16_product(const float* x, const uint16_t* w, int64_t K) {
  float acc = 0.0f;
  for (int64_t k = 0; k < K; k += 2) {
    const uint32_t xp = cpu::to_bf16(x[k]) | (k + 1 < K ? uint32_t(cpu::to_bf16(x[k + 1])) << 16 : 0u);
    const uint32_t wp = w[k] | (k + 1 < K ? uint32_t(w[k + 1]) << 16 : 0u);
    acc = cpu::dp_pair(acc, xp, wp);
  }
  return acc;
}

// small_gemm's bits are its definition's: each element one fma chain in
// ascending k from C's value (or +0), stopping at row0 + i + 1 when lower,
// whatever the tiles (rows 1 to 13, whole and partial vectors of columns).
TEST(SmallGemm, EachElementIsOneFmaChainInAscendingK) {
  std::mt19937 rng(23);
  for (int64_t M : {1, 5, 6, 7, 13})
    for (int64_t N : {3, 16, 48, 64, 85, 128})
      for (int64_t K : {1, 9, 64})
        for (int variant = 0; variant < 4; ++variant) {
          const bool accumulate = variant & 1, lower = variant & 2;
          const int64_t row0 = lower ? M % 3 : 0, lda = K + 2, ldb = N + 1, ldc = N + 3;
          const auto a = randn(rng, M * lda), b = randn(rng, K * ldb), c0 = randn(rng, M * ldc);
          std::vector<float> c = c0, want = c0;
          cpu::small_gemm(M, N, K, a.data(), lda, b.data(), ldb, c.data(), ldc, accumulate, lower, row0);
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
              float s = accumulate ? c0[i * ldc + j] : 0.0f;
              for (int64_t k = 0; k < (lower ? std::min(K, row0 + i + 1) : K); ++k)
                s = std::fma(a[i * lda + k], b[k * ldb + j], s);
              want[i * ldc + j] = s;
            }
          ASSERT_EQ(0, std::memcmp(c.data(), want.data(), c.size() * sizeof(float)))
              << "M " << M << " N " << N << " K " << K << " accumulate " << accumulate << " lower " << lower;
        }
}

// small_dots' bits are dot()'s for every element, whatever the 4 x 4 tiles,
// the blocks of keys (rows of b) and the tails of rows and keys around them.
TEST(SmallDots, EachElementIsDotOfItsRows) {
  std::mt19937 rng(29);
  for (int64_t M : {1, 3, 4, 7, 64})
    for (int64_t N : {1, 5, 16, 21, 64})
      for (int64_t K : {7, 16, 100, 256}) {
        const int64_t lda = K + 3, ldb = K + 1, lds = N + 2;
        const auto a = randn(rng, M * lda), b = randn(rng, N * ldb);
        std::vector<float> s(M * lds, -1.0f), want(M * lds, -1.0f);
        cpu::small_dots(M, N, K, a.data(), lda, b.data(), ldb, s.data(), lds);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) want[i * lds + j] = cpu::dot(a.data() + i * lda, b.data() + j * ldb, K);
        ASSERT_EQ(0, std::memcmp(s.data(), want.data(), s.size() * sizeof(float))) << "M " << M << " N " << N << " K " << K;
      }
}

// Row counts 1..70 and 512 in one call give each row the bits it gets alone,
// for both precisions, with 1 and 2 threads; weights of odd K and of N not a
// multiple of the 64-column panel. K is large enough that 512 rows are
// rounded to bf16 in ranges on the 2-thread pool.
TEST(Matmul, EachRowGetsTheSameBitsWhateverTheCall) {
  std::mt19937 rng(5);
  const int64_t K = 129, N = 141, M = 512;
  auto x = randn(rng, M * K);
  auto wf = randn(rng, N * K);
  std::vector<uint16_t> wb(N * K);
  for (size_t i = 0; i < wb.size(); ++i) wb[i] = f32_to_bf16(wf[i]);
  ThreadPool p1(1), p2(2);
  for (Precision p : {Precision::kF32, Precision::kBF16})
    for (DType dt : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(std::string(precision_name(p)) + " kernels, " + dtype_name(dt) + " weights");
      auto k1 = kernels(&p1, p), k2 = kernels(&p2, p);
      const WeightRef raw{dt, N, K, dt == DType::kF32 ? static_cast<const void*>(wf.data()) : wb.data(), nullptr};
      const WeightRef w = k1->prepare(raw);
      std::vector<float> all(M * N), all2(M * N), unprepared(M * N);
      k1->matmul(x.data(), M, w, all.data());
      k2->matmul(x.data(), M, k2->prepare(raw), all2.data());
      k1->matmul(x.data(), M, raw, unprepared.data());
      EXPECT_TRUE(same_bits(all.data(), all2.data(), all.size())) << "thread count changed bits";
      EXPECT_TRUE(same_bits(all.data(), unprepared.data(), all.size())) << "prepare changed bits";
      std::vector<float> lone(N);
      for (int64_t i = 0; i < M; i += 37) {
        k2->matmul(x.data() + i * K, 1, w, lone.data());
        EXPECT_TRUE(same_bits(lone.data(), all.data() + i * N, N)) << "row " << i << " alone";
      }
      for (int64_t rows = 1; rows <= 70; ++rows) {
        const int64_t start = (rows * 7) % (M - rows);
        std::vector<float> part(rows * N);
        k1->matmul(x.data() + start * K, rows, w, part.data());
        EXPECT_TRUE(same_bits(part.data(), all.data() + start * N, part.size())) << rows << " rows at " << start;
      }
      // And the values are a correct product: against double precision, and
      // under bf16 against the definition, bit for bit.
      double worst = 0;
      for (int64_t i = 0; i < 16; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double ref = 0;
          for (int64_t kk = 0; kk < K; ++kk)
            ref += double(x[i * K + kk]) * (dt == DType::kF32 ? wf[j * K + kk] : bf16_to_f32(wb[j * K + kk]));
          worst = std::max(worst, std::abs(ref - all[i * N + j]));
              if (p == Precision::kBF16) {
            const float want = bf16_product(x.data() + i * K, wb.data() + j * K, K);
            ASSERT_EQ(std::memcmp(&want, &all[i * N + j], 4), 0) << "element " << i << "," << j;
          }
        }
      // Rounding the input rows to bf16 costs about 2^-9 of each product.
      EXPECT_LT(worst, p == Precision::kBF16 ? 0.25 : 1e-4);
    }
}

// The emulated bf16 product (machines without AVX512_BF16) gives the bits of
// vdpbf16ps, on data that reaches the subnormal range and cancels exactly;
// enough rows that they are converted in ranges on the pool.
TEST(Matmul, EmulatedBf16GivesTheNativeBits) {
  std::mt19937 rng(17);
  const int64_t M = 512, K = 131, N = 77;
  std::vector<float> x(M * K), wf(N * K);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(-8, 8);
  // Every third row of each operand near 2^-62, so their products land around
  // the smallest normal float (2^-126), above and below.
  for (auto* v : {&x, &wf})
    for (size_t i = 0; i < v->size(); ++i)
      (*v)[i] = std::ldexp(rng() % 2 ? mant(rng) : -mant(rng), ex(rng) + ((i / K) % 3 == 0 ? -62 : 0));
  for (int64_t k = 0; k < K; ++k) x[K + k] = -x[k];  // row 1 = -row 0: cancellations
  ThreadPool pool(2);
  auto native = kernels(&pool, Precision::kBF16, KernelOptions::Bf16Path::kNative),
       emulated = kernels(&pool, Precision::kBF16, KernelOptions::Bf16Path::kFma);
  EXPECT_NE(emulated->name().find("emulated"), std::string::npos) << emulated->name();
#if defined(__AVX512BF16__)
  EXPECT_EQ(native->name(), "cpu/bf16/avx512bf16") << "this CPU's vdpbf16ps disagrees with bf16.h";
#endif
  const WeightRef w{DType::kF32, N, K, wf.data(), nullptr};
  std::vector<float> a(M * N), b(M * N);
  native->matmul(x.data(), M, native->prepare(w), a.data());
  emulated->matmul(x.data(), M, emulated->prepare(w), b.data());
  EXPECT_TRUE(same_bits(a.data(), b.data(), a.size()));
  int tiny = 0;
  for (float f : a) tiny += f != 0.0f && std::fabs(f) < 1e-30f;
  EXPECT_GT(tiny, 0) << "the data should reach the subnormal range";
}

TEST(Bf16, RoundsToNearestEvenAndFlushesSubnormals) {
  EXPECT_EQ(cpu::to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(cpu::to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie to even (down)
  EXPECT_EQ(cpu::to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie to even (up)
  EXPECT_EQ(cpu::to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(cpu::to_bf16(std::bit_cast<float>(0x00400000u)), 0x0000);  // subnormal to zero
  EXPECT_EQ(cpu::to_bf16(std::bit_cast<float>(0x80400000u)), 0x8000);  // keeping its sign
  EXPECT_EQ(cpu::to_bf16(std::bit_cast<float>(0x7f7fffffu)), 0x7f80);  // overflows to infinity
  EXPECT_EQ(cpu::to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(cpu::to_bf16(std::numeric_limits<float>::quiet_NaN()) & 0x7fc0, 0x7fc0);
  EXPECT_EQ(cpu::to_bf16(std::bit_cast<float>(0x7f800001u)) & 0x7fc0, 0x7fc0);  // signalling NaN made quiet
  // The vector rounding of the kernels agrees with the scalar one.
  std::mt19937 rng(3);
  std::vector<float> v(1000);
  for (auto& f : v) f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
  std::vector<uint16_t> out(1000);
  cpu::round_rows_to_bf16(v.data(), 1, 1000, out.data(), 1000);
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(out[i], cpu::to_bf16(v[i])) << std::hex << std::bit_cast<uint32_t>(v[i]);
}

// vexp stays within 2 ulp of e^x over the whole normal range, and the scalar
// activations give the bits of a vector lane (a tail of a row must round as
// its lanes do).
TEST(Simd, ExpWithinTwoUlpAndScalarActivationsEqualTheirLanes) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> u(-87.0f, 88.0f);
  int64_t worst_ulp = 0;
  for (int rep = 0; rep < 20000; ++rep) {
    alignas(64) float x[16], e[16], si[16], sg[16];
    for (float& f : x) f = rep < 10 ? static_cast<float>(rep - 5) * 0.125f : u(rng);
    const cpu::V16 v = cpu::V16::load(x);
    cpu::vexp(v).store(e);
    cpu::silu(v).store(si);
    cpu::sigmoid(v).store(sg);
    for (int l = 0; l < 16; ++l) {
      const float want = static_cast<float>(std::exp(static_cast<double>(x[l])));
      const int64_t ulp = std::llabs(int64_t(std::bit_cast<int32_t>(want)) - std::bit_cast<int32_t>(e[l]));
      worst_ulp = std::max(worst_ulp, ulp);
      ASSERT_LE(ulp, 2) << "e^" << x[l] << " = " << e[l] << ", want " << want;
      const float s1 = cpu::silu(x[l]), s2 = cpu::sigmoid(x[l]);
      ASSERT_EQ(std::memcmp(&s1, &si[l], 4), 0) << "silu " << x[l];
      ASSERT_EQ(std::memcmp(&s2, &sg[l], 4), 0) << "sigmoid " << x[l];
    }
  }
  EXPECT_GE(worst_ulp, 1) << "a sweep this wide should meet a rounding difference";
  // Beyond the range: +0 at and below -87 (a masked score's weight), a
  // finite result above 88; NaN stays NaN.
  alignas(64) float edge[16] = {-1000.0f, 1000.0f, std::numeric_limits<float>::quiet_NaN(),
                                -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity()};
  cpu::vexp(cpu::V16::load(edge)).store(edge);
  EXPECT_EQ(std::bit_cast<uint32_t>(edge[0]), 0u);
  EXPECT_TRUE(std::isfinite(edge[1]));
  EXPECT_TRUE(std::isnan(edge[2]));
  EXPECT_EQ(std::bit_cast<uint32_t>(edge[3]), 0u);
  EXPECT_TRUE(std::isfinite(edge[4]));
  EXPECT_LT(std::fabs(cpu::silu(-1000.0f)), 1e-30f);  // -1000 / e^88
  EXPECT_EQ(cpu::silu(1000.0f), 1000.0f);
}

TEST(Simd, SixteenTreeSumsAtOnceEqualOneByOne) {
  std::mt19937 rng(8);
  std::vector<float> data(256);
  for (auto& f : data) f = std::ldexp(static_cast<float>(rng() % 100000) - 50000.0f, static_cast<int>(rng() % 40) - 20);
  cpu::V16 v[16];
  for (int i = 0; i < 16; ++i) v[i] = cpu::V16::load(data.data() + 16 * i);
  float out[16];
  cpu::hsum16(v, out);
  for (int i = 0; i < 16; ++i) {
    const float want = cpu::hsum(v[i]);
    EXPECT_EQ(std::memcmp(&want, &out[i], 4), 0) << i;
  }
}

// Row counts 1..70 and 512 in one call, at any start, with 1 or 2 threads,
// causal or with a sparse block mask: each row gets the same bits.
TEST(Attention, RowsGetTheSameBitsWhateverRowsShareTheCall) {
  ThreadPool p1(1), p2(2);
  auto k1 = make_cpu_kernels(&p1), k2 = make_cpu_kernels(&p2);
  std::mt19937 rng(9);
  const int64_t n = 512, nh = 4, nkv = 2, d = 40, mblock = 8, stride = n / mblock;
  auto q = randn(rng, n * nh * d), key = randn(rng, n * nkv * d), v = randn(rng, n * nkv * d);
  std::vector<uint8_t> mask(n * stride);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t b = 0; b < stride; ++b) mask[r * stride + b] = b == r / mblock || rng() % 3 == 0;
  for (bool sparse : {false, true}) {
    SCOPED_TRACE(sparse ? "sparse" : "causal");
    AttentionInput in{n, 0, nh, nkv, d, q.data(), key.data(), v.data(), 0.17f};
    if (sparse) {
      in.block_mask = mask.data();
      in.mask_stride = stride;
      in.mask_block = mblock;
    }
    std::vector<float> all(n * nh * d), all2(n * nh * d);
    k1->attention(in, all.data());
    k2->attention(in, all2.data());
    EXPECT_EQ(std::memcmp(all.data(), all2.data(), all.size() * 4), 0) << "thread count changed bits";
    // A call of `rows` query rows from `base` gives the bits of those rows in `whole`.
    auto rows_match = [&](const AttentionInput& base, const std::vector<float>& whole, int64_t rows) {
      const int64_t start = (rows * 29) % (n - rows);
      AttentionInput part = base;
      part.first_pos = start;
      part.rows = rows;
      part.q = q.data() + start * nh * d;
      if (sparse) part.block_mask = mask.data() + start * stride;
      std::vector<float> out(rows * nh * d);
      k1->attention(part, out.data());
      return std::memcmp(out.data(), whole.data() + start * nh * d, out.size() * 4) == 0;
    };
    for (int64_t rows = 1; rows <= 70; ++rows) EXPECT_TRUE(rows_match(in, all, rows)) << rows << " rows";
    // Row 0 sees only key 0: its output is v of its KV head exactly.
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t i = 0; i < d; ++i) EXPECT_EQ(all[h * d + i], v[(h / 2) * d + i]);
    // Keys and values stored in bf16 (the State under the bf16 precision)
    // give exactly the bits of f32 storage holding the same (rounded) values:
    // the kernel widens them, nothing else changes.
    std::vector<uint16_t> key16(key.size()), v16(v.size());
    std::vector<float> key_r(key.size()), v_r(v.size());
    for (size_t i = 0; i < key.size(); ++i) key_r[i] = bf16_to_f32(key16[i] = f32_to_bf16(key[i]));
    for (size_t i = 0; i < v.size(); ++i) v_r[i] = bf16_to_f32(v16[i] = f32_to_bf16(v[i]));
    AttentionInput wide = in, narrow = in;
    wide.k = key_r.data();
    wide.v = v_r.data();
    narrow.k = key16.data();
    narrow.v = v16.data();
    narrow.kv_dtype = DType::kBF16;
    std::vector<float> from_wide(n * nh * d), from_narrow(n * nh * d);
    k1->attention(wide, from_wide.data());
    k2->attention(narrow, from_narrow.data());
    EXPECT_EQ(std::memcmp(from_wide.data(), from_narrow.data(), from_wide.size() * 4), 0) << "bf16 K/V";
    EXPECT_NE(std::memcmp(from_wide.data(), all.data(), all.size() * 4), 0) << "the rounding must show";
    for (int64_t rows : {1, 33, 70}) EXPECT_TRUE(rows_match(narrow, from_wide, rows)) << "bf16 K/V, " << rows << " rows";
  }
  // And the values are softmax attention: one row against double precision.
  const int64_t r = 300, h = 3, g = h / 2;
  std::vector<double> p(r + 1);
  double mx = -1e300, sum = 0;
  for (int64_t t = 0; t <= r; ++t) {
    double s = 0;
    for (int64_t i = 0; i < d; ++i) s += double(q[(r * nh + h) * d + i]) * key[(t * nkv + g) * d + i];
    p[t] = s * 0.17f;
    mx = std::max(mx, p[t]);
  }
  for (auto& x : p) sum += x = std::exp(x - mx);
  AttentionInput in{n, 0, nh, nkv, d, q.data(), key.data(), v.data(), 0.17f};
  std::vector<float> all(n * nh * d);
  k1->attention(in, all.data());
  for (int64_t i = 0; i < d; ++i) {
    double want = 0;
    for (int64_t t = 0; t <= r; ++t) want += p[t] / sum * v[(t * nkv + g) * d + i];
    EXPECT_NEAR(all[(r * nh + h) * d + i], want, 1e-5);
  }
}

// A step's sequences in one call (decode rows of several sequences and a
// prefill, causal, sparse, f32 and bf16 keys): each gets the bits it gets alone.
TEST(Attention, SeveralSequencesInOneCallEachGetTheirOwnBits) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool);
  std::mt19937 rng(10);
  const int64_t nh = 4, nkv = 2, d = 40, mblock = 8;
  struct Seq {
    int64_t rows, first_pos;
    bool sparse, bf16;
  };
  const std::vector<Seq> seqs = {{1, 0, false, false}, {1, 70, false, false}, {37, 90, false, false},
                                 {1, 200, true, false}, {1, 64, false, true},  {20, 13, true, true}};
  std::vector<std::vector<float>> q, key, v;
  std::vector<std::vector<uint16_t>> key16, v16;
  std::vector<std::vector<uint8_t>> masks;
  std::vector<AttentionInput> ins;
  for (const Seq& s : seqs) {
    const int64_t n = s.first_pos + s.rows, stride = (n + mblock - 1) / mblock;
    q.push_back(randn(rng, s.rows * nh * d));
    key.push_back(randn(rng, n * nkv * d));
    v.push_back(randn(rng, n * nkv * d));
    key16.emplace_back(key.back().size());
    v16.emplace_back(v.back().size());
    for (size_t i = 0; i < key.back().size(); ++i) key16.back()[i] = f32_to_bf16(key.back()[i]);
    for (size_t i = 0; i < v.back().size(); ++i) v16.back()[i] = f32_to_bf16(v.back()[i]);
    masks.emplace_back(s.rows * stride);
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t b = 0; b < stride; ++b) masks.back()[r * stride + b] = b == (s.first_pos + r) / mblock || rng() % 3 == 0;
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    AttentionInput in{seqs[i].rows, seqs[i].first_pos, nh, nkv, d, q[i].data(), key[i].data(), v[i].data(), 0.17f};
    if (seqs[i].bf16) {
      in.k = key16[i].data();
      in.v = v16[i].data();
      in.kv_dtype = DType::kBF16;
    }
    if (seqs[i].sparse) {
      in.block_mask = masks[i].data();
      in.mask_stride = (seqs[i].first_pos + seqs[i].rows + mblock - 1) / mblock;
      in.mask_block = mblock;
    }
    ins.push_back(in);
  }
  std::vector<std::vector<float>> together, alone;
  std::vector<float*> outs;
  for (const Seq& s : seqs) {
    together.emplace_back(s.rows * nh * d);
    alone.emplace_back(s.rows * nh * d);
    outs.push_back(together.back().data());
  }
  k->attention(ins, outs.data());
  for (size_t i = 0; i < seqs.size(); ++i) {
    k->attention(ins[i], alone[i].data());
    EXPECT_EQ(std::memcmp(together[i].data(), alone[i].data(), alone[i].size() * 4), 0) << "sequence " << i;
  }
}

// The logits' statistics of many rows on the pool: each row's logit_stats.
TEST(LogitStats, EachRowGetsTheStatsOfItsOwn) {
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    auto k = make_cpu_kernels(&pool);
    std::mt19937 rng(12);
    const int64_t rows = 9, vocab = 5003;
    std::vector<float> x = randn(rng, rows * vocab);
    for (int64_t i = 0; i < vocab; ++i) x[2 * vocab + i] *= 60.0f;  // terms that underflow
    x[4 * vocab + 17] = x[4 * vocab + 4000] = 50.0f;                 // a tie
    std::fill_n(x.begin() + 6 * vocab, vocab, -INFINITY);  // all masked but one
    x[6 * vocab + 3] = 1.0f;
    std::vector<LogitStats> got(rows);
    k->logit_stats(x.data(), rows, vocab, got.data());
    for (int64_t r = 0; r < rows; ++r) {
      const LogitStats want = logit_stats(std::span<const float>(x.data() + r * vocab, vocab));
      EXPECT_EQ(got[r].argmax, want.argmax) << "row " << r;
      EXPECT_EQ(std::memcmp(&got[r].log_norm, &want.log_norm, sizeof(double)), 0) << "row " << r;
    }
    EXPECT_EQ(got[4].argmax, 17);
    EXPECT_EQ(got[6].argmax, 3);
    EXPECT_EQ(got[6].log_norm, 1.0);
  }
}

// The log-normaliser's one order, written out: 16 lanes of vexp over each
// block of 1024 logits (whole vectors only), the blocks' float sums added in
// double in block order, then the tail one logit at a time.
double normaliser_in_block_order(std::span<const float> x, float mx) {
  cpu::FlushSubnormals mode;
  const size_t vector_end = x.size() - x.size() % 16;
  double sum = 0.0;
  for (size_t b = 0; b < vector_end; b += 1024) {
    cpu::V16 acc = cpu::V16::zero();
    for (size_t i = b; i < std::min(vector_end, b + 1024); i += 16)
      acc = acc + cpu::vexp(cpu::V16::load(x.data() + i) - cpu::V16::set1(mx));
    sum += static_cast<double>(cpu::hsum(acc));
  }
  for (size_t i = vector_end; i < x.size(); ++i) sum += static_cast<double>(exp_f(x[i] - mx));
  return static_cast<double>(mx) + log_d(sum);
}

// One row (fewer rows than threads) runs its passes in blocks on the pool:
// the first of the largest logits and the normaliser in its one order,
// whatever the threads, and whatever ranges the blocks come in.
TEST(LogitStats, OneRowOnThePoolKeepsTheBlockOrder) {
  std::mt19937 rng(31);
  const int64_t vocab = 248077;  // a real vocabulary, its tail not a whole vector
  std::vector<float> x = randn(rng, 2 * vocab);
  for (float& v : x) v *= 4.0f;
  x[200000] = x[vocab - 3] = x[vocab + 7] = x[vocab + 190000] = 30.0f;  // ties in other blocks
  for (int64_t r = 0; r < 2; ++r) {
    const std::span<const float> row(x.data() + r * vocab, vocab);
    const LogitStats want{r == 0 ? 200000 : 7, normaliser_in_block_order(row, 30.0f)};
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      auto k = make_cpu_kernels(&pool);
      for (int64_t rows : {int64_t{1}, int64_t{2}}) {
        if (rows == 2 && r == 1) continue;
        std::vector<LogitStats> got(rows);
        k->logit_stats(row.data(), rows, vocab, got.data());
        EXPECT_EQ(got[0].argmax, want.argmax) << threads << " threads, row " << r;
        EXPECT_EQ(std::memcmp(&got[0].log_norm, &want.log_norm, sizeof(double)), 0) << threads << " threads, row " << r;
      }
    }
    // Ranges of random lengths, run last first.
    const cpu::BlockRanges backwards = [&](int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
      std::vector<int64_t> cuts{0, n};
      for (int i = 0; i < 5; ++i) cuts.push_back(std::uniform_int_distribution<int64_t>(0, n)(rng));
      std::sort(cuts.begin(), cuts.end());
      for (size_t i = cuts.size() - 1; i > 0; --i) fn(cuts[i - 1], cuts[i]);
    };
    const LogitStats split = cpu::logit_stats(row, backwards);
    EXPECT_EQ(split.argmax, want.argmax) << "row " << r;
    EXPECT_EQ(std::memcmp(&split.log_norm, &want.log_norm, sizeof(double)), 0) << "row " << r;
  }
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

// The memory kernels (runtime/kernels.h "Memory"), each against its plain
// definition, bit for bit, on calls large enough to run on the pool.
TEST(MemoryKernels, GatherAndScatterRowsCopyTheNamedRows) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool);
  std::mt19937 rng(21);
  constexpr int64_t kRows = 50, kDim = 3001;
  const std::vector<float> x = randn(rng, kRows * kDim);
  const std::vector<int64_t> picks = {3, 0, 49, 3, 7, 12, 12, 48, 1, 25, 30, 31, 2, 44, 45, 46, 47, 5, 6, 8, 9, 10};
  const int64_t n = static_cast<int64_t>(picks.size());
  std::vector<float> got(n * kDim), want(n * kDim);
  k->gather_rows(x.data(), picks.data(), n, kDim, got.data());
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < kDim; ++i) want[j * kDim + i] = x[picks[j] * kDim + i];
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);

  std::vector<int64_t> slots(kRows);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(30);
  const std::vector<float> y = randn(rng, 30 * kDim);
  std::vector<float> out = randn(rng, kRows * kDim), expect = out;
  k->scatter_rows(y.data(), slots.data(), 30, kDim, out.data());
  for (int64_t j = 0; j < 30; ++j)
    for (int64_t i = 0; i < kDim; ++i) expect[slots[j] * kDim + i] = y[j * kDim + i];
  EXPECT_EQ(std::memcmp(out.data(), expect.data(), out.size() * 4), 0);
}

// The MoE combine: from +0, each rank's rounded product added in rank order,
// which is also what filling zeros then add_scaled_rows per rank gave.
TEST(MemoryKernels, WeightedSumRowsAddsTheRanksInOrder) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool);
  std::mt19937 rng(22);
  for (int64_t rows : {1, 3, 70}) {
    constexpr int64_t kTop = 4, kDim = 1000;
    const std::vector<float> y = randn(rng, rows * kTop * kDim), w = randn(rng, rows * kTop);
    std::vector<float> got(rows * kDim), want(rows * kDim, 0.0f), by_rank(rows * kDim, 0.0f);
    k->weighted_sum_rows(y.data(), nullptr, w.data(), rows, kTop, kDim, got.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < kTop; ++i)
        for (int64_t d = 0; d < kDim; ++d) {
          const float p = w[r * kTop + i] * y[(r * kTop + i) * kDim + d];
          want[r * kDim + d] = want[r * kDim + d] + p;
        }
    for (int64_t i = 0; i < kTop; ++i)
      k->add_scaled_rows(by_rank.data(), y.data() + i * kDim, kTop * kDim, w.data() + i, kTop, rows, kDim,
                         Activation::kIdentity);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << rows << " rows";
    EXPECT_EQ(std::memcmp(got.data(), by_rank.data(), got.size() * 4), 0) << rows << " rows";
    // The outputs in another order (a step's, by expert), read where they lie.
    std::vector<int64_t> at(rows * kTop);
    std::iota(at.begin(), at.end(), 0);
    std::shuffle(at.begin(), at.end(), rng);
    std::vector<float> moved(y.size());
    for (int64_t s = 0; s < rows * kTop; ++s) std::copy_n(y.data() + s * kDim, kDim, moved.data() + at[s] * kDim);
    std::vector<float> got_at(rows * kDim);
    k->weighted_sum_rows(moved.data(), at.data(), w.data(), rows, kTop, kDim, got_at.data());
    EXPECT_EQ(std::memcmp(got_at.data(), want.data(), got_at.size() * 4), 0) << rows << " rows, moved";
  }
}

// Un-grouping Qwen3-Next's per-key-head projection, the plain loop it
// replaced: per key head j, [q_j | k_j | v of value heads j*r.. | z of them].
TEST(MemoryKernels, SplitRowsUngroupsPerGroupParts) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool);
  std::mt19937 rng(23);
  constexpr int64_t nk = 4, dk = 16, r = 2, dv = 24, nv = nk * r, key_dim = nk * dk, value_dim = nv * dv,
                    conv_dim = 2 * key_dim + value_dim, group = 2 * dk + 2 * r * dv;
  for (int64_t T : {1, 5, 300}) {
    const std::vector<float> u = randn(rng, T * nk * group);
    std::vector<float> mixed(T * conv_dim), z(T * value_dim), want_mixed(T * conv_dim), want_z(T * value_dim);
    const RowPart parts[] = {{dk, mixed.data(), conv_dim},
                             {dk, mixed.data() + key_dim, conv_dim},
                             {r * dv, mixed.data() + 2 * key_dim, conv_dim},
                             {r * dv, z.data(), value_dim}};
    k->split_rows(u.data(), T, nk, parts);
    for (int64_t t = 0; t < T; ++t) {
      float* mt = want_mixed.data() + t * conv_dim;
      for (int64_t j = 0; j < nk; ++j) {
        const float* g = u.data() + (t * nk + j) * group;
        std::copy(g, g + dk, mt + j * dk);
        std::copy(g + dk, g + 2 * dk, mt + key_dim + j * dk);
        for (int64_t i = 0; i < r; ++i) {
          const int64_t h = j * r + i;
          std::copy(g + 2 * dk + i * dv, g + 2 * dk + (i + 1) * dv, mt + 2 * key_dim + h * dv);
          std::copy(g + 2 * dk + (r + i) * dv, g + 2 * dk + (r + i + 1) * dv, want_z.data() + (t * nv + h) * dv);
        }
      }
    }
    EXPECT_EQ(mixed, want_mixed) << T << " rows";
    EXPECT_EQ(z, want_z) << T << " rows";
  }
}

TEST(MemoryKernels, EmbedRowsWidensTheTokensRows) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool);
  std::mt19937 rng(24);
  constexpr int64_t kVocab = 40, kDim = 2000;
  const std::vector<float> table = randn(rng, kVocab * kDim);
  std::vector<uint16_t> table_bf16(table.size());
  for (size_t i = 0; i < table.size(); ++i) table_bf16[i] = f32_to_bf16(table[i]);
  const std::vector<int32_t> tokens = {5, 0, 39, 5, 17, 2, 2, 30, 31, 8, 9, 10, 11, 12, 13, 14, 15, 16, 1, 3, 4, 6,
                                       7, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 32, 33, 34};
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    WeightRef w{dtype, kVocab, kDim, dtype == DType::kF32 ? static_cast<const void*>(table.data()) : table_bf16.data(),
                nullptr};
    std::vector<float> got(n * kDim), want(n * kDim);
    k->embed_rows(w, tokens, got.data());
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < kDim; ++i) {
        const size_t at = static_cast<size_t>(tokens[j] * kDim + i);
        want[j * kDim + i] = dtype == DType::kF32 ? table[at] : bf16_to_f32(table_bf16[at]);
      }
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << dtype_name(dtype);
  }
}

// The sparse block mask by its definition (docs/qsa.md): all closed blocks
// while there are at most top_k, else the top_k by index score, and the
// row's own open block; over rows that cross both cases and block ends.
TEST(MemoryKernels, SparseBlockMaskSelectsTheTopBlocksAndTheOpenOne) {
  ThreadPool pool(2);
  auto k = make_cpu_kernels(&pool);
  std::mt19937 rng(25);
  constexpr int64_t kHeads = 3, kDim = 32, kBlock = 4, kTop = 3;
  for (int64_t first_pos : {0, 5, 16}) {
    const int64_t rows = 30, closed_max = (first_pos + rows) / kBlock;
    const std::vector<float> q = randn(rng, rows * kHeads * kDim), w = randn(rng, rows * kHeads),
                             pooled = randn(rng, closed_max * kDim);
    BlockMaskInput in;
    in.rows = rows, in.first_pos = first_pos, in.heads = kHeads, in.dim = kDim;
    in.q = q.data(), in.w = w.data(), in.pooled = pooled.data();
    in.block = kBlock, in.top_k = kTop, in.s_scale = 0.25f;
    const int64_t stride = in.stride();
    std::vector<uint8_t> got(rows * stride, 7), want(rows * stride, 0);
    k->sparse_block_mask(in, got.data());
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t t = first_pos + r, closed = (t + 1) / kBlock;
      uint8_t* row = want.data() + r * stride;
      if (closed <= kTop) {
        for (int64_t b = 0; b < closed; ++b) row[b] = 1;
      } else {
        std::vector<std::pair<float, int64_t>> scored;
        for (int64_t b = 0; b < closed; ++b) {
          float score = 0.0f;
          for (int64_t h = 0; h < kHeads; ++h) {
            float qk = 0.0f;
            for (int64_t i = 0; i < kDim; ++i)
              qk = std::fma(q[(r * kHeads + h) * kDim + i], pooled[b * kDim + i], qk);
            score = std::fma(w[r * kHeads + h], std::max(qk, 0.0f), score);
          }
          scored.push_back({-score * in.s_scale, b});
        }
        std::sort(scored.begin(), scored.end());
        for (int64_t i = 0; i < kTop; ++i) row[scored[i].second] = 1;
      }
      if (closed * kBlock <= t) row[t / kBlock] = 1;
    }
    EXPECT_EQ(got, want) << "first_pos " << first_pos;
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

// Every item once, in ranges within the grains, whatever the threads, the
// grains and the callers beside it.
TEST(ThreadPool, RangesCoverEveryItemOnce) {
  ThreadPool one(1), two(2);
  for (ThreadPool* pool : {&one, &two})
    for (int64_t n : {1, 2, 7, 64, 1000})
      for (const auto& grains : {std::pair<int64_t, int64_t>{1, 1}, {1, 8}, {3, 3}, {5, 1000}}) {
        const int64_t lo = grains.first, hi = grains.second;  // Clang 14's lambdas capture no structured binding
        std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
        std::atomic<int> bad{0};
        pool->parallel_ranges(n, lo, hi, [&](int64_t b, int64_t e) {
          if (b < 0 || e > n || e <= b || e - b > hi || (e - b < lo && e != n)) ++bad;
          for (int64_t i = std::max<int64_t>(b, 0); i < std::min(e, n); ++i) ++seen[static_cast<size_t>(i)];
        });
        EXPECT_EQ(bad.load(), 0) << "n " << n << " grains " << lo << "-" << hi;
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)].load(), 1) << "n " << n << " item " << i;
      }
  std::vector<std::thread> callers;
  std::atomic<int64_t> total{0};
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep)
        two.parallel_ranges(100, 1, 16, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) total += i;
        });
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 3 * 50 * (99 * 100 / 2));
}

// Each thread's ranges are one run from the front of a share of its own,
// then (once that is done) runs taken from the back of what is left:
// every range starts where the same thread's previous one ended, until it
// turns to the back, after which every range ends where its previous began.
TEST(ThreadPool, EachThreadsRangesAreOneRunThenRunsFromTheBack) {
  ThreadPool one(1), two(2);
  int both = 0;  // calls of the two-thread pool whose ranges both threads ran
  for (ThreadPool* pool : {&one, &two})
    for (int rep = 0; rep < 20; ++rep) {
      std::mutex mu;
      std::map<std::thread::id, std::vector<std::pair<int64_t, int64_t>>> ranges;
      pool->parallel_ranges(1000, 1, 64, [&](int64_t b, int64_t e) {
        {
          std::lock_guard<std::mutex> lock(mu);
          ranges[std::this_thread::get_id()].emplace_back(b, e);
        }
        // Long enough a range that the other thread joins in.
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      });
      both += pool->size() == 2 && ranges.size() == 2;
      int64_t items = 0;
      for (const auto& [id, runs] : ranges) {
        bool back = false;
        for (size_t i = 1; i < runs.size(); ++i) {
          if (!back && runs[i].first == runs[i - 1].second) continue;  // its run from the front goes on
          if (!back) {
            back = true;  // its first range from the back of another share
            continue;
          }
          EXPECT_EQ(runs[i].second, runs[i - 1].first) << "threads " << pool->size() << " range " << i;
        }
        for (const auto& [b, e] : runs) items += e - b;
      }
      EXPECT_EQ(items, 1000);
      if (pool->size() == 1) {
        ASSERT_EQ(ranges.size(), 1u);
        EXPECT_EQ(ranges.begin()->second.front().first, 0);
        EXPECT_EQ(ranges.begin()->second.back().second, 1000);
      }
    }
  EXPECT_GT(both, 0);
}

}  // namespace
}  // namespace sb
