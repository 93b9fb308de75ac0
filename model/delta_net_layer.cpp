// Gated DeltaNet (docs/model-spec.md 2.5): projections, causal conv, L2 norm,
// gates, the delta rule on the absolute 64-token grid, gated RMSNorm.
#include <algorithm>
#include <cmath>

#include "model/transformer.h"

namespace sb {

void Transformer::delta_net_layer(const LayerWeights& w, ForwardCall& call, const float* xn, float* out) const {
  const ModelConfig& c = config_;
  const DeltaNetWeights& dw = w.delta;
  const int64_t T = call.rows, nk = c.lin_n_key_heads, nv = c.lin_n_value_heads, dk = c.lin_key_head_dim,
                dv = c.lin_value_head_dim, r = nv / nk;
  const int64_t key_dim = nk * dk, value_dim = nv * dv, conv_dim = 2 * key_dim + value_dim;

  // m = [q heads | k heads | v heads] in conv channel order; z, b, a per value head.
  Rows mixed(T * conv_dim), z(T * value_dim), b(T * nv), a(T * nv);
  if (dw.tiled) {
    project_tiled(dw, xn, T, mixed.data(), z.data(), b.data(), a.data());
  } else if (!dw.grouped) {
    float* const outs[] = {mixed.data(), z.data(), b.data(), a.data()};
    kernels_->matmul(xn, T, dw.in, outs);
  } else if (dw.qkvz_split) {
    // A GGUF file's halves give m and z in order; only b and a are grouped.
    Rows ba(T * 2 * nv);
    float* const outs[] = {mixed.data(), z.data(), ba.data()};
    kernels_->matmul(xn, T, dw.in, outs);
    split_ba(ba.data(), T, b.data(), a.data());
  } else {
    // Qwen3-Next groups every projection by key head: un-group it.
    const int64_t group = 2 * dk + 2 * r * dv;
    Rows u(T * nk * group), ba(T * 2 * nv);
    float* const outs[] = {u.data(), ba.data()};
    kernels_->matmul(xn, T, dw.in, outs);
    // Per key head j: [q_j | k_j | v of its r value heads | z of them];
    // value head h = j * r + i.
    const RowPart qkvz[] = {{dk, mixed.data(), conv_dim},
                            {dk, mixed.data() + key_dim, conv_dim},
                            {r * dv, mixed.data() + 2 * key_dim, conv_dim},
                            {r * dv, z.data(), value_dim}};
    kernels_->split_rows(u.data(), T, nk, qkvz);
    split_ba(ba.data(), T, b.data(), a.data());
  }

  Rows beta(T * nv), g(T * nv);
  kernels_->delta_gates(b.data(), a.data(), T, nv, dw.neg_exp_a_log.data(), dw.dt_bias.data(), beta.data(), g.data());

  Rows o(T * value_dim);
  std::span<SequenceRows> seqs = call.sequences;
  // A run of consecutive decode sequences (adjacent rows) goes together; a
  // prefill goes alone.
  for (size_t i = 0; i < seqs.size();) {
    const int64_t row = seqs[i].first_row;
    size_t end = i;
    while (end < seqs.size() && seqs[end].recurrent) ++end;
    if (end == i) {
      delta_net_sequence(w, seqs[i], mixed.data() + row * conv_dim, g.data() + row * nv, beta.data() + row * nv,
                         o.data() + row * value_dim);
      end = i + 1;
    } else {
      delta_net_decode(w, seqs.subspan(i, end - i), mixed.data() + row * conv_dim, g.data() + row * nv,
                       beta.data() + row * nv, o.data() + row * value_dim);
    }
    i = end;
  }

  // Gated RMSNorm per value head: (w ⊙ normalised o) ⊙ SiLU(z) (qwen4exp:
  // σ(z)), w not offset.
  kernels_->rms_norm(o.data(), T * nv, dv, dw.norm.data(), static_cast<float>(c.rms_norm_eps), false, o.data());
  kernels_->mul_activation(o.data(), z.data(), T * value_dim,
                           c.gdn_gate_sigmoid ? Activation::kSigmoid : Activation::kSilu);
  if (dw.tile_out_input) {
    tile_heads(o.data(), T, dv, z.data());  // z is read no more
    kernels_->matmul(z.data(), T, dw.out, out);
  } else {
    kernels_->matmul(o.data(), T, dw.out, out);
  }
}

// Per key head j: [b of its r value heads | a of them]; value head h = j * r + i.
void Transformer::split_ba(const float* ba, int64_t rows, float* b, float* a) const {
  const int64_t nk = config_.lin_n_key_heads, nv = config_.lin_n_value_heads, r = nv / nk;
  const RowPart parts[] = {{r, b, nv}, {r, a, nv}};
  kernels_->split_rows(ba, rows, nk, parts);
}

void Transformer::project_tiled(const DeltaNetWeights& dw, const float* xn, int64_t T, float* mixed, float* z, float* b,
                                float* a) const {
  const ModelConfig& c = config_;
  const int64_t nv = c.lin_n_value_heads, dv = c.lin_value_head_dim, value_dim = nv * dv;
  const int64_t key_rows = 2 * c.lin_n_key_heads * c.lin_key_head_dim, conv_dim = key_rows + value_dim;
  Rows qk(T * key_rows), v_t(T * value_dim), z_t(T * value_dim), b_t(T * nv), a_t(T * nv);
  float* const outs[] = {qk.data(), v_t.data(), z_t.data(), b_t.data(), a_t.data()};
  kernels_->matmul(xn, T, dw.in, outs);
  const RowPart keys[] = {{key_rows, mixed, conv_dim}};
  kernels_->split_rows(qk.data(), T, 1, keys);
  untile_heads(v_t.data(), T, dv, mixed + key_rows, conv_dim);
  untile_heads(z_t.data(), T, dv, z, value_dim);
  untile_heads(b_t.data(), T, 1, b, nv);
  untile_heads(a_t.data(), T, 1, a, nv);
}

// Tiled position c * n_k + j is copy c of key head j: in x as [rows, r, n_k
// heads], group c's part j goes to head j * r + c.
void Transformer::untile_heads(const float* x, int64_t rows, int64_t width, float* out, int64_t ld) const {
  const int64_t nk = config_.lin_n_key_heads, r = config_.lin_n_value_heads / nk;
  std::vector<RowPart> parts;
  for (int64_t j = 0; j < nk; ++j) parts.push_back({width, out + j * r * width, ld});
  kernels_->split_rows(x, rows, r, parts);
}

// The inverse: in x as [rows, n_k, r heads], group j's part c goes to
// tiled position c * n_k + j.
void Transformer::tile_heads(const float* x, int64_t rows, int64_t width, float* out) const {
  const int64_t nk = config_.lin_n_key_heads, nv = config_.lin_n_value_heads, r = nv / nk;
  std::vector<RowPart> parts;
  for (int64_t c = 0; c < r; ++c) parts.push_back({width, out + c * nk * width, nv * width});
  kernels_->split_rows(x, rows, nk, parts);
}

std::array<RowPart, 3> Transformer::conv_parts(float* q, float* k, float* v, int64_t row) const {
  const ModelConfig& c = config_;
  const int64_t key_dim = c.lin_n_key_heads * c.lin_key_head_dim, value_dim = c.lin_n_value_heads * c.lin_value_head_dim;
  return {RowPart{key_dim, q + row * key_dim, key_dim}, RowPart{key_dim, k + row * key_dim, key_dim},
          RowPart{value_dim, v + row * value_dim, value_dim}};
}

void Transformer::normalise_keys(float* q, float* k, int64_t rows) const {
  const int64_t nk = config_.lin_n_key_heads, dk = config_.lin_key_head_dim;
  kernels_->l2_normalise(q, rows * nk, dk, static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk))));
  kernels_->l2_normalise(k, rows * nk, dk, 1.0f);
}

void Transformer::capture_recurrent(const LayerWeights& w, SequenceRows& seq, int64_t end_pos, size_t* next) const {
  while (*next < seq.capture.size() && seq.capture[*next] < end_pos) ++*next;
  if (*next == seq.capture.size() || seq.capture[*next] != end_pos) return;
  State& st = *seq.state;
  RecurrentSnapshot& snap = (*seq.snapshots)[*next];
  snap.parts[w.rec_conv].assign(st.f32(w.comp_conv).begin(), st.f32(w.comp_conv).end());
  snap.parts[w.rec_ssm].assign(st.f32(w.comp_ssm).begin(), st.f32(w.comp_ssm).end());
}

namespace {

// Where the stretch of seq's rows from s ends: at the first capture after s
// on the grid (its state is handed out there), else at the call's end.
int64_t stretch_end(const SequenceRows& seq, int64_t s) {
  for (const int64_t p : seq.capture) {
    const int64_t e = p - seq.first_pos;
    if (e > s && e < seq.rows && p % kGrid == 0) return e;
  }
  return seq.rows;
}

}  // namespace

void Transformer::delta_net_sequence(const LayerWeights& w, SequenceRows& seq, const float* mixed, const float* g,
                                     const float* beta, float* o) const {
  const ModelConfig& c = config_;
  const DeltaNetWeights& dw = w.delta;
  const int64_t T = seq.rows, nk = c.lin_n_key_heads, dk = c.lin_key_head_dim, K = c.conv_kernel;
  const int64_t key_dim = nk * dk, value_dim = c.lin_n_value_heads * c.lin_value_head_dim,
                conv_dim = 2 * key_dim + value_dim;
  State& st = *seq.state;
  float* const conv_state[] = {st.f32(w.comp_conv).data()};
  float* ssm = st.f32(w.comp_ssm).data();
  Rows q(T * key_dim), k(T * key_dim), v(T * value_dim);
  size_t next_capture = 0;
  // Each kernel once per stretch: the conv and the norms work row by row
  // and the delta rule chunk by chunk of the grid, so that the bits are those
  // of a call per grid segment, in a few parallel regions per layer instead
  // of a few per 64 rows. The conv writes q, k and v in their own rows: a
  // copy of its whole output cost about 1% of a prefill (docs/kernels.md).
  for (int64_t s = 0; s < T;) {
    const int64_t e = stretch_end(seq, s), n = e - s;
    kernels_->causal_conv_silu(mixed + s * conv_dim, n, conv_dim, dw.conv.data(), K, conv_state, 1,
                               conv_parts(q.data(), k.data(), v.data(), s));
    normalise_keys(q.data() + s * key_dim, k.data() + s * key_dim, n);
    delta_rule_stretch(w, seq, s, e, q.data(), k.data(), v.data(), g, beta, ssm, o);
    capture_recurrent(w, seq, seq.first_pos + e, &next_capture);
    s = e;
  }
}

void Transformer::delta_rule_stretch(const LayerWeights& w, SequenceRows& seq, int64_t s, int64_t e, const float* q,
                                     const float* k, const float* v, const float* g, const float* beta, float* ssm,
                                     float* o) const {
  const ModelConfig& c = config_;
  const int64_t nk = c.lin_n_key_heads, nv = c.lin_n_value_heads, dk = c.lin_key_head_dim, dv = c.lin_value_head_dim;
  const int64_t key_dim = nk * dk, value_dim = nv * dv, pos = seq.first_pos;
  auto carried = [&](int64_t a, int64_t b) {
    delta_rule_with_carry(w, seq, a, b, q + a * key_dim, k + a * key_dim, v + a * value_dim, g + a * nv,
                          beta + a * nv, ssm, o + a * value_dim);
  };
  // With a carry, a part of a chunk at either end goes through it; the whole
  // chunks between in one call.
  int64_t a = s;
  if (seq.carry && (pos + a) % kGrid != 0) {
    const int64_t end = std::min(e, a + kGrid - (pos + a) % kGrid);
    carried(a, end);
    a = end;
  }
  const int64_t tail = seq.carry ? std::max(a, e - (pos + e) % kGrid) : e;
  if (a < tail) {
    DeltaRuleInput in{tail - a, nk, nv, dk, dv, q + a * key_dim, k + a * key_dim, v + a * value_dim, g + a * nv,
                      beta + a * nv};
    in.phase = (pos + a) % kGrid;
    kernels_->delta_rule_chunk(in, ssm, o + a * value_dim);
  }
  if (tail < e) carried(tail, e);
}

void Transformer::delta_net_decode(const LayerWeights& w, std::span<SequenceRows> seqs, const float* mixed,
                                   const float* g, const float* beta, float* o) const {
  const ModelConfig& c = config_;
  const int64_t nk = c.lin_n_key_heads, nv = c.lin_n_value_heads, dk = c.lin_key_head_dim, dv = c.lin_value_head_dim;
  const int64_t key_dim = nk * dk, value_dim = nv * dv, conv_dim = 2 * key_dim + value_dim;
  const int64_t base = seqs.front().first_row;
  int64_t depth = 0, total = 0;
  for (const SequenceRows& seq : seqs) depth = std::max(depth, seq.rows), total += seq.rows;
  const int64_t most = static_cast<int64_t>(seqs.size());
  // The conv writes q, k and v in their own rows (conv_parts), as in a prefill.
  Rows q(total * key_dim), k(total * key_dim), v(total * value_dim);
  std::vector<float*> conv_states, ssms;
  if (depth == 1) {
    // Plain decode rows, one a sequence, adjacent: read in place.
    for (SequenceRows& seq : seqs) {
      conv_states.push_back(seq.state->f32(w.comp_conv).data());
      ssms.push_back(seq.state->f32(w.comp_ssm).data());
    }
    kernels_->causal_conv_silu(mixed, most, conv_dim, w.delta.conv.data(), c.conv_kernel, conv_states.data(), most,
                               conv_parts(q.data(), k.data(), v.data(), 0));
    normalise_keys(q.data(), k.data(), most);
    const DeltaRuleInput in{most, nk, nv, dk, dv, q.data(), k.data(), v.data(), g, beta};
    kernels_->delta_rule_recurrent(in, ssms.data(), o);
  } else {
    // Verify rows: each sequence's rows as one call of each kernel (the
    // bits of one row at a time), so that a step of a few rows pays a few
    // hand-offs between threads per layer, not a few per row. The delta rule
    // runs a sequence's rows head by head, each head's state in cache.
    std::vector<float> before;
    for (SequenceRows& seq : seqs) {
      const int64_t r0 = seq.first_row - base;
      const std::span<float> conv_state = seq.state->f32(w.comp_conv);
      const bool keep = seq.rollback && seq.rows > 1;
      if (keep) before.assign(conv_state.begin(), conv_state.end());
      float* cs = conv_state.data();
      kernels_->causal_conv_silu(mixed + r0 * conv_dim, seq.rows, conv_dim, w.delta.conv.data(), c.conv_kernel, &cs,
                                 1, conv_parts(q.data(), k.data(), v.data(), r0));
      if (keep) keep_row_conv_states(w, seq, before, mixed + r0 * conv_dim);
    }
    normalise_keys(q.data(), k.data(), total);
    for (SequenceRows& seq : seqs) {
      const int64_t r0 = seq.first_row - base;
      // Every row advances the State (out of place from the kept state when
      // a rollback keeps what replays the rows' updates).
      const bool keep = seq.rollback && seq.rows > 1;
      const float* from = keep ? keep_delta_rule(w, seq, r0, k.data(), g) : seq.state->f32(w.comp_ssm).data();
      float* state = seq.state->f32(w.comp_ssm).data();
      ssms.assign(static_cast<size_t>(seq.rows), state);
      DeltaRuleInput in{seq.rows,           nk,      nv,          dk, dv, q.data() + r0 * key_dim,
                        k.data() + r0 * key_dim, v.data() + r0 * value_dim, g + r0 * nv, beta + r0 * nv};
      if (keep) in.updates = seq.rollback->delta[static_cast<size_t>(w.comp_ssm)].updates.data();
      kernels_->delta_rule_rows(in, from, ssms.data(), o + r0 * value_dim);
    }
  }
  for (SequenceRows& seq : seqs) {
    size_t next_capture = 0;
    capture_recurrent(w, seq, seq.first_pos + seq.rows, &next_capture);
  }
}

void Transformer::keep_row_conv_states(const LayerWeights& w, SequenceRows& seq, std::span<const float> before,
                                       const float* mixed) const {
  // A conv state is the last kernel - 1 input rows, so row i's is rows
  // i + 1 .. i + kernel - 1 of [the state before the step | the step's
  // inputs]: copied, as the kernel itself moves the state on.
  const int64_t hist = config_.conv_kernel - 1, width = static_cast<int64_t>(before.size()) / hist;
  for (int64_t i = 0; i + 1 < seq.rows; ++i) {
    std::vector<float>& part = seq.rollback->rows[static_cast<size_t>(i)].parts[w.rec_conv];
    part.resize(before.size());
    for (int64_t r = 0; r < hist; ++r) {
      const int64_t j = i + 1 + r;
      const float* from = j < hist ? before.data() + j * width : mixed + (j - hist) * width;
      std::copy(from, from + width, part.data() + r * width);
    }
  }
}

const float* Transformer::keep_delta_rule(const LayerWeights& w, SequenceRows& seq, int64_t r0, const float* k,
                                         const float* g) const {
  const ModelConfig& c = config_;
  const int64_t key_dim = c.lin_n_key_heads * c.lin_key_head_dim, nv = c.lin_n_value_heads;
  const int64_t value_dim = nv * c.lin_value_head_dim, n = seq.rows;
  VerifyRollback::DeltaRule& kept = seq.rollback->delta[static_cast<size_t>(w.comp_ssm)];
  std::vector<uint8_t>& storage = seq.state->storage(static_cast<size_t>(w.comp_ssm));
  kept.state.swap(storage);
  storage.resize(kept.state.size());  // allocates only the first time
  kept.k.assign(k + r0 * key_dim, k + (r0 + n) * key_dim);
  kept.g.assign(g + r0 * nv, g + (r0 + n) * nv);
  kept.updates.resize(static_cast<size_t>(n * value_dim));  // the kernel writes them
  return reinterpret_cast<const float*>(kept.state.data());
}

Status Transformer::roll_back(State& state, VerifyRollback& kept, int64_t rows) const {
  if (!(state.schema() == schema_)) return Status::invalid("state was made for another model");
  if (rows < 1 || rows > static_cast<int64_t>(kept.rows.size()) ||
      state.position() != kept.start + static_cast<int64_t>(kept.rows.size()) + 1)
    return Status::invalid("roll_back: " + std::to_string(rows) + " rows of a verify step of " +
                           std::to_string(kept.rows.size() + 1) + " from position " + std::to_string(kept.start) +
                           ", the state at " + std::to_string(state.position()));
  const ModelConfig& c = config_;
  const int64_t nk = c.lin_n_key_heads, nv = c.lin_n_value_heads, dk = c.lin_key_head_dim, dv = c.lin_value_head_dim;
  for (size_t comp = 0; comp < kept.delta.size(); ++comp)
    if (!kept.delta[comp].state.empty() && kept.delta[comp].state.size() != state.bytes(comp).size())
      return Status::invalid("roll_back: a kept delta-rule state of another size");
  // The small parts and the truncation first (rewind() leaves the empty
  // Gated DeltaNet parts alone); then each such layer's state before the
  // step moves back into the State (the step's state out to `kept`, whose
  // buffer the next step reuses) and its accepted rows' updates are replayed
  // in place.
  rewind(state, kept.rows[static_cast<size_t>(rows - 1)]);
  for (size_t comp = 0; comp < kept.delta.size(); ++comp) {
    VerifyRollback::DeltaRule& d = kept.delta[comp];
    if (d.state.empty()) continue;
    d.state.swap(state.storage(comp));
    float* ssm = state.f32(comp).data();
    DeltaRuleInput in{rows, nk, nv, dk, dv};
    in.k = d.k.data(), in.g = d.g.data();
    kernels_->delta_rule_replay(in, d.updates.data(), ssm, ssm);
  }
  return Status::ok();
}

void Transformer::delta_rule_with_carry(const LayerWeights& w, SequenceRows& seq, int64_t s, int64_t e,
                                        const float* q, const float* k, const float* v, const float* g,
                                        const float* beta, float* ssm, float* o) const {
  static_assert(kGrid == kDeltaChunkRows, "a grid chunk is one chunk of the delta rule");
  const ModelConfig& c = config_;
  const int64_t nk = c.lin_n_key_heads, nv = c.lin_n_value_heads, dk = c.lin_key_head_dim, dv = c.lin_value_head_dim;
  const int64_t key_dim = nk * dk, value_dim = nv * dv, state_elems = nv * dk * dv, n = e - s;
  const int64_t pos = seq.first_pos + s;
  const bool continues = pos % kGrid != 0, stays_open = (seq.first_pos + e) % kGrid != 0;
  PrefillCarry& carry = *seq.carry;
  carry.layers.resize(static_cast<size_t>(schema_.components.size()));
  PrefillCarry::Layer& open = carry.layers[static_cast<size_t>(w.comp_ssm)];
  auto keep = [&](std::vector<float>& to, const float* rows, int64_t width) { to.insert(to.end(), rows, rows + n * width); };
  if (!continues && !stays_open) {
    DeltaRuleInput in{n, nk, nv, dk, dv, q, k, v, g, beta};
    kernels_->delta_rule_chunk(in, ssm, o);
    return;
  }
  // A chunk in parts: its start state and rows so far are kept, and the
  // kernel keeps its working rows in open.parts, so each part computes only
  // its own rows (and the state at its end, which a prompt ending here needs).
  if (!continues) {
    open.reset();
    open.state.assign(ssm, ssm + state_elems);
    open.parts.resize(static_cast<size_t>(delta_rule_parts_floats(nv, dv)));
  } else {
    std::copy(open.state.begin(), open.state.end(), ssm);
  }
  const int64_t before = static_cast<int64_t>(open.g.size()) / nv;
  keep(open.q, q, key_dim), keep(open.k, k, key_dim), keep(open.v, v, value_dim), keep(open.g, g, nv),
      keep(open.beta, beta, nv);
  DeltaRuleInput in{before + n, nk, nv, dk, dv, open.q.data(), open.k.data(), open.v.data(), open.g.data(),
                    open.beta.data(), before, open.parts.data()};
  kernels_->delta_rule_chunk(in, ssm, o);
  if (!stays_open) open.reset();
}

}  // namespace sb
