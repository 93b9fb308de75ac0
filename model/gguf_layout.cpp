#include "model/gguf_layout.h"

#include <cstring>

#include "model/mtp_head.h"
#include "model/ngram_hash.h"

namespace sb {

const char* gguf_arch_name(Arch arch) {
  switch (arch) {
    case Arch::kQwen3:
      return "qwen3";
    case Arch::kQwen3Next:
      return "qwen3next";
    case Arch::kQwen35:
      return "qwen35";
    case Arch::kQwen35Moe:
      return "qwen35moe";
    case Arch::kQwen4Exp:
      return "qwen4exp";
  }
  return nullptr;
}

std::string gguf_layer_name(int64_t layer, const std::string& part) {
  return "blk." + std::to_string(layer) + "." + part;
}

namespace {

void delta_net_tensors(const ModelConfig& c, int64_t i, std::vector<TensorSpec>* out) {
  const int64_t H = c.hidden_size, nv = c.lin_n_value_heads;
  const int64_t key_dim = c.lin_n_key_heads * c.lin_key_head_dim, value_dim = nv * c.lin_value_head_dim;
  const int64_t conv_dim = 2 * key_dim + value_dim;
  auto add = [&](const char* part, std::vector<int64_t> shape) {
    out->push_back({gguf_layer_name(i, part), std::move(shape)});
  };
  add("attn_qkv.weight", {conv_dim, H});
  add("attn_gate.weight", {value_dim, H});
  if (c.arch == Arch::kQwen3Next) {
    add("ssm_ba.weight", {2 * nv, H});
  } else {
    add("ssm_beta.weight", {nv, H});
    add("ssm_alpha.weight", {nv, H});
  }
  add("ssm_conv1d.weight", {conv_dim, c.conv_kernel});
  add("ssm_dt.bias", {nv});
  add("ssm_a", {nv});
  add("ssm_norm.weight", {c.lin_value_head_dim});
  add("ssm_out.weight", {H, value_dim});
}

void ffn_tensors(const ModelConfig& c, int64_t i, bool moe, std::vector<TensorSpec>* out) {
  const int64_t H = c.hidden_size;
  auto add = [&](const char* part, std::vector<int64_t> shape) {
    out->push_back({gguf_layer_name(i, part), std::move(shape)});
  };
  if (!moe) {
    add("ffn_gate.weight", {c.intermediate_size, H});
    add("ffn_up.weight", {c.intermediate_size, H});
    add("ffn_down.weight", {H, c.intermediate_size});
    return;
  }
  const int64_t E = c.n_experts, I = c.moe_intermediate_size, S = c.shared_expert_intermediate_size;
  add("ffn_gate_inp.weight", {E, H});
  add("ffn_gate_exps.weight", {E, I, H});
  add("ffn_up_exps.weight", {E, I, H});
  add("ffn_down_exps.weight", {E, H, I});
  if (S > 0) {
    add("ffn_gate_shexp.weight", {S, H});
    add("ffn_up_shexp.weight", {S, H});
    add("ffn_down_shexp.weight", {H, S});
    add("ffn_gate_inp_shexp.weight", {H});
  }
}

void attention_tensors(const ModelConfig& c, int64_t i, std::vector<TensorSpec>* out) {
  const int64_t H = c.hidden_size, q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  out->push_back({gguf_layer_name(i, "attn_q.weight"), {c.attention_gated ? 2 * q_dim : q_dim, H}});
  out->push_back({gguf_layer_name(i, "attn_k.weight"), {kv_dim, H}});
  out->push_back({gguf_layer_name(i, "attn_v.weight"), {kv_dim, H}});
  out->push_back({gguf_layer_name(i, "attn_output.weight"), {H, q_dim}});
  out->push_back({gguf_layer_name(i, "attn_q_norm.weight"), {c.head_dim}});
  out->push_back({gguf_layer_name(i, "attn_k_norm.weight"), {c.head_dim}});
}

void mixer_tensors(const ModelConfig& c, const std::string& prefix, bool inject, std::vector<TensorSpec>* out) {
  const int64_t W = c.hc_count * c.hidden_size;
  out->push_back({prefix + "_norm.weight", {W}});
  out->push_back({prefix + "_down.weight", {c.hc_lowrank, W}});
  out->push_back({prefix + "_up.weight", {W, c.hc_lowrank}});
  if (inject) out->push_back({prefix + "_inject.weight", {c.hc_count, W}});
}

// qwen4exp (llama.cpp's converter): no norms but the mixers'; the indexer's
// projection split in two; the PLE layer's table one tensor of the whole
// file, its hash constants metadata.
std::vector<TensorSpec> qwen4exp_tensors(const ModelConfig& c) {
  std::vector<TensorSpec> out;
  const int64_t H = c.hidden_size, W = c.hc_count * H;
  out.push_back({"token_embd.weight", {c.vocab_size, H}});
  mixer_tensors(c, "output_hc", false, &out);
  if (!c.tie_word_embeddings) out.push_back({"output.weight", {c.vocab_size, H}});
  if (!c.ple_layers.empty())
    out.push_back({"per_layer_token_embd.weight", {ngram_hash(c, 0).table_rows, c.ple_embed_dim / c.ngram_heads()}});
  for (int64_t i = 0; i < c.n_layers; ++i) {
    mixer_tensors(c, gguf_layer_name(i, "hc_attn"), true, &out);
    mixer_tensors(c, gguf_layer_name(i, "hc_ffn"), true, &out);
    if (c.layer_types[i] == LayerType::kLinearAttention) {
      delta_net_tensors(c, i, &out);
    } else {
      attention_tensors(c, i, &out);
      out.push_back({gguf_layer_name(i, "indexer.q_proj.weight"), {c.index_n_heads * c.index_head_dim, H}});
      out.push_back({gguf_layer_name(i, "indexer.k_proj.weight"), {c.index_head_dim, H}});
      out.push_back({gguf_layer_name(i, "indexer.q_norm.weight"), {c.index_head_dim}});
      out.push_back({gguf_layer_name(i, "indexer.k_norm.weight"), {c.index_head_dim}});
    }
    if (c.layer_has_ple(i)) {
      out.push_back({gguf_layer_name(i, "ple_key.weight"), {W, c.ple_embed_dim}});
      out.push_back({gguf_layer_name(i, "ple_value.weight"), {H, c.ple_embed_dim}});
      for (const char* n : {"ple_norm_key.weight", "ple_norm_query.weight", "ple_norm_conv.weight"})
        out.push_back({gguf_layer_name(i, n), {W}});
      out.push_back({gguf_layer_name(i, "ple_conv1d.weight"), {W, c.ple_conv_kernel}});
    }
    ffn_tensors(c, i, true, &out);
  }
  return out;
}

}  // namespace

std::vector<TensorSpec> gguf_expected_tensors(const ModelConfig& c) {
  if (c.arch == Arch::kQwen4Exp) return qwen4exp_tensors(c);
  std::vector<TensorSpec> out;
  const int64_t H = c.hidden_size;
  out.push_back({"token_embd.weight", {c.vocab_size, H}});
  out.push_back({"output_norm.weight", {H}});
  if (!c.tie_word_embeddings) out.push_back({"output.weight", {c.vocab_size, H}});
  const bool hybrid = c.arch != Arch::kQwen3;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    out.push_back({gguf_layer_name(i, "attn_norm.weight"), {H}});
    out.push_back({gguf_layer_name(i, hybrid ? "post_attention_norm.weight" : "ffn_norm.weight"), {H}});
    if (c.layer_types[i] == LayerType::kLinearAttention) {
      delta_net_tensors(c, i, &out);
    } else {
      attention_tensors(c, i, &out);
    }
    ffn_tensors(c, i, c.layer_is_moe(i), &out);
  }
  if (c.mtp_layers == 1 && hybrid) {
    for (const NextnTensor& t : gguf_nextn_tensors(c)) out.push_back({t.gguf, t.shape});
  }
  return out;
}

std::vector<NextnTensor> gguf_nextn_tensors(const ModelConfig& c) {
  const int64_t H = c.hidden_size, N = c.n_layers;
  std::vector<TensorSpec> layer = {{gguf_layer_name(N, "attn_norm.weight"), {H}},
                                   {gguf_layer_name(N, "post_attention_norm.weight"), {H}}};
  attention_tensors(c, N, &layer);
  ffn_tensors(c, N, mtp_layer_config(c).layer_is_moe(0), &layer);
  std::vector<NextnTensor> out;
  for (TensorSpec& s : layer) out.push_back({std::move(s.name), "", std::move(s.shape)});
  out.push_back({gguf_layer_name(N, "nextn.eh_proj.weight"), "mtp.fc.weight", {H, 2 * H}});
  out.push_back({gguf_layer_name(N, "nextn.enorm.weight"), "mtp.pre_fc_norm_embedding.weight", {H}});
  out.push_back({gguf_layer_name(N, "nextn.hnorm.weight"), "mtp.pre_fc_norm_hidden.weight", {H}});
  out.push_back({gguf_layer_name(N, "nextn.shared_head_norm.weight"), "mtp.norm.weight", {H}});
  return out;
}

UnitMap inverse(const UnitMap& map) {
  UnitMap inv(map.size());
  for (size_t i = 0; i < map.size(); ++i) inv[static_cast<size_t>(map[i])] = static_cast<int64_t>(i);
  return inv;
}

UnitMap widen(const UnitMap& map, int64_t width) {
  UnitMap out;
  out.reserve(map.size() * static_cast<size_t>(width));
  for (int64_t m : map)
    for (int64_t j = 0; j < width; ++j) out.push_back(m * width + j);
  return out;
}

UnitMap tiled_value_heads(const ModelConfig& c) {
  const int64_t nk = c.lin_n_key_heads, r = c.lin_n_value_heads / c.lin_n_key_heads;
  UnitMap map(static_cast<size_t>(nk * r));
  for (int64_t p = 0; p < nk * r; ++p) map[p] = (p % nk) * r + p / nk;
  return map;
}

UnitMap qkvz_split(const ModelConfig& c) {
  const int64_t nk = c.lin_n_key_heads, dk = c.lin_key_head_dim;
  const int64_t rdv = c.lin_n_value_heads / nk * c.lin_value_head_dim;
  const int64_t group = 2 * dk + 2 * rdv;  // per key head: q, k, v (r heads), z (r heads)
  UnitMap map;
  for (int64_t part_begin : {int64_t{0}, dk, 2 * dk, 2 * dk + rdv}) {
    const int64_t part_rows = part_begin < 2 * dk ? dk : rdv;
    for (int64_t h = 0; h < nk; ++h)
      for (int64_t j = 0; j < part_rows; ++j) map.push_back(h * group + part_begin + j);
  }
  return map;
}

UnitMap qkv_tiled_rows(const ModelConfig& c) {
  const int64_t key_rows = 2 * c.lin_n_key_heads * c.lin_key_head_dim;
  UnitMap map;
  for (int64_t i = 0; i < key_rows; ++i) map.push_back(i);
  for (int64_t v : widen(tiled_value_heads(c), c.lin_value_head_dim)) map.push_back(key_rows + v);
  return map;
}

std::vector<uint8_t> gather(const void* src, int64_t outer, int64_t units, int64_t unit_bytes, const UnitMap& map) {
  std::vector<uint8_t> out(static_cast<size_t>(outer * units * unit_bytes));
  const uint8_t* s = static_cast<const uint8_t*>(src);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < units; ++i)
      std::memcpy(out.data() + (o * units + i) * unit_bytes, s + (o * units + map[i]) * unit_bytes,
                  static_cast<size_t>(unit_bytes));
  return out;
}

}  // namespace sb
