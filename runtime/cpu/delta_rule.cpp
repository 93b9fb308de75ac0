// The gated delta rule (docs/model-spec.md 2.5 (6) and (8)), per value head.
//
// Chunked form for prefill: one call is one chunk of the absolute 64-token
// grid, so a prefill split at grid multiples runs exactly the same chunks.
// Recurrent form for decode. Vectors of length d_v are the unit of every
// loop (axpy is per element); every sum over tokens or key dims runs in
// ascending index order.
#include <cmath>
#include <vector>

#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/simd.h"

namespace sb::cpu {

void CpuKernels::delta_rule_chunk(const DeltaRuleInput& in, float* state, float* out) {
  const int64_t L = in.tokens, dk = in.d_k, dv = in.d_v, r = in.n_v / in.n_k;
  pool_->parallel_for(in.n_v, [&](int64_t h) {
    const int64_t kh = h / r;
    float* S = state + h * dk * dv;
    auto qv = [&](int64_t i) { return in.q + (i * in.n_k + kh) * dk; };
    auto kv = [&](int64_t i) { return in.k + (i * in.n_k + kh) * dk; };
    auto vv = [&](int64_t i) { return in.v + (i * in.n_v + h) * dv; };
    std::vector<float> G(L), beta(L);
    float run = 0.0f;
    for (int64_t i = 0; i < L; ++i) {
      run += in.g[i * in.n_v + h];
      G[i] = run;
      beta[i] = in.beta[i * in.n_v + h];
    }
    // W = (I + M)^-1 by forward substitution, M_ij = beta_i exp(G_i - G_j) k_i.k_j (j < i).
    std::vector<float> M(L * L, 0.0f), W(L * L, 0.0f);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < i; ++j) M[i * L + j] = beta[i] * std::exp(G[i] - G[j]) * dot(kv(i), kv(j), dk);
    for (int64_t i = 0; i < L; ++i) {
      W[i * L + i] = 1.0f;
      for (int64_t j = 0; j < i; ++j) {
        float s = 0.0f;
        for (int64_t l = j; l < i; ++l) s = std::fma(M[i * L + l], W[l * L + j], s);
        W[i * L + j] = -s;
      }
    }
    // V' = W diag(beta) V - W diag(beta e^G) K S, row by row.
    std::vector<float> Vp(L * dv, 0.0f), What(dk), eG(L);
    for (int64_t i = 0; i < L; ++i) eG[i] = std::exp(G[i]);
    for (int64_t i = 0; i < L; ++i) {
      float* vpi = Vp.data() + i * dv;
      std::fill(What.begin(), What.end(), 0.0f);
      for (int64_t j = 0; j <= i; ++j) {
        const float wb = W[i * L + j] * beta[j];
        axpy(wb, vv(j), vpi, dv);
        axpy(wb * eG[j], kv(j), What.data(), dk);
      }
      for (int64_t a = 0; a < dk; ++a) axpy(-What[a], S + a * dv, vpi, dv);
    }
    // O_i = e^{G_i} q_i S + sum_{j<=i} (q_i.k_j) e^{G_i - G_j} V'_j.
    for (int64_t i = 0; i < L; ++i) {
      float* o = out + (i * in.n_v + h) * dv;
      std::fill(o, o + dv, 0.0f);
      const float* q = qv(i);
      for (int64_t a = 0; a < dk; ++a) axpy(q[a] * eG[i], S + a * dv, o, dv);
      for (int64_t j = 0; j <= i; ++j) axpy(dot(q, kv(j), dk) * std::exp(G[i] - G[j]), Vp.data() + j * dv, o, dv);
    }
    // S <- e^{G_last} S + sum_j e^{G_last - G_j} k_j V'_j^T.
    const float glast = G[L - 1], elast = std::exp(glast);
    for (int64_t a = 0; a < dk * dv; ++a) S[a] *= elast;
    for (int64_t j = 0; j < L; ++j) {
      const float decay = std::exp(glast - G[j]);
      const float* kj = kv(j);
      for (int64_t a = 0; a < dk; ++a) axpy(decay * kj[a], Vp.data() + j * dv, S + a * dv, dv);
    }
  });
}

void CpuKernels::delta_rule_recurrent(const DeltaRuleInput& in, float* state, float* out) {
  const int64_t dk = in.d_k, dv = in.d_v, r = in.n_v / in.n_k;
  pool_->parallel_for(in.n_v, [&](int64_t h) {
    const int64_t kh = h / r;
    float* S = state + h * dk * dv;
    std::vector<float> mem(dv), u(dv);
    for (int64_t t = 0; t < in.tokens; ++t) {
      const float* q = in.q + (t * in.n_k + kh) * dk;
      const float* k = in.k + (t * in.n_k + kh) * dk;
      const float* v = in.v + (t * in.n_v + h) * dv;
      const float alpha = std::exp(in.g[t * in.n_v + h]), beta = in.beta[t * in.n_v + h];
      for (int64_t a = 0; a < dk * dv; ++a) S[a] *= alpha;
      std::fill(mem.begin(), mem.end(), 0.0f);
      for (int64_t a = 0; a < dk; ++a) axpy(k[a], S + a * dv, mem.data(), dv);
      for (int64_t c = 0; c < dv; ++c) u[c] = beta * (v[c] - mem[c]);
      for (int64_t a = 0; a < dk; ++a) axpy(k[a], u.data(), S + a * dv, dv);
      float* o = out + (t * in.n_v + h) * dv;
      std::fill(o, o + dv, 0.0f);
      for (int64_t a = 0; a < dk; ++a) axpy(q[a], S + a * dv, o, dv);
    }
  });
}

}  // namespace sb::cpu
