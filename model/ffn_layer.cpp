// Feed-forward blocks: the SwiGLU MLP and the sparse mixture of experts with
// a sigmoid-gated shared expert (docs/model-spec.md 2.6).
#include <algorithm>

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

// A decode step's row (rows == 1): its experts' gate and up projections in
// one matmul_each, their down projections and the shared expert's in a
// second, where an expert at a time took two parallel regions each and their
// weights were too few to keep two threads busy between the hand-offs. Each
// product and activation is the call it was, so the bits are the same.
// expert_out[rank]; shared_u: the shared expert's activated row (or null),
// its down projection into shared_out. REQUIRES: no chosen expert's gate_up
// is packed as a whole (its parts are what matmul_each multiplies).
void experts_of_one_row(Kernels& k, const FfnWeights& w, const float* xn, const int64_t* chosen, int64_t top,
                        int64_t H, const float* shared_u, float* expert_out, float* shared_out) {
  int64_t width = 0;
  for (int64_t r = 0; r < top; ++r) width += w.experts[chosen[r]].gate_up.parts[0].rows;
  Rows g(width), u(width);
  std::vector<const float*> xs;
  std::vector<WeightRef> ws;
  std::vector<float*> outs;
  for (int64_t r = 0, at = 0; r < top; at += w.experts[chosen[r]].gate_up.parts[0].rows, ++r) {
    const FusedWeight& gate_up = w.experts[chosen[r]].gate_up;
    xs.insert(xs.end(), {xn, xn});
    ws.insert(ws.end(), {gate_up.parts[0], gate_up.parts[1]});
    outs.insert(outs.end(), {g.data() + at, u.data() + at});
  }
  k.matmul_each(xs, ws, outs);
  xs.clear(), ws.clear(), outs.clear();
  for (int64_t r = 0, at = 0; r < top; ++r) {
    const int64_t I = w.experts[chosen[r]].gate_up.parts[0].rows;
    k.mul_activation(u.data() + at, g.data() + at, I, Activation::kSilu);
    xs.push_back(u.data() + at), ws.push_back(w.experts[chosen[r]].down), outs.push_back(expert_out + r * H);
    at += I;
  }
  if (shared_u) xs.push_back(shared_u), ws.push_back(w.down), outs.push_back(shared_out);
  k.matmul_each(xs, ws, outs);
}

// Each expert runs once over the rows routed to it (gathered, then its
// outputs scattered to their slots [row, rank]); the row kernels make a row's
// result independent of which other rows share the call.
void experts_by_expert(Kernels& k, const FfnWeights& w, const float* xn, int64_t rows, const int64_t* chosen,
                       int64_t top, int64_t H, float* expert_out) {
  std::vector<int64_t> slots, tokens;
  Rows xs, ys;
  for (int64_t e = 0; e < static_cast<int64_t>(w.experts.size()); ++e) {
    slots.clear();
    tokens.clear();
    for (int64_t i = 0; i < rows * top; ++i)
      if (chosen[i] == e) slots.push_back(i), tokens.push_back(i / top);
    if (slots.empty()) continue;
    const int64_t n = static_cast<int64_t>(slots.size());
    if (xs.size() < static_cast<size_t>(n * H)) xs = Rows(n * H), ys = Rows(n * H);
    k.gather_rows(xn, tokens.data(), n, H, xs.data());
    swiglu(k, w.experts[e].gate_up, w.experts[e].down, xs.data(), n, ys.data());
    k.scatter_rows(ys.data(), slots.data(), n, H, expert_out);
  }
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
  std::vector<float> expert_out(rows * top * H), shared(w.shared_expert ? rows * H : 0);
  if (w.shared_expert) kernels_->mul_activation(u.data(), g.data(), rows * I, Activation::kSilu);
  // A fused set packed whole (bf16) multiplies its parts only together.
  const bool parts_alone =
      std::none_of(chosen.begin(), chosen.end(), [&](int64_t e) { return w.experts[e].gate_up.packed != nullptr; });
  if (rows == 1 && parts_alone) {
    experts_of_one_row(*kernels_, w, xn, chosen.data(), top, H, w.shared_expert ? u.data() : nullptr,
                       expert_out.data(), shared.data());
  } else {
    experts_by_expert(*kernels_, w, xn, rows, chosen.data(), top, H, expert_out.data());
    if (w.shared_expert) kernels_->matmul(u.data(), rows, w.down, shared.data());
  }
  // out = sum over the top-k of weight * expert output, in rank order.
  kernels_->weighted_sum_rows(expert_out.data(), weight.data(), rows, top, H, out);
  if (w.shared_expert)
    kernels_->add_scaled_rows(out, shared.data(), H, shared_gate.data(), 1, rows, H, Activation::kSigmoid);
}

}  // namespace sb
