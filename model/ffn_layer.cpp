// Feed-forward blocks: the SwiGLU MLP and the sparse mixture of experts with
// a sigmoid-gated shared expert (docs/model-spec.md 2.6).
#include "model/transformer.h"

namespace sb {
namespace {

// down(silu(gate x) * up x); gate_up has the parts gate, up.
void swiglu(Kernels& k, const FusedWeight& gate_up, const WeightRef& down, const float* x, int64_t rows, float* out) {
  const int64_t I = gate_up.parts[0].rows;
  Rows g(rows * I), u(rows * I);
  float* const outs[] = {g.data(), u.data()};
  k.matmul(x, rows, gate_up, outs);
  k.mul_activation(u.data(), g.data(), rows * I, Activation::kSilu);
  k.matmul(u.data(), rows, down, out);
}

}  // namespace

void Transformer::ffn_layer(const FfnWeights& w, const float* xn, int64_t rows, float* out) const {
  const int64_t H = config_.hidden_size;
  if (!w.moe) {
    swiglu(*kernels_, w.in, w.down, xn, rows, out);
    return;
  }
  const int64_t E = config_.n_experts, top = config_.n_experts_per_tok;
  // One product for the router and the shared expert's projections.
  const int64_t I = w.shared_expert ? w.in.parts[1].rows : 0;
  std::vector<float> router(rows * E), g(rows * I), u(rows * I), shared_gate(rows);
  float* const outs[] = {router.data(), g.data(), u.data(), shared_gate.data()};
  kernels_->matmul(xn, rows, w.in, std::span<float* const>(outs, w.in.parts.size()));
  std::vector<int64_t> chosen(rows * top);
  std::vector<float> weight(rows * top);
  kernels_->route(router.data(), rows, E, top, config_.norm_topk_prob, chosen.data(), weight.data());
  // Each expert runs once over the rows routed to it (gathered, then its
  // outputs scattered to their slots [row, rank]); the row kernels make a
  // row's result independent of which other rows share the call.
  std::vector<float> expert_out(rows * top * H);
  std::vector<int64_t> slots, tokens;
  Rows xs, ys;
  for (int64_t e = 0; e < E; ++e) {
    slots.clear();
    tokens.clear();
    for (int64_t i = 0; i < rows * top; ++i)
      if (chosen[i] == e) slots.push_back(i), tokens.push_back(i / top);
    if (slots.empty()) continue;
    const int64_t n = static_cast<int64_t>(slots.size());
    if (xs.size() < static_cast<size_t>(n * H)) xs = Rows(n * H), ys = Rows(n * H);
    kernels_->gather_rows(xn, tokens.data(), n, H, xs.data());
    swiglu(*kernels_, w.experts[e].gate_up, w.experts[e].down, xs.data(), n, ys.data());
    kernels_->scatter_rows(ys.data(), slots.data(), n, H, expert_out.data());
  }
  // out = sum over the top-k of weight * expert output, in rank order.
  kernels_->weighted_sum_rows(expert_out.data(), weight.data(), rows, top, H, out);
  if (w.shared_expert) {
    std::vector<float> shared(rows * H);
    kernels_->mul_activation(u.data(), g.data(), rows * I, Activation::kSilu);
    kernels_->matmul(u.data(), rows, w.down, shared.data());
    kernels_->add_scaled_rows(out, shared.data(), H, shared_gate.data(), 1, rows, H, Activation::kSigmoid);
  }
}

}  // namespace sb
