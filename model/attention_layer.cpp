// Gated full attention (docs/model-spec.md 2.4), dense Qwen3 attention (no gate,
// plain norms), and qwen4exp's QSA attention (docs/qsa.md), which is gated
// attention restricted to the key blocks an indexer selects.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/transformer.h"

namespace sb {

void Transformer::attention_layer(const LayerWeights& w, ForwardCall& call, const float* xn, float* out,
                                  bool keys_only) const {
  const ModelConfig& c = config_;
  const AttentionWeights& a = w.attn;
  const int64_t T = call.rows, nh = c.n_heads, nkv = c.n_kv_heads, d = c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);

  using P = AttentionWeights;
  const bool sparse = w.type == LayerType::kSparseAttention;
  Rows proj(T * a.in.parts[P::kQ].rows), k(T * nkv * d), v(T * nkv * d);
  std::vector<float> raw, iq, iw;
  std::vector<float*> outs = {proj.data(), k.data(), v.data()};
  if (sparse) {
    raw.resize(T * a.in.parts[P::kIndexK].rows);
    iq.resize(T * a.in.parts[P::kIndexQ].rows);
    outs.insert(outs.end(), {raw.data(), iq.data()});
    iw.assign(T * c.index_n_heads, 1.0f);  // qwen4exp sums its indexer heads unweighted
  }
  kernels_->matmul(xn, T, a.in, outs);
  Rows q, gate;
  if (c.attention_gated) {
    // q_proj rows are [query_h | gate_h] per head, not two global halves.
    q = Rows(T * nh * d), gate = Rows(T * nh * d);
    const RowPart parts[] = {{d, q.data(), nh * d}, {d, gate.data(), nh * d}};
    kernels_->split_rows(proj.data(), T, nh, parts);
  } else {
    q = std::move(proj);
  }
  kernels_->rms_norm(k.data(), T * nkv, d, a.k_norm.data(), eps, c.norm_weight_offset, k.data());
  kernels_->rope(k.data(), T, nkv, d, c.rotary_dim(), call.positions.data(), c.rope_theta);
  for (const SequenceRows& seq : call.sequences) {
    seq.state->append_rows(w.comp_k, std::span<const float>(k).subspan(seq.first_row * nkv * d, seq.rows * nkv * d));
    seq.state->append_rows(w.comp_v, std::span<const float>(v).subspan(seq.first_row * nkv * d, seq.rows * nkv * d));
  }
  if (keys_only) {
    if (sparse) store_index_keys(w, call, raw.data());
    return;
  }
  kernels_->rms_norm(q.data(), T * nh, d, a.q_norm.data(), eps, c.norm_weight_offset, q.data());
  kernels_->rope(q.data(), T, nh, d, c.rotary_dim(), call.positions.data(), c.rope_theta);
  std::vector<std::vector<uint8_t>> masks;
  if (sparse) sparse_selection(w, call, raw.data(), iq.data(), iw.data(), &masks);
  Rows o(T * nh * d);
  std::vector<AttentionInput> ins(call.sequences.size());
  std::vector<float*> seq_outs(call.sequences.size());
  for (size_t i = 0; i < call.sequences.size(); ++i) {
    const SequenceRows& seq = call.sequences[i];
    const State& st = *seq.state;
    AttentionInput& in = ins[i];
    in.rows = seq.rows;
    in.first_pos = seq.first_pos;
    in.n_heads = nh;
    in.n_kv = nkv;
    in.head_dim = d;
    in.q = q.data() + seq.first_row * nh * d;
    in.kv_dtype = st.schema().components[w.comp_k].dtype;  // the model's State or the MTP head's
    in.k = st.bytes(w.comp_k).data();
    in.v = st.bytes(w.comp_v).data();
    in.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    if (sparse) {
      in.block_mask = masks[i].data();
      in.mask_block = c.index_compress_ratio;
      in.mask_stride = (seq.first_pos + seq.rows + c.index_compress_ratio - 1) / c.index_compress_ratio;
    }
    seq_outs[i] = o.data() + seq.first_row * nh * d;
  }
  kernels_->attention(ins, seq_outs.data());
  if (c.attention_gated) kernels_->mul_activation(o.data(), gate.data(), T * nh * d, Activation::kSigmoid);
  kernels_->matmul(o.data(), T, a.o, out);
}

void Transformer::pooled_key(const LayerWeights& w, const State& state, int64_t b, float* out) const {
  const ModelConfig& c = config_;
  const int64_t m = c.index_compress_ratio, dI = c.index_head_dim;
  std::vector<float> raw(m * dI);
  state.read_rows(w.comp_index_raw, b * m, m, raw.data());
  kernels_->mean_rows(raw.data(), m, dI, out);
  kernels_->rms_norm(out, 1, dI, w.attn.index_k_norm.data(), static_cast<float>(c.rms_norm_eps), c.norm_weight_offset,
                     out);
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
  std::vector<const LayerWeights*> layers;
  for (const LayerWeights& w : layers_) layers.push_back(&w);
  if (mtp_) layers.push_back(&mtp_->state_layer);  // qwen4exp's head has a QSA layer too
  for (const LayerWeights* layer : layers) {
    const LayerWeights& w = *layer;
    if (w.comp_index_pooled < 0) continue;
    const ComponentSpec& spec = schema_.components[w.comp_index_pooled];
    const std::span<const uint8_t> pooled = state.bytes(w.comp_index_pooled);
    std::vector<uint8_t> encoded(spec.row_bytes());
    for (uint64_t b = 0; b < state.rows(w.comp_index_pooled); ++b) {
      pooled_key(w, state, static_cast<int64_t>(b), want.data());
      encode_values(spec.dtype, want, encoded.data());
      if (std::memcmp(encoded.data(), pooled.data() + b * spec.row_bytes(), spec.row_bytes()) != 0)
        return Status::corruption("component " + schema_.components[w.comp_index_pooled].name + " row " +
                                  std::to_string(b) + " does not derive from the raw indexer keys of its tokens");
    }
  }
  return Status::ok();
}

void Transformer::store_index_keys(const LayerWeights& w, ForwardCall& call, const float* raw) const {
  const int64_t m = config_.index_compress_ratio, dI = config_.index_head_dim;
  // Raw keys are stored per token, before any norm or RoPE.
  for (const SequenceRows& seq : call.sequences) {
    State& st = *seq.state;
    st.append_rows(w.comp_index_raw, std::span<const float>(raw + seq.first_row * dI, seq.rows * dI));
    // Close every block whose last token is in this call: its pooled key
    // depends only on the raw keys of its own m tokens.
    const int64_t end = seq.first_pos + seq.rows;
    for (int64_t b = static_cast<int64_t>(st.rows(w.comp_index_pooled)); (b + 1) * m <= end; ++b) {
      std::vector<float> pooled(dI);
      pooled_key(w, st, b, pooled.data());
      st.append_rows(w.comp_index_pooled, pooled);
    }
  }
}

void Transformer::sparse_selection(const LayerWeights& w, ForwardCall& call, const float* raw, float* iq,
                                   const float* iw, std::vector<std::vector<uint8_t>>* masks) const {
  const ModelConfig& c = config_;
  const int64_t T = call.rows, dI = c.index_head_dim, HI = c.index_n_heads;
  const int64_t rot = std::min(dI, c.rotary_dim());

  store_index_keys(w, call, raw);

  kernels_->rms_norm(iq, T * HI, dI, w.attn.index_q_norm.data(), static_cast<float>(c.rms_norm_eps),
                     c.norm_weight_offset, iq);
  kernels_->rope(iq, T, HI, dI, rot, call.positions.data(), c.rope_theta);
  masks->resize(call.sequences.size());
  for (size_t i = 0; i < call.sequences.size(); ++i) {
    const SequenceRows& seq = call.sequences[i];
    sparse_mask(w, seq, iq + seq.first_row * HI * dI, iw + seq.first_row * HI, &(*masks)[i]);
  }
}

// The blocks each row of one sequence attends to: its top-k closed blocks by
// indexer score (all of them while there are at most k) and its own open one.
void Transformer::sparse_mask(const LayerWeights& w, const SequenceRows& seq, const float* iq, const float* iw,
                              std::vector<uint8_t>* mask) const {
  const ModelConfig& c = config_;
  const int64_t dI = c.index_head_dim, HI = c.index_n_heads;
  std::vector<float> pooled(seq.state->rows(w.comp_index_pooled) * dI);
  seq.state->read_rows(w.comp_index_pooled, 0, seq.state->rows(w.comp_index_pooled), pooled.data());
  BlockMaskInput in;
  in.rows = seq.rows;
  in.first_pos = seq.first_pos;
  in.heads = HI;
  in.dim = dI;
  in.q = iq;
  in.w = iw;
  in.pooled = pooled.data();
  in.block = c.index_compress_ratio;
  in.top_k = c.index_topk_blocks;
  in.s_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dI)));
  mask->resize(static_cast<size_t>(in.rows * in.stride()));
  kernels_->sparse_block_mask(in, mask->data());
}

}  // namespace sb
