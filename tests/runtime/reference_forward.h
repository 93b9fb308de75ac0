// An independent, deliberately naive forward pass in double precision,
// written from docs/model-spec.md (qwen4exp: section 7.3, its MTP head 7.7)
// and docs/qsa.md
// token by token with
// plain loops: no kernels, no chunking, no shared code with model/ beyond the
// weight binding. Each numbered rule of the spec that reimplementations get
// wrong can be switched off (Rules), so a test can show that breaking it
// changes the logits — proof that the comparison would catch the runtime
// breaking it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "model/checkpoint.h"
#include "model/config.h"
#include "model/weights.h"

namespace sb::testing {

struct Rules {
  bool ungroup_qwen3_next = true;  // spec 6.7: in_proj_qkvz/ba grouped per key head
  bool per_head_query_gate = true; // spec 6.2: q_proj rows are [query_h | gate_h] per head
  bool partial_rope = true;        // spec 6.3: rotate only the first rotary_dim dims, inv_freq over them
  bool moe_renormalise_topk = true;  // spec 6.11: softmax over all experts, top-k, renormalise when asked
  bool qwen4exp_ple = true;          // spec 7.3: the PLE n-gram layer adds to the streams
  bool sparse_selection = true;      // spec 7.3, docs/qsa.md: past the budget, only the top blocks are seen
  bool mtp_one_hidden_norm = true;   // spec 7.7: the head norms all the streams of its hidden row at once
  // Not a rule but the bf16 precision's one rounding (runtime/kernels.h):
  // the input of every matrix product rounded to bf16; the sums stay exact.
  bool bf16_product_inputs = false;
};

class ReferenceForward {
 public:
  ReferenceForward(const ModelConfig& c, const WeightSet& w, Rules rules) : c_(c), w_(w), rules_(rules) {
    layers_.resize(c.n_layers + 1);  // the last: qwen4exp's MTP head's layer
  }

  // Consumes tokens one at a time; returns the logits after the last one.
  std::vector<double> run(const std::vector<int32_t>& tokens) {
    std::vector<double> x;
    for (size_t t = 0; t < tokens.size(); ++t) x = step(tokens[t], position_++);
    return head(x);
  }
  // Consumes one more token; returns the logits after it, or nothing when
  // they are not wanted (the reference logits tool, reference_logits.cpp).
  std::vector<double> next(int32_t token, bool want_logits = true) {
    std::vector<double> x = step(token, position_++);
    return want_logits ? head(std::move(x)) : std::vector<double>{};
  }

  // qwen4exp's MTP head (spec 7.7), its `mtp.*` tensors read from the
  // checkpoint (WeightSet binds the trunk's only).
  void bind_head(const Checkpoint& checkpoint) { head_ = &checkpoint; }
  // qwen4exp: the trunk's streams [hc_count * H] after one more token (the
  // head's hidden row of that position) and the logits they give.
  std::vector<double> next_streams(int32_t token) { return step(token, position_++); }
  std::vector<double> logits_of(std::vector<double> streams) const { return head(std::move(streams)); }
  // The head at its next position p (from 0): the pair (streams of position
  // p - 1, token p); returns its streams before its own mixer, the hidden
  // row of the next depth. Its layer keeps K, V and the indexer's raw keys
  // of every position it has run, as a trunk layer does.
  std::vector<double> mtp_step(const std::vector<double>& prev, int32_t token) {
    const int64_t H = c_.hidden_size, S = c_.hc_count, l = c_.n_layers;
    std::vector<float> row(H);
    const TensorView& emb = w_.embed();
    convert_to_f32(emb.dtype, static_cast<const char*>(emb.data) + token * H * dtype_size(emb.dtype), H, row.data());
    std::vector<double> e(row.begin(), row.end());
    rms(e.data(), H, mat(tensor("mtp.pre_fc_norm_embedding.weight")), true);
    e = matvec(tensor("mtp.fc_embedding.weight"), e);
    std::vector<double> g = prev;
    const std::vector<double> nw = mat(tensor("mtp.pre_fc_norm_hidden.weight"));
    if (rules_.mtp_one_hidden_norm) {
      rms(g.data(), S * H, nw, true);
    } else {  // the other sources' reading: each stream apart
      for (int64_t s = 0; s < S; ++s) rms(&g[s * H], H, std::vector<double>(nw.begin() + s * H, nw.begin() + (s + 1) * H), true);
    }
    std::vector<double> h(S * H);
    for (int64_t s = 0; s < S; ++s) {
      auto f = matvec(tensor("mtp.fc_hidden.weight"), std::vector<double>(g.begin() + s * H, g.begin() + (s + 1) * H));
      for (int64_t i = 0; i < H; ++i) h[s * H + i] = f[i] + e[i];
    }
    return layer_qwen4exp(l, "mtp.layers.0.", std::move(h), mtp_position_++);
  }
  std::vector<double> mtp_logits(const std::vector<double>& streams) const {
    return matvec(c_.tie_word_embeddings ? w_.embed() : w_.lm_head(),
                  mixer("mtp.hyper_connection_mixer.", streams, nullptr));
  }

 private:
  struct LayerState {
    std::vector<std::vector<double>> k, v;       // per position: [n_kv * d]
    std::vector<std::vector<double>> conv_hist;  // previous pre-conv inputs
    std::vector<double> S;                       // [n_v, dk, dv]
    std::vector<std::vector<double>> raw;        // qsa raw indexer keys
    std::vector<std::vector<double>> ple_conv;   // qwen4exp PLE: every position's conv input
  };

  std::vector<double> head(std::vector<double> x) const {
    if (c_.arch == Arch::kQwen4Exp) {
      x = mixer(c_.tensor_prefix + "hyper_connection_mixer.", x, nullptr);
      return matvec(c_.tie_word_embeddings ? w_.embed() : w_.lm_head(), x);
    }
    rms(x.data(), c_.hidden_size, mat(w_.final_norm()), c_.norm_weight_offset);
    return matvec(c_.tie_word_embeddings ? w_.embed() : w_.lm_head(), x);
  }

  std::vector<double> mat(const TensorView& t) const {
    std::vector<float> f(t.numel());
    convert_to_f32(t.dtype, t.data, t.numel(), f.data());
    return std::vector<double>(f.begin(), f.end());
  }
  std::vector<double> matvec(const MatrixView& m, const std::vector<double>& x_in) const {
    std::vector<float> f = to_f32(m);
    std::vector<double> x = x_in;
    if (rules_.bf16_product_inputs) {
      for (double& v : x) v = bf16_to_f32(f32_to_bf16(static_cast<float>(v)));
      for (float& v : f) v = bf16_to_f32(f32_to_bf16(v));
    }
    std::vector<double> y(m.rows, 0.0);
    for (int64_t i = 0; i < m.rows; ++i)
      for (int64_t j = 0; j < m.cols; ++j) y[i] += double(f[i * m.cols + j]) * x[j];
    return y;
  }
  std::vector<double> matvec(const TensorView& t, const std::vector<double>& x) const { return matvec(as_matrix(t), x); }
  // Layer l's tensor; l == n_layers is the MTP head's layer.
  bool is_head(int64_t l) const { return l == c_.n_layers; }
  const TensorView& tensor(const std::string& name) const {
    if (name.rfind("mtp.", 0) != 0) return w_.get(name);
    const TensorView* t = head_ ? head_->find(name) : nullptr;
    if (!t) std::fprintf(stderr, "ReferenceForward: no head tensor %s (bind_head first)\n", name.c_str()), std::abort();
    return *t;
  }
  const TensorView& lt(int64_t l, const std::string& s) const {
    return is_head(l) ? tensor("mtp.layers.0." + s) : w_.layer(l, s);
  }
  std::vector<double> lw(int64_t l, const std::string& s) const { return mat(lt(l, s)); }
  std::vector<double> proj(int64_t l, const std::string& s, const std::vector<double>& x) const {
    return matvec(lt(l, s), x);
  }

  static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
  static double silu(double x) { return x * sigmoid(x); }

  void rms(double* x, int64_t n, const std::vector<double>& w, bool offset) const {
    double ms = 0;
    for (int64_t i = 0; i < n; ++i) ms += x[i] * x[i];
    const double inv = 1.0 / std::sqrt(ms / n + c_.rms_norm_eps);
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] * inv * (offset ? 1.0 + w[i] : w[i]);
  }

  void rope(double* x, int64_t d, int64_t pos) const { rope_n(x, rules_.partial_rope ? c_.rotary_dim() : d, pos); }

  std::vector<double> attention(int64_t l, const std::vector<double>& x, int64_t pos) {
    const int64_t nh = c_.n_heads, nkv = c_.n_kv_heads, d = c_.head_dim;
    const bool offset = c_.norm_weight_offset;
    std::vector<double> p = proj(l, "self_attn.q_proj.weight", x), q(nh * d), gate(nh * d, 1e9);
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t i = 0; i < d; ++i) {
        if (!c_.attention_gated) {
          q[h * d + i] = p[h * d + i];
        } else if (rules_.per_head_query_gate) {
          q[h * d + i] = p[h * 2 * d + i];
          gate[h * d + i] = p[h * 2 * d + d + i];
        } else {
          q[h * d + i] = p[h * d + i];
          gate[h * d + i] = p[nh * d + h * d + i];
        }
      }
    std::vector<double> k = proj(l, "self_attn.k_proj.weight", x), v = proj(l, "self_attn.v_proj.weight", x);
    auto qn = lw(l, "self_attn.q_norm.weight"), kn = lw(l, "self_attn.k_norm.weight");
    for (int64_t h = 0; h < nh; ++h) rms(&q[h * d], d, qn, offset), rope(&q[h * d], d, pos);
    for (int64_t g = 0; g < nkv; ++g) rms(&k[g * d], d, kn, offset), rope(&k[g * d], d, pos);
    LayerState& st = layers_[l];
    st.k.push_back(k);
    st.v.push_back(v);
    std::vector<bool> visible(pos + 1, true);
    if (is_head(l) || c_.layer_types[l] == LayerType::kSparseAttention) visible = select_blocks(l, x, pos);
    std::vector<double> o(nh * d, 0.0);
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t g = h / (nh / nkv);
      std::vector<double> s(pos + 1, -INFINITY);
      double mx = -INFINITY;
      for (int64_t t = 0; t <= pos; ++t) {
        if (!visible[t]) continue;
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += q[h * d + i] * st.k[t][g * d + i];
        s[t] = dot / std::sqrt(double(d));
        mx = std::max(mx, s[t]);
      }
      double sum = 0;
      for (int64_t t = 0; t <= pos; ++t) sum += (s[t] = visible[t] ? std::exp(s[t] - mx) : 0.0);
      for (int64_t t = 0; t <= pos; ++t)
        for (int64_t i = 0; i < d; ++i) o[h * d + i] += s[t] / sum * st.v[t][g * d + i];
    }
    if (c_.attention_gated)
      for (int64_t i = 0; i < nh * d; ++i) o[i] *= sigmoid(gate[i]);
    return proj(l, "self_attn.o_proj.weight", o);
  }

  std::vector<bool> select_blocks(int64_t l, const std::vector<double>& x, int64_t pos) {
    const int64_t m = c_.index_compress_ratio, dI = c_.index_head_dim, HI = c_.index_n_heads;
    LayerState& st = layers_[l];
    // One projection: the query heads, then the key.
    auto qk = proj(l, "self_attn.indexer.index_qk_proj.weight", x);
    std::vector<double> iq(qk.begin(), qk.begin() + HI * dI);
    st.raw.emplace_back(qk.begin() + HI * dI, qk.end());
    auto qn = lw(l, "self_attn.indexer.q_layernorm.weight");
    for (int64_t h = 0; h < HI; ++h) rms(&iq[h * dI], dI, qn, true);
    const int64_t closed = (pos + 1) / m;
    std::vector<bool> visible(pos + 1, false);
    std::vector<int64_t> chosen;
    if (closed <= c_.index_topk_blocks || !rules_.sparse_selection) {
      for (int64_t b = 0; b < closed; ++b) chosen.push_back(b);
    } else {
      auto kn = lw(l, "self_attn.indexer.k_layernorm.weight");
      const int64_t rot = std::min(dI, c_.rotary_dim());
      std::vector<std::pair<double, int64_t>> scored;
      for (int64_t b = 0; b < closed; ++b) {
        std::vector<double> kb(dI, 0.0);
        for (int64_t s = b * m; s < (b + 1) * m; ++s)
          for (int64_t i = 0; i < dI; ++i) kb[i] += st.raw[s][i] / m;
        rms(kb.data(), dI, kn, true);
        rope_n(kb.data(), rot, b * m);
        double score = 0;
        for (int64_t h = 0; h < HI; ++h) {
          std::vector<double> qh(iq.begin() + h * dI, iq.begin() + (h + 1) * dI);
          rope_n(qh.data(), rot, pos);
          double dot = 0;
          for (int64_t i = 0; i < dI; ++i) dot += qh[i] * kb[i];
          score += std::max(dot, 0.0);  // the heads count alike
        }
        scored.emplace_back(score / std::sqrt(double(dI)), b);
      }
      std::stable_sort(scored.begin(), scored.end(), [](auto& a, auto& b) { return a.first > b.first; });
      for (int64_t i = 0; i < c_.index_topk_blocks; ++i) chosen.push_back(scored[i].second);
    }
    if (closed * m <= pos) chosen.push_back(pos / m);
    for (int64_t b : chosen)
      for (int64_t t = b * m; t < std::min((b + 1) * m, pos + 1); ++t) visible[t] = true;
    return visible;
  }

  void rope_n(double* x, int64_t rot, int64_t pos) const {
    const int64_t half = rot / 2;
    for (int64_t i = 0; i < half; ++i) {
      const double a = pos * std::pow(c_.rope_theta, -2.0 * i / rot);
      const double x0 = x[i], x1 = x[i + half];
      x[i] = x0 * std::cos(a) - x1 * std::sin(a);
      x[i + half] = x1 * std::cos(a) + x0 * std::sin(a);
    }
  }

  std::vector<double> delta_net(int64_t l, const std::vector<double>& x) {
    const int64_t nk = c_.lin_n_key_heads, nv = c_.lin_n_value_heads, dk = c_.lin_key_head_dim,
                  dv = c_.lin_value_head_dim, r = nv / nk, K = c_.conv_kernel;
    const int64_t kd = nk * dk, vd = nv * dv, cd = 2 * kd + vd;
    std::vector<double> m(cd), z(vd), b(nv), a(nv);
    if (c_.arch == Arch::kQwen35 || c_.arch == Arch::kQwen35Moe || c_.arch == Arch::kQwen4Exp) {
      m = proj(l, "linear_attn.in_proj_qkv.weight", x);
      z = proj(l, "linear_attn.in_proj_z.weight", x);
      b = proj(l, "linear_attn.in_proj_b.weight", x);
      a = proj(l, "linear_attn.in_proj_a.weight", x);
    } else {
      auto u = proj(l, "linear_attn.in_proj_qkvz.weight", x), ba = proj(l, "linear_attn.in_proj_ba.weight", x);
      if (rules_.ungroup_qwen3_next) {
        const int64_t gsz = 2 * dk + 2 * r * dv;
        for (int64_t j = 0; j < nk; ++j) {
          for (int64_t i = 0; i < dk; ++i) m[j * dk + i] = u[j * gsz + i], m[kd + j * dk + i] = u[j * gsz + dk + i];
          for (int64_t i = 0; i < r; ++i) {
            for (int64_t e = 0; e < dv; ++e) {
              m[2 * kd + (j * r + i) * dv + e] = u[j * gsz + 2 * dk + i * dv + e];
              z[(j * r + i) * dv + e] = u[j * gsz + 2 * dk + (r + i) * dv + e];
            }
            b[j * r + i] = ba[j * 2 * r + i];
            a[j * r + i] = ba[j * 2 * r + r + i];
          }
        }
      } else {  // the mistake: read the grouped projection as flat [q | k | v | z]
        std::copy(u.begin(), u.begin() + cd, m.begin());
        std::copy(u.begin() + cd, u.end(), z.begin());
        std::copy(ba.begin(), ba.begin() + nv, b.begin());
        std::copy(ba.begin() + nv, ba.end(), a.begin());
      }
    }
    LayerState& st = layers_[l];
    if (st.S.empty()) st.S.assign(nv * dk * dv, 0.0), st.conv_hist.assign(K - 1, std::vector<double>(cd, 0.0));
    auto cw = lw(l, "linear_attn.conv1d.weight");
    std::vector<double> y(cd);
    for (int64_t ch = 0; ch < cd; ++ch) {
      double s = 0;
      for (int64_t j = 0; j < K - 1; ++j) s += cw[ch * K + j] * st.conv_hist[j][ch];
      s += cw[ch * K + K - 1] * m[ch];
      y[ch] = silu(s);
    }
    st.conv_hist.erase(st.conv_hist.begin());
    st.conv_hist.push_back(m);
    auto alog = lw(l, "linear_attn.A_log"), dtb = lw(l, "linear_attn.dt_bias"), nw = lw(l, "linear_attn.norm.weight");
    std::vector<double> out(vd);
    for (int64_t h = 0; h < nv; ++h) {
      const int64_t kh = h / r;
      std::vector<double> q(y.begin() + kh * dk, y.begin() + (kh + 1) * dk);
      std::vector<double> k(y.begin() + kd + kh * dk, y.begin() + kd + (kh + 1) * dk);
      const double* v = &y[2 * kd + h * dv];
      double qs = 0, ks = 0;
      for (int64_t i = 0; i < dk; ++i) qs += q[i] * q[i], ks += k[i] * k[i];
      for (int64_t i = 0; i < dk; ++i) q[i] = q[i] / std::sqrt(qs + 1e-6) / std::sqrt(double(dk)), k[i] /= std::sqrt(ks + 1e-6);
      const double sp = a[h] + dtb[h] > 20 ? a[h] + dtb[h] : std::log1p(std::exp(a[h] + dtb[h]));
      const double alpha = std::exp(-std::exp(alog[h]) * sp), beta = sigmoid(b[h]);
      double* S = &st.S[h * dk * dv];
      for (int64_t i = 0; i < dk * dv; ++i) S[i] *= alpha;
      std::vector<double> mem(dv, 0.0), o(dv, 0.0);
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t e = 0; e < dv; ++e) mem[e] += k[i] * S[i * dv + e];
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t e = 0; e < dv; ++e) S[i * dv + e] += k[i] * beta * (v[e] - mem[e]);
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t e = 0; e < dv; ++e) o[e] += q[i] * S[i * dv + e];
      rms(o.data(), dv, nw, false);
      for (int64_t e = 0; e < dv; ++e)
        out[h * dv + e] = o[e] * (c_.gdn_gate_sigmoid ? sigmoid(z[h * dv + e]) : silu(z[h * dv + e]));
    }
    return proj(l, "linear_attn.out_proj.weight", out);
  }

  std::vector<double> swiglu(const MatrixView& g, const MatrixView& u, const MatrixView& d,
                             const std::vector<double>& x) const {
    auto a = matvec(g, x), b = matvec(u, x);
    for (size_t i = 0; i < a.size(); ++i) a[i] = silu(a[i]) * b[i];
    return matvec(d, a);
  }

  // Expert e of layer l; the head's as the checkpoint holds them (fused:
  // gate_up_proj [E, 2I, H], down_proj [E, H, I]; or one tensor each).
  ExpertWeights expert(int64_t l, int64_t e) const {
    if (!is_head(l)) return w_.expert(l, e);
    const std::string X = "mtp.layers.0.mlp.experts.";
    const TensorView* gu = head_->find(X + "gate_up_proj");
    if (!gu) {
      const std::string P = X + std::to_string(e) + ".";
      return {as_matrix(tensor(P + "gate_proj.weight")), as_matrix(tensor(P + "up_proj.weight")),
              as_matrix(tensor(P + "down_proj.weight"))};
    }
    const TensorView& dn = tensor(X + "down_proj");
    const int64_t I = c_.moe_intermediate_size, H = c_.hidden_size, sz = dtype_size(gu->dtype);
    const char* g = static_cast<const char*>(gu->data) + e * 2 * I * H * sz;
    const char* d = static_cast<const char*>(dn.data) + e * H * I * sz;
    return {MatrixView{gu->dtype, I, H, g}, MatrixView{gu->dtype, I, H, g + I * H * sz}, MatrixView{dn.dtype, H, I, d}};
  }

  std::vector<double> ffn(int64_t l, const std::vector<double>& x) const {
    if (!(is_head(l) ? c_.n_experts > 0 : c_.layer_is_moe(l)))
      return swiglu(as_matrix(lt(l, "mlp.gate_proj.weight")), as_matrix(lt(l, "mlp.up_proj.weight")),
                    as_matrix(lt(l, "mlp.down_proj.weight")), x);
    const int64_t E = c_.n_experts, top = c_.n_experts_per_tok;
    auto logits = proj(l, "mlp.gate.weight", x);
    std::vector<double> p(E);
    const double mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(logits[e] - mx);
    for (auto& v : p) v /= sum;
    std::vector<int64_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    std::vector<double> weight(top);
    double picked = 0;
    for (int64_t i = 0; i < top; ++i) picked += p[order[i]];
    for (int64_t i = 0; i < top; ++i) {
      const bool renorm = rules_.moe_renormalise_topk ? c_.norm_topk_prob : !c_.norm_topk_prob;
      weight[i] = renorm ? p[order[i]] / picked : p[order[i]];
    }
    std::vector<double> y(c_.hidden_size, 0.0);
    for (int64_t i = 0; i < top; ++i) {
      const ExpertWeights ew = expert(l, order[i]);
      auto out = swiglu(ew.gate, ew.up, ew.down, x);
      for (int64_t h = 0; h < c_.hidden_size; ++h) y[h] += weight[i] * out[h];
    }
    if (c_.shared_expert_intermediate_size > 0) {
      auto sh = swiglu(as_matrix(lt(l, "mlp.shared_expert.gate_proj.weight")),
                       as_matrix(lt(l, "mlp.shared_expert.up_proj.weight")),
                       as_matrix(lt(l, "mlp.shared_expert.down_proj.weight")), x);
      const double g = sigmoid(proj(l, "mlp.shared_expert_gate.weight", x)[0]);
      for (int64_t h = 0; h < c_.hidden_size; ++h) y[h] += g * sh[h];
    }
    return y;
  }

  // qwen4exp (spec 7.3). Per-stream RMSNorm (1 + w) of the streams h [S * H].
  std::vector<double> streams_normed(const std::vector<double>& h, const std::vector<double>& w) const {
    const int64_t H = c_.hidden_size;
    std::vector<double> n = h;
    for (int64_t s = 0; s < c_.hc_count; ++s) {
      std::vector<double> ws(w.begin() + s * H, w.begin() + (s + 1) * H);
      rms(&n[s * H], H, ws, true);
    }
    return n;
  }

  // A mixer: the layer input [H] from the streams; with `inject`, also the
  // weight of the layer's output in each stream.
  std::vector<double> mixer(const std::string& p, const std::vector<double>& h, std::vector<double>* inject) const {
    const int64_t H = c_.hidden_size, S = c_.hc_count;
    auto n = streams_normed(h, mat(tensor(p + "hc_norm.weight")));
    auto d = matvec(tensor(p + "input_mix_weight_down.weight"), n);
    for (double& v : d) v = silu(v / S);
    auto u = matvec(tensor(p + "input_mix_weight_up.weight"), d);
    std::vector<double> x(H, 0.0);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t i = 0; i < H; ++i) x[i] += sigmoid(u[s * H + i]) * n[s * H + i];
    for (double& v : x) v /= S;
    if (inject) {
      *inject = matvec(tensor(p + "block_inject_weight.weight"), n);
      for (double& v : *inject) v = 2.0 * sigmoid(v / S);
    }
    return x;
  }

  // The PLE n-gram layer of layer l (PLE layer number k) at pos, into h.
  void ple(int64_t l, int64_t k, std::vector<double>& h, int64_t pos) {
    const int64_t H = c_.hidden_size, S = c_.hc_count, W = S * H, n_ctx = c_.ngram_size - 1;
    const int64_t hpn = c_.heads_per_ngram, K = c_.ple_conv_kernel, dil = c_.ngram_size;
    const std::string E = "ple.ple_embedding.";
    auto ints = [&](const std::string& name) {
      const TensorView& t = w_.layer(l, E + name);
      std::vector<int64_t> v(t.numel());
      std::memcpy(v.data(), t.data, v.size() * 8);
      return v;
    };
    const auto mult = ints("layer_multipliers"), vocab = ints("ngram_heads_vocab_sizes"),
               offset = ints("ngram_heads_offsets");
    std::vector<uint64_t> ctx(n_ctx);
    bool cut = false;
    for (int64_t j = 0; j < n_ctx; ++j) {
      const int64_t p = pos - 1 - j;
      cut = cut || p < 0 || tokens_[p] == c_.eos_token_id;
      ctx[j] = static_cast<uint64_t>(cut ? c_.eos_token_id : tokens_[p]);
    }
    const TensorView& shard0 = w_.layer(l, E + "ngram_embedding.shard_0.weight");
    const int64_t shard_rows = shard0.shape[0], dim = shard0.shape[1];
    std::vector<double> e;
    uint64_t mixed = static_cast<uint64_t>(tokens_[pos]) * static_cast<uint64_t>(mult[0]);
    for (int64_t o = 0; o < n_ctx; ++o) {
      mixed ^= ctx[o] * static_cast<uint64_t>(mult[o + 1]);
      for (int64_t g = o * hpn; g < (o + 1) * hpn; ++g) {
        const int64_t row = static_cast<int64_t>(mixed % static_cast<uint64_t>(vocab[g])) + offset[g];
        const TensorView& t = w_.layer(l, E + "ngram_embedding.shard_" + std::to_string(row / shard_rows) + ".weight");
        std::vector<float> f(dim);
        convert_to_f32(t.dtype, static_cast<const char*>(t.data) + (row % shard_rows) * dim * dtype_size(t.dtype), dim,
                       f.data());
        e.insert(e.end(), f.begin(), f.end());
      }
    }
    auto key = streams_normed(proj(l, "ple.key_proj.weight", e), lw(l, "ple.norm_key.weight"));
    auto value = proj(l, "ple.value_proj.weight", e);
    auto query = streams_normed(h, lw(l, "ple.norm_query.weight"));
    std::vector<double> gated(W);
    for (int64_t s = 0; s < S; ++s) {
      double t = 0;
      for (int64_t i = 0; i < H; ++i) t += key[s * H + i] * query[s * H + i];
      t /= std::sqrt(double(H));
      const double m = std::sqrt(std::max(std::fabs(t), 1e-6));
      const double g = sigmoid(t > 0 ? m : t < 0 ? -m : 0.0);
      for (int64_t i = 0; i < H; ++i) gated[s * H + i] = g * value[i];
    }
    LayerState& st = layers_[l];
    st.ple_conv.push_back(streams_normed(gated, lw(l, "ple.norm_conv.weight")));
    auto cw = lw(l, "ple.conv1d.weight");
    for (int64_t ch = 0; ch < W; ++ch) {
      double acc = 0;
      for (int64_t j = 0; j < K; ++j) {
        const int64_t p = pos - (K - 1 - j) * dil;
        if (p >= 0) acc += cw[ch * K + j] * st.ple_conv[p][ch];
      }
      if (rules_.qwen4exp_ple) h[ch] += gated[ch] + silu(acc);
    }
  }

  std::vector<double> step_qwen4exp(std::vector<double> e, int32_t token, int64_t pos) {
    const int64_t H = c_.hidden_size, S = c_.hc_count;
    tokens_.push_back(token);
    std::vector<double> h(S * H);
    for (int64_t s = 0; s < S; ++s) std::copy(e.begin(), e.end(), h.begin() + s * H);
    for (int64_t l = 0; l < c_.n_layers; ++l) {
      for (size_t k = 0; k < c_.ple_layers.size(); ++k)
        if (c_.ple_layers[k] == l) ple(l, static_cast<int64_t>(k), h, pos);
      h = layer_qwen4exp(l, c_.tensor_prefix + "layers." + std::to_string(l) + ".", std::move(h), pos);
    }
    return h;
  }

  // One layer over the streams h (its tensors under L): mixer, GDN or QSA,
  // inject; mixer, feed-forward, inject.
  std::vector<double> layer_qwen4exp(int64_t l, const std::string& L, std::vector<double> h, int64_t pos) {
    const int64_t H = c_.hidden_size, S = c_.hc_count;
    std::vector<double> inject;
    auto x = mixer(L + "attn_hyper_connection.", h, &inject);
    auto y = !is_head(l) && c_.layer_types[l] == LayerType::kLinearAttention ? delta_net(l, x) : attention(l, x, pos);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t i = 0; i < H; ++i) h[s * H + i] += inject[s] * y[i];
    x = mixer(L + "mlp_hyper_connection.", h, &inject);
    y = ffn(l, x);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t i = 0; i < H; ++i) h[s * H + i] += inject[s] * y[i];
    return h;
  }

  std::vector<double> step(int32_t token, int64_t pos) {
    const int64_t H = c_.hidden_size;
    const TensorView& emb = w_.embed();
    std::vector<float> row(H);
    convert_to_f32(emb.dtype, static_cast<const char*>(emb.data) + token * H * dtype_size(emb.dtype), H, row.data());
    std::vector<double> x(row.begin(), row.end());
    if (c_.arch == Arch::kQwen4Exp) return step_qwen4exp(std::move(x), token, pos);
    for (int64_t l = 0; l < c_.n_layers; ++l) {
      std::vector<double> h = x;
      rms(h.data(), H, lw(l, "input_layernorm.weight"), c_.norm_weight_offset);
      auto mix = c_.layer_types[l] == LayerType::kLinearAttention ? delta_net(l, h) : attention(l, h, pos);
      for (int64_t i = 0; i < H; ++i) x[i] += mix[i];
      h = x;
      rms(h.data(), H, lw(l, "post_attention_layernorm.weight"), c_.norm_weight_offset);
      auto f = ffn(l, h);
      for (int64_t i = 0; i < H; ++i) x[i] += f[i];
    }
    return x;
  }

  const ModelConfig& c_;
  const WeightSet& w_;
  Rules rules_;
  std::vector<LayerState> layers_;
  std::vector<int32_t> tokens_;  // qwen4exp: every token so far (the PLE layer's n-grams)
  int64_t position_ = 0;
  const Checkpoint* head_ = nullptr;  // qwen4exp's MTP head's tensors
  int64_t mtp_position_ = 0;
};

}  // namespace sb::testing
