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

// Every expert's gate and up projections over its rows of xn (tokens +
// start[e] on, read where they are) in one matmul_each, one activation over
// all, then every down projection into ys + start[e] * H and the shared
// expert's (shared_u into shared_out, when not null) in a second
// matmul_each. REQUIRES: no expert's gate_up is packed as a whole.
void expert_parts_together(Kernels& k, const FfnWeights& w, const float* xn, const std::vector<int64_t>& tokens,
                           const std::vector<int64_t>& start, int64_t rows, int64_t H, const float* shared_u,
                           float* ys, float* shared_out) {
  const int64_t E = static_cast<int64_t>(w.experts.size());
  std::vector<int64_t> at(E + 1, 0);  // each expert's first float in g and u: its rows times its intermediate size
  for (int64_t e = 0; e < E; ++e) at[e + 1] = at[e] + (start[e + 1] - start[e]) * w.experts[e].gate_up.parts[0].rows;
  Rows g(at[E]), u(at[E]);
  std::vector<const float*> ins;
  std::vector<const int64_t*> picked;
  std::vector<int64_t> ms;
  std::vector<WeightRef> ws;
  std::vector<float*> outs;
  for (int64_t e = 0; e < E; ++e) {
    if (start[e + 1] == start[e]) continue;
    const FusedWeight& gate_up = w.experts[e].gate_up;
    ins.insert(ins.end(), 2, xn);
    picked.insert(picked.end(), 2, tokens.data() + start[e]);
    ms.insert(ms.end(), 2, start[e + 1] - start[e]);
    ws.insert(ws.end(), {gate_up.parts[0], gate_up.parts[1]});
    outs.insert(outs.end(), {g.data() + at[e], u.data() + at[e]});
  }
  k.matmul_each(ins, picked, ms, ws, outs);
  k.mul_activation(u.data(), g.data(), at[E], Activation::kSilu);
  ins.clear(), ms.clear(), ws.clear(), outs.clear();
  for (int64_t e = 0; e < E; ++e) {
    if (start[e + 1] == start[e]) continue;
    ins.push_back(u.data() + at[e]), ms.push_back(start[e + 1] - start[e]), ws.push_back(w.experts[e].down);
    outs.push_back(ys + start[e] * H);
  }
  if (shared_u) ins.push_back(shared_u), ms.push_back(rows), ws.push_back(w.down), outs.push_back(shared_out);
  k.matmul_each(ins, {}, ms, ws, outs);
}

// The experts of a step of several rows, each with the rows routed to it
// (the rows in expert order, each expert's in row order): their outputs in
// that order into expert_out, at[row * top + rank] the row of each slot (the
// combine reads them there: a scatter to the slots had copied 8 MB a layer
// in a 512-row prefill of the 0.8b MoE preset). Parts multiplied alone:
// expert_parts_together, where an expert at a time took a gather, a
// scatter, an activation and the products' hand-offs of its own: 9 regions
// an expert. Its products read the routed rows in place: a gathered copy of
// them (8 MB a layer in a 512-row prefill of the 0.8b MoE preset) was
// written and read once more. Gate_up packed whole (bf16): an expert at a
// time, on a gathered copy. The row kernels make a row's result independent
// of which other rows share a call, so the bits are those of an expert at a
// time.
void experts_by_expert(Kernels& k, const FfnWeights& w, const float* xn, int64_t rows, const int64_t* chosen,
                       int64_t top, int64_t H, bool parts_alone, const float* shared_u, float* expert_out,
                       int64_t* at, float* shared_out) {
  const int64_t E = static_cast<int64_t>(w.experts.size()), n = rows * top;
  std::vector<int64_t> start(E + 1, 0), tokens(n);
  for (int64_t i = 0; i < n; ++i) ++start[chosen[i] + 1];
  for (int64_t e = 0; e < E; ++e) start[e + 1] += start[e];
  std::vector<int64_t> next(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < n; ++i) at[i] = next[chosen[i]], tokens[next[chosen[i]]++] = i / top;
  if (parts_alone) {
    expert_parts_together(k, w, xn, tokens, start, rows, H, shared_u, expert_out, shared_out);
  } else {
    Rows xs(n * H);
    k.gather_rows(xn, tokens.data(), n, H, xs.data());
    for (int64_t e = 0; e < E; ++e)
      swiglu(k, w.experts[e].gate_up, w.experts[e].down, xs.data() + start[e] * H, start[e + 1] - start[e],
             expert_out + start[e] * H);
    if (shared_u) k.matmul(shared_u, rows, w.down, shared_out);
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
  Rows router(rows * E), g(rows * I), u(rows * I), shared_gate(rows);
  float* const outs[] = {router.data(), g.data(), u.data(), shared_gate.data()};
  kernels_->matmul(xn, rows, w.in, std::span<float* const>(outs, w.in.parts.size()));
  std::vector<int64_t> chosen(rows * top);
  Rows weight(rows * top);
  kernels_->route(router.data(), rows, E, top, config_.norm_topk_prob, chosen.data(), weight.data());
  Rows expert_out(rows * top * H), shared(w.shared_expert ? rows * H : 0);
  std::vector<int64_t> at;  // expert_out's row of each [row, rank] slot, where not the slot's own
  if (w.shared_expert) kernels_->mul_activation(u.data(), g.data(), rows * I, Activation::kSilu);
  // A fused set packed whole (bf16) multiplies its parts only together.
  const bool parts_alone =
      std::none_of(chosen.begin(), chosen.end(), [&](int64_t e) { return w.experts[e].gate_up.packed != nullptr; });
  if (rows == 1 && parts_alone) {
    experts_of_one_row(*kernels_, w, xn, chosen.data(), top, H, w.shared_expert ? u.data() : nullptr,
                       expert_out.data(), shared.data());
  } else {
    at.resize(rows * top);
    experts_by_expert(*kernels_, w, xn, rows, chosen.data(), top, H, parts_alone,
                      w.shared_expert ? u.data() : nullptr, expert_out.data(), at.data(), shared.data());
  }
  // out = sum over the top-k of weight * expert output, in rank order.
  kernels_->weighted_sum_rows(expert_out.data(), at.empty() ? nullptr : at.data(), weight.data(), rows, top, H, out);
  if (w.shared_expert)
    kernels_->add_scaled_rows(out, shared.data(), H, shared_gate.data(), 1, rows, H, Activation::kSigmoid);
}

}  // namespace sb
