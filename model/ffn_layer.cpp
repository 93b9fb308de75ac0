// Feed-forward blocks: the SwiGLU MLP and the sparse mixture of experts with
// a sigmoid-gated shared expert (docs/model-spec.md 2.6).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/activations.h"
#include "model/transformer.h"

namespace sb {
namespace {

void swiglu(Kernels& k, const WeightRef& gate, const WeightRef& up, const WeightRef& down, const float* x,
            int64_t rows, float* out) {
  const int64_t I = gate.rows;
  std::vector<float> g(rows * I), u(rows * I);
  k.matmul(x, rows, gate, g.data());
  k.matmul(x, rows, up, u.data());
  for (int64_t i = 0; i < rows * I; ++i) g[i] = silu(g[i]) * u[i];
  k.matmul(g.data(), rows, down, out);
}

}  // namespace

void Transformer::ffn_layer(const FfnWeights& w, const float* xn, int64_t rows, float* out) const {
  const int64_t H = config_.hidden_size;
  if (!w.moe) {
    swiglu(*kernels_, w.gate, w.up, w.down, xn, rows, out);
    return;
  }
  const int64_t E = config_.n_experts, top = config_.n_experts_per_tok;
  std::vector<float> router(rows * E);
  kernels_->matmul(xn, rows, w.router, router.data());
  // Per token: softmax over all experts, the top-k (ties to the lower index),
  // renormalised when the config says so.
  std::vector<int64_t> chosen(rows * top);
  std::vector<float> weight(rows * top);
  std::vector<int64_t> order(E);
  for (int64_t t = 0; t < rows; ++t) {
    float* l = router.data() + t * E;
    const float mx = *std::max_element(l, l + E);
    float sum = 0.0f;
    for (int64_t e = 0; e < E; ++e) sum += l[e] = std::exp(l[e] - mx);
    for (int64_t e = 0; e < E; ++e) l[e] /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top, order.end(),
                      [&](int64_t a, int64_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    float picked = 0.0f;
    for (int64_t i = 0; i < top; ++i) picked += l[order[i]];
    for (int64_t i = 0; i < top; ++i) {
      chosen[t * top + i] = order[i];
      weight[t * top + i] = config_.norm_topk_prob ? l[order[i]] / picked : l[order[i]];
    }
  }
  // Each expert runs once over the rows routed to it; the row kernels make a
  // row's result independent of which other rows share the call.
  std::vector<float> expert_out(rows * top * H);
  std::vector<int64_t> slots;
  std::vector<float> xs, ys;
  for (int64_t e = 0; e < E; ++e) {
    slots.clear();
    for (int64_t i = 0; i < rows * top; ++i)
      if (chosen[i] == e) slots.push_back(i);
    if (slots.empty()) continue;
    const int64_t n = static_cast<int64_t>(slots.size());
    xs.resize(n * H);
    ys.resize(n * H);
    for (int64_t j = 0; j < n; ++j) std::copy(xn + (slots[j] / top) * H, xn + (slots[j] / top + 1) * H, xs.data() + j * H);
    const auto& ew = w.experts[e];
    swiglu(*kernels_, ew[0], ew[1], ew[2], xs.data(), n, ys.data());
    for (int64_t j = 0; j < n; ++j) std::copy(ys.data() + j * H, ys.data() + (j + 1) * H, expert_out.data() + slots[j] * H);
  }
  std::fill(out, out + rows * H, 0.0f);
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t i = 0; i < top; ++i) {
      const float wt = weight[t * top + i];
      const float* y = expert_out.data() + (t * top + i) * H;
      for (int64_t h = 0; h < H; ++h) out[t * H + h] += wt * y[h];
    }
  if (w.shared_gate.data) {
    std::vector<float> shared(rows * H), gate(rows);
    swiglu(*kernels_, w.gate, w.up, w.down, xn, rows, shared.data());
    kernels_->matmul(xn, rows, w.shared_gate, gate.data());
    for (int64_t t = 0; t < rows; ++t) {
      const float s = sigmoid(gate[t]);
      for (int64_t h = 0; h < H; ++h) out[t * H + h] += s * shared[t * H + h];
    }
  }
}

}  // namespace sb
