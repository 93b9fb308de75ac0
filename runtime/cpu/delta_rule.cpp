// The gated delta rule (docs/model-spec.md 2.5 (6) and (8)), per value head.
//
// Chunked form for prefill: a call runs the chunks of the absolute 64-token
// grid that its rows fall in, so a prefill split anywhere on the grid runs
// exactly the same chunks; a chunk may come in parts
// (DeltaRuleInput::parts), each part computing its own rows from the kept
// rows of the parts before it.
// The chunk is a handful of small matrix products (small_gemm.h), each with
// a fixed order per element; the forward substitution and the decays run in
// ascending index order. Recurrent form for decode: one token of each of
// several sequences, two passes over a state per token, each element's
// operations in a fixed order.
#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/float_mode.h"
#include "runtime/cpu/simd.h"
#include "runtime/cpu/small_gemm.h"
#include "runtime/math.h"

namespace sb::cpu {
namespace {

// Per-thread working memory of one head's chunk.
struct ChunkScratch {
  std::vector<float> G, beta, eG, m, Kt, E, KK, QK, W, Wb, Wk, P, Vp, Kd, Qe, Ktd;
  void resize(int64_t L, int64_t dk, int64_t dv) {
    for (auto* v : {&beta, &eG}) v->resize(L);
    // G at the chunk's whole width (+0 past L), for E's rows in whole vectors.
    G.assign(kDeltaChunkRows, 0.0f);
    for (auto* v : {&Wb, &Wk, &P}) v->resize(L * L);
    for (auto* v : {&KK, &QK, &W, &E}) v->resize(L * kDeltaChunkRows);
    m.resize(kDeltaChunkRows);
    Kt.resize(dk * kDeltaChunkRows);
    for (auto* v : {&Kd, &Qe, &Ktd}) v->resize(L * dk);
    Vp.resize(L * dv);
  }
};

static_assert(kDeltaChunkRows == 4 * 16, "a row of W is four vectors");

// acc[v] += m_l W_l[16 v, 16 v + 16) for v < NV, l in [l0, l1) ascending.
template <int NV>
void substitute(V16* acc, const float* W, int64_t ldw, const float* m, int64_t l0, int64_t l1) {
  for (int64_t l = l0; l < l1; ++l) {
    const V16 ml = V16::set1(m[l]);
    for (int v = 0; v < NV; ++v) acc[v] = fma(ml, V16::load(W + l * ldw + 16 * v), acc[v]);
  }
}

// Rows [b, L) of W = (I + M)^-1 by forward substitution, M_il = beta_i E_il
// k_i.k_l (l < i): row i is -sum over l < i of M_il W_l, accumulated in
// ascending l, in registers. Row l of W is +0 past column l, so each step
// runs over the whole vectors that hold columns [0, l]: m * +0 added to a +0
// that no earlier l has touched leaves +0, the bits of stopping at column l.
void invert(float* W, int64_t ldw, const float* beta, const float* E, int64_t lde, const float* KK, int64_t ldt,
            float* m, int64_t b, int64_t L) {
  for (int64_t i = b; i < L; ++i) {
    float* wi = W + i * ldw;
    for (int64_t l = 0; l < i; ++l) m[l] = beta[i] * E[i * lde + l] * KK[i * ldt + l];
    V16 acc[4] = {V16::zero(), V16::zero(), V16::zero(), V16::zero()};
    substitute<1>(acc, W, ldw, m, 0, std::min<int64_t>(i, 16));
    substitute<2>(acc, W, ldw, m, 16, std::min<int64_t>(i, 32));
    substitute<3>(acc, W, ldw, m, 32, std::min<int64_t>(i, 48));
    substitute<4>(acc, W, ldw, m, 48, i);
    for (int v = 0; v < 4; ++v) acc[v].store(wi + 16 * v);
    for (int64_t j = 0; j < i; ++j) wi[j] = -wi[j];
    wi[i] = 1.0f;
  }
}

// One head's chunk: rows [0, in.tokens) of `in` (rows [in.first, ...) new).
void chunk_head(const DeltaRuleInput& in, int64_t h, float* state, float* out) {
  const int64_t L = in.tokens, b = in.first, dk = in.d_k, dv = in.d_v, r = in.n_v / in.n_k;
  const int64_t ldk = in.n_k * dk, ldv = in.n_v * dv;
  // Rows of W (below) are kDeltaChunkRows wide whatever the chunk's length;
  // W and V' are in the caller's parts when the chunk comes in parts (earlier
  // rows are read from there).
  const int64_t ldw = kDeltaChunkRows;
  // k^T is as wide too, its columns past L zero, so that the products with it
  // run on whole vectors for any L; their columns past L are never read.
  const int64_t ldt = kDeltaChunkRows;
  thread_local ChunkScratch sc;
  sc.resize(L, dk, dv);
  float* S = state + h * dk * dv;
  const float* Q = in.q + (h / r) * dk;  // token i at Q + i * ldk
  const float* K = in.k + (h / r) * dk;
  const float* V = in.v + h * dv;  // token i at V + i * ldv
  float* W = in.parts ? in.parts + h * kDeltaChunkRows * (kDeltaChunkRows + dv) : sc.W.data();
  float* Vp = in.parts ? W + kDeltaChunkRows * kDeltaChunkRows : sc.Vp.data();
  float *G = sc.G.data(), *beta = sc.beta.data(), *eG = sc.eG.data();
  float run = 0.0f;
  for (int64_t i = 0; i < L; ++i) {
    run += in.g[i * in.n_v + h];
    G[i] = run;
    eG[i] = exp_f(run);
    beta[i] = in.beta[i * in.n_v + h];
  }
  // k^T [dk, ldt], in blocks of 16 x 16: the rows of K lie ldk floats
  // apart (a multiple of 4 KiB at the usual shapes), so reading a column of
  // K straight down would keep evicting its own lines from L1.
  float* Kt = sc.Kt.data();
  for (int64_t i0 = 0; i0 < L; i0 += 16)
    for (int64_t a0 = 0; a0 < dk; a0 += 16) {
      const int64_t ni = std::min<int64_t>(16, L - i0), na = std::min<int64_t>(16, dk - a0);
      float block[16][16];
      for (int64_t i = 0; i < ni; ++i) std::copy(K + (i0 + i) * ldk + a0, K + (i0 + i) * ldk + a0 + na, block[i]);
      for (int64_t a = 0; a < na; ++a)
        for (int64_t i = 0; i < ni; ++i) Kt[(a0 + a) * ldt + i0 + i] = block[i][a];
    }
  for (int64_t a = 0; a < dk; ++a) std::fill(Kt + a * ldt + L, Kt + (a + 1) * ldt, 0.0f);
  // From here on, only rows [b, L) (each element's chain is its own).
  const int64_t n = L - b;
  // Row i of k.k and q.k is read at columns j <= i only: bands of 16 rows
  // stop at the first 16-column block past their last row.
  for (int64_t r0 = b; r0 < L; r0 += 16) {
    const int64_t rows = std::min<int64_t>(16, L - r0), cols = (r0 + rows + 15) / 16 * 16;
    small_gemm(rows, cols, dk, K + r0 * ldk, ldk, Kt, ldt, sc.KK.data() + r0 * ldt, ldt, false);
    small_gemm(rows, cols, dk, Q + r0 * ldk, ldk, Kt, ldt, sc.QK.data() + r0 * ldt, ldt, false);
  }
  // E_ij = exp(G_i - G_j), j <= i: the decay from row j to row i, which M,
  // P and the state update below all use. vexp over whole vectors (its lanes
  // are exp_f's bits), past the diagonal too (never read).
  float* E = sc.E.data();
  const int64_t lde = kDeltaChunkRows;
  for (int64_t i = b; i < L; ++i) {
    const V16 gi = V16::set1(G[i]);
    for (int64_t j = 0; j <= i; j += 16) vexp(gi - V16::load(G + j)).store(E + i * lde + j);
  }
  invert(W, ldw, beta, E, lde, sc.KK.data(), ldt, sc.m.data(), b, L);
  // V' = W diag(beta) V - W diag(beta e^G) K S.
  float *Wb = sc.Wb.data(), *Wk = sc.Wk.data(), *Kd = sc.Kd.data();
  for (int64_t i = b; i < L; ++i)
    for (int64_t j = 0; j < L; ++j) {
      Wb[i * L + j] = W[i * ldw + j] * beta[j];
      Wk[i * L + j] = -(Wb[i * L + j] * eG[j]);
    }
  small_gemm(n, dv, L, Wb + b * L, L, V, ldv, Vp + b * dv, dv, false, /*lower=*/true, b);
  small_gemm(n, dk, L, Wk + b * L, L, K, ldk, Kd + b * dk, dk, false, /*lower=*/true, b);
  small_gemm(n, dv, dk, Kd + b * dk, dk, S, dv, Vp + b * dv, dv, true);
  // O = diag(e^G) Q S + P V', P_ij = (q_i.k_j) e^{G_i - G_j} for j <= i.
  float *Qe = sc.Qe.data(), *P = sc.P.data();
  for (int64_t i = b; i < L; ++i)
    for (int64_t a = 0; a < dk; ++a) Qe[i * dk + a] = Q[i * ldk + a] * eG[i];
  for (int64_t i = b; i < L; ++i)
    for (int64_t j = 0; j < L; ++j) P[i * L + j] = j <= i ? sc.QK[i * ldt + j] * E[i * lde + j] : 0.0f;
  float* O = out + h * dv;  // row b
  small_gemm(n, dv, dk, Qe + b * dk, dk, S, dv, O, ldv, false);
  small_gemm(n, dv, L, P + b * L, L, Vp, dv, O, ldv, true, /*lower=*/true, b);
  // S <- e^{G_last} S + sum_j e^{G_last - G_j} k_j V'_j^T, over every row.
  const float elast = eG[L - 1];
  for (int64_t a = 0; a < dk * dv; ++a) S[a] *= elast;
  float* Ktd = sc.Ktd.data();
  const float* decay = E + (L - 1) * lde;
  for (int64_t a = 0; a < dk; ++a)
    for (int64_t j = 0; j < L; ++j) Ktd[a * L + j] = Kt[a * ldt + j] * decay[j];
  small_gemm(dk, dv, L, Ktd, L, Vp, dv, S, dv, true);
}

}  // namespace

void CpuKernels::delta_rule_chunk(const DeltaRuleInput& in, float* state, float* out) {
  FlushSubnormals mode;
  const int64_t ldk = in.n_k * in.d_k, ldv = in.n_v * in.d_v;
  // A head's chunks in turn on one thread: its state stays in that
  // thread's cache from one chunk to the next, and a prefill of 512 rows is
  // one region per layer, not 8 (each a hand-off and a wait for the last
  // head at its end).
  pool_->parallel_for(in.n_v, [&](int64_t h) {
    for (int64_t c0 = 0; c0 < in.tokens;) {
      const int64_t c1 = std::min(in.tokens, c0 + kDeltaChunkRows - (in.phase + c0) % kDeltaChunkRows);
      DeltaRuleInput chunk = in;
      chunk.tokens = c1 - c0;
      chunk.q = in.q + c0 * ldk;
      chunk.k = in.k + c0 * ldk;
      chunk.v = in.v + c0 * ldv;
      chunk.g = in.g + c0 * in.n_v;
      chunk.beta = in.beta + c0 * in.n_v;
      chunk_head(chunk, h, state, out + c0 * ldv);
      c0 = c1;
    }
  });
}

namespace {

// How far ahead the recurrent form's first pass fetches state rows (16 KiB
// at d_v = 128): the state comes from memory, since a decode step's states
// far exceed the caches, and the hardware prefetcher stops at each 4 KiB
// page. Past a head's last row the fetches run on into the next head's
// block (`next`, when the caller knows it comes next), so that each head
// does not start cold: at 8 sequences the decode step's delta rule is a
// stream of 2304 head blocks of 64 KiB.
constexpr int64_t kPrefetchRows = 32;

// One token's update of columns [c0, c0 + 16 NV) of one head's state, with
// those columns' k^T S and q^T S held in registers (columns never mix, so a
// block of them is a whole computation of its own). Each element's
// operations and their order are those of the row-by-row form: the decay, then
// k^T S summed over rows in ascending order, then the rank-one update and
// q^T S over rows in ascending order.
// The first pass stores nothing: the second computes the decay again from
// S_in (the same product, the same bits), so each line of the state is
// written once a token, not twice (0.8b Q4_K_M file, 8-row step: 53.6-54.1
// -> 52.7-52.9 ms CPU, alternated, load average 7). Column blocks of 64
// (NV = 4), so that a pass's 32 KiB stays nearer L1, ran 1.05x slower.
// S_in: the state read (S itself in place); S: the state written. next: the
// block whose first rows to fetch once this one's are all fetched (rows of
// 16 NV columns, dv apart), or null.
template <int NV>
void recurrent_columns(const float* S_in, float* S, int64_t dk, int64_t dv, int64_t c0, const float* q, const float* k,
                       const float* v, float alpha, float beta, float* o, const float* next, float* u_out) {
  const V16 va = V16::set1(alpha);
  V16 acc[NV];
  for (int j = 0; j < NV; ++j) acc[j] = V16::zero();
  for (int64_t a = 0; a < dk; ++a) {
    const float* in = S_in + a * dv + c0;
    const float* ahead = a + kPrefetchRows < dk ? in + kPrefetchRows * dv
                         : next && a + kPrefetchRows < 2 * dk ? next + (a + kPrefetchRows - dk) * dv
                                                                : nullptr;
    if (ahead)
      for (int j = 0; j < NV; ++j) __builtin_prefetch(ahead + 16 * j, 1);
    const V16 ka = V16::set1(k[a]);
    for (int j = 0; j < NV; ++j) acc[j] = fma(ka, V16::load(in + 16 * j) * va, acc[j]);
  }
  V16 u[NV];
  const V16 vb = V16::set1(beta);
  for (int j = 0; j < NV; ++j) {
    u[j] = vb * (V16::load(v + c0 + 16 * j) - acc[j]);
    acc[j] = V16::zero();
  }
  if (u_out)
    for (int j = 0; j < NV; ++j) u[j].store(u_out + c0 + 16 * j);
  for (int64_t a = 0; a < dk; ++a) {
    const float* in = S_in + a * dv + c0;
    float* row = S + a * dv + c0;
    const V16 ka = V16::set1(k[a]), qa = V16::set1(q[a]);
    for (int j = 0; j < NV; ++j) {
      const V16 s = fma(ka, u[j], V16::load(in + 16 * j) * va);
      s.store(row + 16 * j);
      acc[j] = fma(qa, s, acc[j]);
    }
  }
  for (int j = 0; j < NV; ++j) acc[j].store(o + c0 + 16 * j);
}

// One (row, head) of the recurrent form: S_in's head state advanced by the
// row's token into S (S_in == S: in place), its output into o. next: the
// head block read after this one, or null; fetched ahead when d_v is one
// block of columns (128 or 16, the models' d_v is 128).
void recurrent_head(const float* S_in, float* S, int64_t dk, int64_t dv, const float* q, const float* k,
                    const float* v, float alpha, float beta, float* o, const float* next, float* u_out) {
  int64_t c0 = 0;
  for (; c0 + 128 <= dv; c0 += 128)
    recurrent_columns<8>(S_in, S, dk, dv, c0, q, k, v, alpha, beta, o, dv == 128 ? next : nullptr, u_out);
  for (; c0 + 16 <= dv; c0 += 16)
    recurrent_columns<1>(S_in, S, dk, dv, c0, q, k, v, alpha, beta, o, dv == 16 ? next : nullptr, u_out);
  if (c0 == dv) return;
  // Columns past the last whole vector, element by element.
  thread_local std::vector<float> mem, u;
  mem.assign(dv, 0.0f);
  u.resize(dv);
  for (int64_t a = 0; a < dk; ++a) {
    float* row = S + a * dv;
    const float* row_in = S_in + a * dv;
    for (int64_t c = c0; c < dv; ++c) {
      row[c] = row_in[c] * alpha;
      mem[c] = std::fma(k[a], row[c], mem[c]);
    }
  }
  for (int64_t c = c0; c < dv; ++c) u[c] = beta * (v[c] - mem[c]);
  if (u_out) std::copy(u.begin() + c0, u.end(), u_out + c0);
  std::fill(o + c0, o + dv, 0.0f);
  for (int64_t a = 0; a < dk; ++a) {
    float* row = S + a * dv;
    for (int64_t c = c0; c < dv; ++c) {
      row[c] = std::fma(k[a], u[c], row[c]);
      o[c] = std::fma(q[a], row[c], o[c]);
    }
  }
}

// Row t, head h of `in`: its state's head block advanced from S_in into S;
// next: as recurrent_head's.
void recurrent_item(const DeltaRuleInput& in, int64_t t, int64_t h, const float* S_in, float* S, float* out,
                    const float* next = nullptr) {
  const int64_t dk = in.d_k, dv = in.d_v, kh = h / (in.n_v / in.n_k);
  const float* q = in.q + (t * in.n_k + kh) * dk;
  const float* k = in.k + (t * in.n_k + kh) * dk;
  const float* v = in.v + (t * in.n_v + h) * dv;
  const float alpha = exp_f(in.g[t * in.n_v + h]), beta = in.beta[t * in.n_v + h];
  float* u_out = in.updates ? in.updates + (t * in.n_v + h) * dv : nullptr;
  recurrent_head(S_in + h * dk * dv, S + h * dk * dv, dk, dv, q, k, v, alpha, beta, out + (t * in.n_v + h) * dv, next,
                 u_out);
}

// Rows [0, in.tokens) of one sequence on columns [c0, c0 + 16 NV) of head
// h, each element's operations and their order those of recurrent_columns
// row after row, but row t's rank-one update and q^T S share one pass over
// the head with row t + 1's decay and k^T S: in.tokens + 1 passes, not two
// a row. Row t's state goes to states[t] (with row t + 1's decay applied
// when states[t + 1] is the same buffer: only the last row's is kept then).
template <int NV>
void chained_columns(const DeltaRuleInput& in, int64_t h, int64_t c0, const float* from, float* const* states,
                     float* out) {
  const int64_t dk = in.d_k, dv = in.d_v, n = in.tokens, kh = h / (in.n_v / in.n_k), block = dk * dv;
  auto key = [&](int64_t t) { return in.k + (t * in.n_k + kh) * dk; };
  auto alpha = [&](int64_t t) { return V16::set1(exp_f(in.g[t * in.n_v + h])); };
  // u of row t from its k^T S (acc, zeroed for the next use).
  auto update = [&](int64_t t, V16* acc, V16* u) {
    const V16 vb = V16::set1(in.beta[t * in.n_v + h]);
    const float* v = in.v + (t * in.n_v + h) * dv + c0;
    float* keep = in.updates ? in.updates + (t * in.n_v + h) * dv + c0 : nullptr;
    for (int j = 0; j < NV; ++j) {
      u[j] = vb * (V16::load(v + 16 * j) - acc[j]);
      acc[j] = V16::zero();
      if (keep) u[j].store(keep + 16 * j);
    }
  };
  V16 acc[NV], u[NV], o[NV];
  for (int j = 0; j < NV; ++j) acc[j] = o[j] = V16::zero();
  {  // row 0's decay and k^T S, from the state before the rows
    const V16 va = alpha(0);
    const float* k = key(0);
    const float* S_in = from + h * block + c0;
    float* S = states[0] + h * block + c0;
    for (int64_t a = 0; a < dk; ++a) {
      if (a + kPrefetchRows < dk)
        for (int j = 0; j < NV; ++j) __builtin_prefetch(S_in + (a + kPrefetchRows) * dv + 16 * j);
      const V16 ka = V16::set1(k[a]);
      for (int j = 0; j < NV; ++j) {
        const V16 s = V16::load(S_in + a * dv + 16 * j) * va;
        s.store(S + a * dv + 16 * j);
        acc[j] = fma(ka, s, acc[j]);
      }
    }
  }
  update(0, acc, u);
  for (int64_t t = 0; t < n; ++t) {
    const bool next = t + 1 < n;
    const float* q = in.q + (t * in.n_k + kh) * dk;
    const float* k = key(t);
    const float* k1 = next ? key(t + 1) : k;
    const V16 va1 = next ? alpha(t + 1) : V16::zero();
    float* S = states[t] + h * block + c0;
    float* S1 = next ? states[t + 1] + h * block + c0 : S;
    for (int64_t a = 0; a < dk; ++a) {
      const V16 ka = V16::set1(k[a]), qa = V16::set1(q[a]), ka1 = V16::set1(k1[a]);
      for (int j = 0; j < NV; ++j) {
        const V16 s = fma(ka, u[j], V16::load(S + a * dv + 16 * j));
        o[j] = fma(qa, s, o[j]);
        if (!next) {
          s.store(S + a * dv + 16 * j);
          continue;
        }
        if (S1 != S) s.store(S + a * dv + 16 * j);
        const V16 d = s * va1;
        d.store(S1 + a * dv + 16 * j);
        acc[j] = fma(ka1, d, acc[j]);
      }
    }
    float* o_row = out + (t * in.n_v + h) * dv + c0;
    for (int j = 0; j < NV; ++j) {
      o[j].store(o_row + 16 * j);
      o[j] = V16::zero();
    }
    if (next) update(t + 1, acc, u);
  }
}

// A head of delta_rule_rows whose width is whole vectors: chained_columns
// over its blocks of 128 columns, then of 16. At d_v = 128 a block is the
// head's whole 64 KiB, one run of memory: blocks of 64 columns took half
// of each 512-byte row, so that a pass's 32 KiB filled only half of L1's
// sets and each row of `from` was fetched in two streams (the rows from a
// kept state, 18 layers of the 0.8b preset: 4.3-4.4 -> 3.4-3.75 ms, 1 thread).
void chained_head(const DeltaRuleInput& in, int64_t h, const float* from, float* const* states, float* out) {
  int64_t c0 = 0;
  for (; c0 + 128 <= in.d_v; c0 += 128) chained_columns<8>(in, h, c0, from, states, out);
  for (; c0 + 16 <= in.d_v; c0 += 16) chained_columns<1>(in, h, c0, from, states, out);
}

// Columns [c0, c0 + 16 NV) of one head's state after rows [0, n): each
// element's decay and rank-one update per row, as recurrent_columns does
// them (the decayed value rounded, then one fma), held in registers from
// row to row. k: row t's key at k + t * ldk; u: its update at u + t * ldu.
template <int NV>
void replay_columns(const float* S_in, float* S, int64_t dk, int64_t dv, int64_t c0, int64_t n, const float* alpha,
                    const float* k, int64_t ldk, const float* u, int64_t ldu) {
  for (int64_t a = 0; a < dk; ++a) {
    const float* in = S_in + a * dv + c0;
    float* row = S + a * dv + c0;
    if (a + kPrefetchRows < dk)
      for (int j = 0; j < NV; ++j) __builtin_prefetch(in + kPrefetchRows * dv + 16 * j);
    V16 s[NV];
    for (int j = 0; j < NV; ++j) s[j] = V16::load(in + 16 * j);
    for (int64_t t = 0; t < n; ++t) {
      const V16 va = V16::set1(alpha[t]), ka = V16::set1(k[t * ldk + a]);
      for (int j = 0; j < NV; ++j) s[j] = fma(ka, V16::load(u + t * ldu + c0 + 16 * j), s[j] * va);
    }
    for (int j = 0; j < NV; ++j) s[j].store(row + 16 * j);
  }
}

}  // namespace

void CpuKernels::delta_rule_recurrent(const DeltaRuleInput& in, float* const* states, float* out) {
  FlushSubnormals mode;
  // Each (row, head) is a whole computation on its own state. A task is a
  // run of one row's heads, adjacent in memory, so each head's fetches run on
  // into the next; with several threads, enough tasks that they end together.
  const int64_t want = pool_->size() == 1 ? 1 : 8 * pool_->size(), runs = std::min(in.n_v, (want + in.tokens - 1) / in.tokens);
  pool_->parallel_for(in.tokens * runs, [&](int64_t task) {
    const int64_t t = task / runs, h0 = task % runs * in.n_v / runs, h1 = (task % runs + 1) * in.n_v / runs;
    const int64_t block = in.d_k * in.d_v;
    for (int64_t h = h0; h < h1; ++h)
      recurrent_item(in, t, h, states[t], states[t], out, h + 1 < h1 ? states[t] + (h + 1) * block : nullptr);
  });
}

void CpuKernels::delta_rule_replay(const DeltaRuleInput& in, const float* updates, const float* from, float* state) {
  FlushSubnormals mode;
  const int64_t dk = in.d_k, dv = in.d_v, n = in.tokens, r = in.n_v / in.n_k;
  const int64_t ldk = in.n_k * dk, ldu = in.n_v * dv;
  pool_->parallel_for(in.n_v, [&](int64_t h) {
    thread_local std::vector<float> alpha;
    alpha.resize(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) alpha[static_cast<size_t>(t)] = exp_f(in.g[t * in.n_v + h]);
    const float* S_in = from + h * dk * dv;
    float* S = state + h * dk * dv;
    const float* k = in.k + (h / r) * dk;
    const float* u = updates + h * dv;
    int64_t c0 = 0;
    for (; c0 + 128 <= dv; c0 += 128) replay_columns<8>(S_in, S, dk, dv, c0, n, alpha.data(), k, ldk, u, ldu);
    for (; c0 + 16 <= dv; c0 += 16) replay_columns<1>(S_in, S, dk, dv, c0, n, alpha.data(), k, ldk, u, ldu);
    // The columns recurrent_head updates one by one, likewise here.
    for (int64_t a = 0; a < dk; ++a)
      for (int64_t c = c0; c < dv; ++c) {
        float x = S_in[a * dv + c];
        for (int64_t t = 0; t < n; ++t) {
          const float decayed = x * alpha[static_cast<size_t>(t)];
          x = std::fma(k[t * ldk + a], u[t * ldu + c], decayed);
        }
        S[a * dv + c] = x;
      }
  });
}

void CpuKernels::delta_rule_rows(const DeltaRuleInput& in, const float* from, float* const* states, float* out) {
  FlushSubnormals mode;
  // One item per head, its rows in turn: the state row t - 1 wrote is still
  // in cache when row t reads it (64 KiB a head at d_k = d_v = 128), where
  // row-at-a-time calls read every head's state back from memory. Heads of
  // whole vectors run the rows chained, one pass over the head per row.
  pool_->parallel_for(in.n_v, [&](int64_t h) {
    if (in.d_v % 16 == 0) return chained_head(in, h, from, states, out);
    for (int64_t t = 0; t < in.tokens; ++t) recurrent_item(in, t, h, t == 0 ? from : states[t - 1], states[t], out);
  });
}

}  // namespace sb::cpu
