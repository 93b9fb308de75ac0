// Gated full attention (docs/model-spec.md 2.4), dense Qwen3 attention (no gate,
// plain norms), and indexed sparse attention (docs/qsa.md), which is gated
// attention restricted to the key blocks an indexer selects.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/activations.h"
#include "model/transformer.h"

namespace sb {

void Transformer::attention_layer(const LayerWeights& w, ForwardCall& call, const float* xn, float* out) const {
  const ModelConfig& c = config_;
  const AttentionWeights& a = w.attn;
  const int64_t T = call.rows, nh = c.n_heads, nkv = c.n_kv_heads, d = c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);

  std::vector<float> proj(T * a.q.rows);
  kernels_->matmul(xn, T, a.q, proj.data());
  std::vector<float> q(T * nh * d), gate;
  if (c.attention_gated) {
    // q_proj rows are [query_h | gate_h] per head, not two global halves.
    gate.resize(T * nh * d);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < nh; ++h) {
        const float* src = proj.data() + (t * nh + h) * 2 * d;
        std::copy(src, src + d, q.data() + (t * nh + h) * d);
        std::copy(src + d, src + 2 * d, gate.data() + (t * nh + h) * d);
      }
  } else {
    q = std::move(proj);
  }
  std::vector<float> k(T * nkv * d), v(T * nkv * d);
  kernels_->matmul(xn, T, a.k, k.data());
  kernels_->matmul(xn, T, a.v, v.data());
  kernels_->rms_norm(q.data(), T * nh, d, a.q_norm.data(), eps, c.norm_weight_offset, q.data());
  kernels_->rms_norm(k.data(), T * nkv, d, a.k_norm.data(), eps, c.norm_weight_offset, k.data());
  kernels_->rope(q.data(), T, nh, d, c.rotary_dim(), call.positions.data(), c.rope_theta);
  kernels_->rope(k.data(), T, nkv, d, c.rotary_dim(), call.positions.data(), c.rope_theta);
  std::vector<std::vector<uint8_t>> masks;
  if (w.type == LayerType::kSparseAttention) sparse_selection(w, call, xn, &masks);
  std::vector<float> o(T * nh * d);
  for (size_t i = 0; i < call.sequences.size(); ++i) {
    const SequenceRows& seq = call.sequences[i];
    State& st = *seq.state;
    st.append_rows(w.comp_k, std::span<const float>(k).subspan(seq.first_row * nkv * d, seq.rows * nkv * d));
    st.append_rows(w.comp_v, std::span<const float>(v).subspan(seq.first_row * nkv * d, seq.rows * nkv * d));
    AttentionInput in;
    in.rows = seq.rows;
    in.first_pos = seq.first_pos;
    in.n_heads = nh;
    in.n_kv = nkv;
    in.head_dim = d;
    in.q = q.data() + seq.first_row * nh * d;
    in.k = st.buffer(w.comp_k).data();
    in.v = st.buffer(w.comp_v).data();
    in.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    if (w.type == LayerType::kSparseAttention) {
      in.block_mask = masks[i].data();
      in.mask_block = c.index_compress_ratio;
      in.mask_stride = (seq.first_pos + seq.rows + c.index_compress_ratio - 1) / c.index_compress_ratio;
    }
    kernels_->attention(in, o.data() + seq.first_row * nh * d);
  }
  if (c.attention_gated)
    for (int64_t i = 0; i < T * nh * d; ++i) o[i] *= sigmoid(gate[i]);
  kernels_->matmul(o.data(), T, a.o, out);
}

void Transformer::pooled_key(const LayerWeights& w, const float* raw, int64_t b, float* out) const {
  const ModelConfig& c = config_;
  const int64_t m = c.index_compress_ratio, dI = c.index_head_dim;
  std::fill(out, out + dI, 0.0f);
  for (int64_t s = b * m; s < (b + 1) * m; ++s)
    for (int64_t i = 0; i < dI; ++i) out[i] += raw[s * dI + i];
  for (int64_t i = 0; i < dI; ++i) out[i] /= static_cast<float>(m);
  kernels_->rms_norm(out, 1, dI, w.attn.index_k_norm.data(), static_cast<float>(c.rms_norm_eps), true, out);
  const int64_t pos = b * m;
  kernels_->rope(out, 1, 1, dI, std::min(dI, c.rotary_dim()), &pos, c.rope_theta);
}

Status Transformer::verify_state(const State& state) const {
  if (!(state.schema() == schema_)) return Status::invalid("state was made for another model");
  SB_RETURN_IF_ERROR(state.check_consistent());
  // Derived components must be what their sources give: a pooled table built
  // from other tokens' keys is as wrong as one of the wrong length.
  const int64_t dI = config_.index_head_dim;
  std::vector<float> want(dI);
  for (const LayerWeights& w : layers_) {
    if (w.comp_index_pooled < 0) continue;
    const std::vector<float>& raw = state.buffer(w.comp_index_raw);
    const std::vector<float>& pooled = state.buffer(w.comp_index_pooled);
    for (uint64_t b = 0; b < state.rows(w.comp_index_pooled); ++b) {
      pooled_key(w, raw.data(), static_cast<int64_t>(b), want.data());
      if (std::memcmp(want.data(), pooled.data() + b * dI, dI * sizeof(float)) != 0)
        return Status::corruption("component " + schema_.components[w.comp_index_pooled].name + " row " +
                                  std::to_string(b) + " does not derive from the raw indexer keys of its tokens");
    }
  }
  return Status::ok();
}

void Transformer::sparse_selection(const LayerWeights& w, ForwardCall& call, const float* xn,
                                   std::vector<std::vector<uint8_t>>* masks) const {
  const ModelConfig& c = config_;
  const AttentionWeights& a = w.attn;
  const int64_t T = call.rows, m = c.index_compress_ratio, dI = c.index_head_dim, HI = c.index_n_heads;
  const int64_t rot = std::min(dI, c.rotary_dim());

  // Raw keys are stored per token, before any norm or RoPE.
  std::vector<float> raw(T * dI);
  kernels_->matmul(xn, T, a.index_k, raw.data());
  for (const SequenceRows& seq : call.sequences) {
    State& st = *seq.state;
    st.append_rows(w.comp_index_raw, std::span<const float>(raw).subspan(seq.first_row * dI, seq.rows * dI));
    // Close every block whose last token is in this call: its pooled key
    // depends only on the raw keys of its own m tokens.
    const int64_t end = seq.first_pos + seq.rows;
    const std::vector<float>& all_raw = st.buffer(w.comp_index_raw);
    for (int64_t b = static_cast<int64_t>(st.rows(w.comp_index_pooled)); (b + 1) * m <= end; ++b) {
      std::vector<float> pooled(dI);
      pooled_key(w, all_raw.data(), b, pooled.data());
      st.append_rows(w.comp_index_pooled, pooled);
    }
  }

  std::vector<float> iq(T * HI * dI), iw(T * HI);
  kernels_->matmul(xn, T, a.index_q, iq.data());
  kernels_->matmul(xn, T, a.index_w, iw.data());
  kernels_->rope(iq.data(), T, HI, dI, rot, call.positions.data(), c.rope_theta);
  masks->resize(call.sequences.size());
  for (size_t i = 0; i < call.sequences.size(); ++i) {
    const SequenceRows& seq = call.sequences[i];
    sparse_mask(w, seq, iq.data() + seq.first_row * HI * dI, iw.data() + seq.first_row * HI, &(*masks)[i]);
  }
}

// The blocks each row of one sequence attends to: its top-k closed blocks by
// indexer score (all of them while there are at most k) and its own open one.
void Transformer::sparse_mask(const LayerWeights& w, const SequenceRows& seq, const float* iq, const float* iw,
                              std::vector<uint8_t>* mask) const {
  const ModelConfig& c = config_;
  const int64_t T = seq.rows, m = c.index_compress_ratio, dI = c.index_head_dim, HI = c.index_n_heads;
  const float w_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(HI)));
  const float s_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dI)));
  const std::vector<float>& pooled = seq.state->buffer(w.comp_index_pooled);
  const int64_t end = seq.first_pos + T;
  const int64_t stride = (end + m - 1) / m;
  mask->assign(T * stride, 0);
  std::vector<std::pair<float, int64_t>> scored;
  for (int64_t r = 0; r < T; ++r) {
    const int64_t t = seq.first_pos + r;
    const int64_t closed = (t + 1) / m;
    uint8_t* row = mask->data() + r * stride;
    if (closed <= c.index_topk_blocks) {
      std::fill(row, row + closed, 1);
    } else {
      scored.clear();
      for (int64_t b = 0; b < closed; ++b) {
        float score = 0.0f;
        for (int64_t h = 0; h < HI; ++h) {
          float qk = 0.0f;
          const float* qh = iq + (r * HI + h) * dI;
          for (int64_t i = 0; i < dI; ++i) qk = std::fma(qh[i], pooled[b * dI + i], qk);
          score = std::fma(iw[r * HI + h] * w_scale, std::max(qk, 0.0f), score);
        }
        scored.emplace_back(score * s_scale, b);
      }
      // Highest score first, ties to the lower block index.
      std::partial_sort(scored.begin(), scored.begin() + c.index_topk_blocks, scored.end(),
                        [](const auto& x, const auto& y) { return x.first > y.first || (x.first == y.first && x.second < y.second); });
      for (int64_t i = 0; i < c.index_topk_blocks; ++i) row[scored[i].second] = 1;
    }
    if (closed * m <= t) row[t / m] = 1;  // the query's own open block
  }
}

}  // namespace sb
