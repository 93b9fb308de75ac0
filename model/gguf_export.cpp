// write_gguf_model (model/gguf_model.h): each GGUF tensor's values computed
// in f32 from the checkpoint, then stored in the type the file type picks.
#include <cctype>
#include <cstring>
#include <filesystem>

#include "model/gguf_layout.h"
#include "model/gguf_metadata.h"
#include "model/gguf_model.h"
#include "model/mtp_head.h"
#include "model/weights.h"
#include "runtime/quant.h"

namespace sb {

namespace {

struct Source {
  const ModelConfig& c;
  const WeightSet& ws;
};

std::vector<float> hf(const Source& s, int64_t layer, const std::string& suffix) {
  return to_f32(as_matrix(s.ws.layer(layer, suffix)));
}

// Rows (or, with outer > 1, column units) of f32 values permuted by map.
std::vector<float> permute(const std::vector<float>& v, int64_t outer, const UnitMap& map) {
  const int64_t units = static_cast<int64_t>(map.size());
  const int64_t unit = static_cast<int64_t>(v.size()) / (outer * units);
  std::vector<uint8_t> bytes = gather(v.data(), outer, units, unit * 4, map);
  std::vector<float> out(v.size());
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

std::vector<float> stacked_experts(const Source& s, int64_t layer, MatrixView ExpertWeights::*part) {
  std::vector<float> out;
  for (int64_t e = 0; e < s.c.n_experts; ++e) {
    std::vector<float> m = to_f32(s.ws.expert(layer, e).*part);
    out.insert(out.end(), m.begin(), m.end());
  }
  return out;
}

std::vector<float> norm(const Source& s, const TensorView& t) {
  std::vector<float> v = to_f32(as_matrix(t));
  if (s.c.norm_weight_offset)
    for (float& x : v) x = 1.0f + x;  // the kernel's offset, rounded the same way
  return v;
}

std::vector<float> delta_net_values(const Source& s, int64_t l, const std::string& part) {
  const ModelConfig& c = s.c;
  const bool tiled = c.arch != Arch::kQwen3Next;
  const UnitMap heads = tiled_value_heads(c);
  const std::string L = "linear_attn.";
  auto by_head = [&](std::vector<float> v, int64_t width) { return tiled ? permute(v, 1, widen(heads, width)) : v; };
  if (part == "attn_qkv.weight" || part == "attn_gate.weight") {
    if (!tiled) {
      const int64_t qkv_rows = 2 * c.lin_n_key_heads * c.lin_key_head_dim + c.lin_n_value_heads * c.lin_value_head_dim;
      std::vector<float> all = permute(hf(s, l, L + "in_proj_qkvz.weight"), 1, qkvz_split(c));
      const auto cut = all.begin() + qkv_rows * c.hidden_size;
      return part == "attn_qkv.weight" ? std::vector<float>(all.begin(), cut) : std::vector<float>(cut, all.end());
    }
    if (part == "attn_gate.weight") return by_head(hf(s, l, L + "in_proj_z.weight"), c.lin_value_head_dim);
    return permute(hf(s, l, L + "in_proj_qkv.weight"), 1, qkv_tiled_rows(c));
  }
  if (part == "ssm_ba.weight") return hf(s, l, L + "in_proj_ba.weight");
  if (part == "ssm_beta.weight") return by_head(hf(s, l, L + "in_proj_b.weight"), 1);
  if (part == "ssm_alpha.weight") return by_head(hf(s, l, L + "in_proj_a.weight"), 1);
  if (part == "ssm_conv1d.weight") {
    std::vector<float> conv = hf(s, l, L + "conv1d.weight");  // [C, 1, K] is [C, K]
    return tiled ? permute(conv, 1, qkv_tiled_rows(c)) : conv;
  }
  if (part == "ssm_dt.bias") return by_head(hf(s, l, L + "dt_bias"), 1);
  if (part == "ssm_a") {
    std::vector<float> a = hf(s, l, L + "A_log");
    for (float& x : a) x = neg_exp_a_log(x);
    return by_head(a, 1);
  }
  if (part == "ssm_norm.weight") return hf(s, l, L + "norm.weight");  // plain weight: not offset
  // ssm_out: the value-head columns of every row.
  std::vector<float> out = hf(s, l, L + "out_proj.weight");
  return tiled ? permute(out, c.hidden_size, heads) : out;
}

// Rows [begin, begin + n) of an f32 matrix of `cols` columns.
std::vector<float> rows_of(const std::vector<float>& v, int64_t cols, int64_t begin, int64_t n) {
  return std::vector<float>(v.begin() + begin * cols, v.begin() + (begin + n) * cols);
}

// qwen4exp's own tensors (model/gguf_layout.h); empty for any other name.
std::vector<float> qwen4exp_layer_values(const Source& s, int64_t l, const std::string& part) {
  const ModelConfig& c = s.c;
  const std::string mixers[][2] = {{"hc_attn_", "attn_hyper_connection."}, {"hc_ffn_", "mlp_hyper_connection."}};
  for (const auto& [g, hf_prefix] : mixers) {
    if (part.rfind(g, 0) != 0) continue;
    const std::string what = part.substr(g.size());
    if (what == "norm.weight") return norm(s, s.ws.layer(l, hf_prefix + "hc_norm.weight"));
    if (what == "down.weight") return hf(s, l, hf_prefix + "input_mix_weight_down.weight");
    if (what == "up.weight") return hf(s, l, hf_prefix + "input_mix_weight_up.weight");
    if (what == "inject.weight") return hf(s, l, hf_prefix + "block_inject_weight.weight");
  }
  const int64_t q_rows = c.index_n_heads * c.index_head_dim;
  const std::string I = "self_attn.indexer.";
  if (part == "indexer.q_proj.weight") return rows_of(hf(s, l, I + "index_qk_proj.weight"), c.hidden_size, 0, q_rows);
  if (part == "indexer.k_proj.weight")
    return rows_of(hf(s, l, I + "index_qk_proj.weight"), c.hidden_size, q_rows, c.index_head_dim);
  if (part == "indexer.q_norm.weight") return norm(s, s.ws.layer(l, I + "q_layernorm.weight"));
  if (part == "indexer.k_norm.weight") return norm(s, s.ws.layer(l, I + "k_layernorm.weight"));
  if (part == "ple_key.weight") return hf(s, l, "ple.key_proj.weight");
  if (part == "ple_value.weight") return hf(s, l, "ple.value_proj.weight");
  if (part == "ple_conv1d.weight") return hf(s, l, "ple.conv1d.weight");  // [W, 1, K] is [W, K]
  for (const char* n : {"norm_key", "norm_query", "norm_conv"})
    if (part == std::string("ple_") + n + ".weight") return norm(s, s.ws.layer(l, std::string("ple.") + n + ".weight"));
  return {};
}

// The n-gram table: the PLE layer's shards one after another.
std::vector<float> ngram_table(const Source& s) {
  std::vector<float> out;
  const std::string prefix = "ple.ple_embedding.ngram_embedding.shard_";
  for (int64_t p = 0; p < s.c.ngram_split_parts; ++p) {
    const std::vector<float> shard = hf(s, s.c.ple_layers[0], prefix + std::to_string(p) + ".weight");
    out.insert(out.end(), shard.begin(), shard.end());
  }
  return out;
}

std::vector<float> layer_values(const Source& s, int64_t l, const std::string& part) {
  if (s.c.arch == Arch::kQwen4Exp) {
    std::vector<float> v = qwen4exp_layer_values(s, l, part);
    if (!v.empty()) return v;
  }
  const std::string A = "self_attn.", M = "mlp.";
  if (part == "attn_norm.weight") return norm(s, s.ws.layer(l, "input_layernorm.weight"));
  if (part == "post_attention_norm.weight" || part == "ffn_norm.weight")
    return norm(s, s.ws.layer(l, "post_attention_layernorm.weight"));
  if (part == "attn_q.weight") return hf(s, l, A + "q_proj.weight");
  if (part == "attn_k.weight") return hf(s, l, A + "k_proj.weight");
  if (part == "attn_v.weight") return hf(s, l, A + "v_proj.weight");
  if (part == "attn_output.weight") return hf(s, l, A + "o_proj.weight");
  if (part == "attn_q_norm.weight") return norm(s, s.ws.layer(l, A + "q_norm.weight"));
  if (part == "attn_k_norm.weight") return norm(s, s.ws.layer(l, A + "k_norm.weight"));
  if (part == "ffn_gate.weight") return hf(s, l, M + "gate_proj.weight");
  if (part == "ffn_up.weight") return hf(s, l, M + "up_proj.weight");
  if (part == "ffn_down.weight") return hf(s, l, M + "down_proj.weight");
  if (part == "ffn_gate_inp.weight") return hf(s, l, M + "gate.weight");
  if (part == "ffn_gate_exps.weight") return stacked_experts(s, l, &ExpertWeights::gate);
  if (part == "ffn_up_exps.weight") return stacked_experts(s, l, &ExpertWeights::up);
  if (part == "ffn_down_exps.weight") return stacked_experts(s, l, &ExpertWeights::down);
  if (part == "ffn_gate_shexp.weight") return hf(s, l, M + "shared_expert.gate_proj.weight");
  if (part == "ffn_up_shexp.weight") return hf(s, l, M + "shared_expert.up_proj.weight");
  if (part == "ffn_down_shexp.weight") return hf(s, l, M + "shared_expert.down_proj.weight");
  if (part == "ffn_gate_inp_shexp.weight") return hf(s, l, M + "shared_expert_gate.weight");
  return delta_net_values(s, l, part);
}

// The MTP head's decoder layer bound as layer 0 of mtp_layer_config
// (model/mtp_head.h), so that the trunk's conversion applies to it; the
// embedding is lent under the head's prefix, where WeightSet looks for one.
struct Head {
  ModelConfig config;
  std::unique_ptr<Checkpoint> checkpoint;
  WeightSet ws;
};

Status bind_head(const Checkpoint& ck, const ModelConfig& c, Head* out) {
  std::map<std::string, TensorView> views;
  for (const auto& [name, t] : ck.tensors())
    if (name.rfind("mtp.", 0) == 0) views[name] = t;
  views["mtp.embed_tokens.weight"] = *ck.find(c.tensor_prefix + "embed_tokens.weight");
  out->config = mtp_layer_config(c);
  out->checkpoint = Checkpoint::adopt(std::move(views), "", {});
  return WeightSet::bind(*out->checkpoint, out->config, &out->ws);
}

std::vector<float> values(const Source& s, const Head* head, const std::string& name) {
  if (name == "token_embd.weight") return to_f32(as_matrix(s.ws.embed()));
  if (name == "output_norm.weight") return norm(s, s.ws.final_norm());
  if (name == "output.weight") return to_f32(as_matrix(s.ws.lm_head()));
  const std::string mixer = s.c.tensor_prefix + "hyper_connection_mixer.";
  if (name == "output_hc_norm.weight") return norm(s, s.ws.get(mixer + "hc_norm.weight"));
  if (name == "output_hc_down.weight") return to_f32(as_matrix(s.ws.get(mixer + "input_mix_weight_down.weight")));
  if (name == "output_hc_up.weight") return to_f32(as_matrix(s.ws.get(mixer + "input_mix_weight_up.weight")));
  if (name == "per_layer_token_embd.weight") return ngram_table(s);
  const size_t dot = name.find('.', 4);  // "blk.<layer>.<part>"
  const int64_t layer = std::stoll(name.substr(4, dot - 4));
  const std::string part = name.substr(dot + 1);
  if (layer < s.c.n_layers) return layer_values(s, layer, part);
  const Source h{head->config, head->ws};
  for (const NextnTensor& t : gguf_nextn_tensors(s.c)) {
    if (t.gguf != name || t.hf.empty()) continue;
    const TensorView& v = *head->checkpoint->find(t.hf);
    return v.shape.size() == 1 ? norm(h, v) : to_f32(as_matrix(v));
  }
  return layer_values(h, 0, part);
}

// ---- types -------------------------------------------------------------------------------------------------------

bool kept_f32(const std::string& name, const std::vector<int64_t>& shape) {
  auto has = [&](const char* p) { return name.find(p) != std::string::npos; };
  return shape.size() < 2 || has("_norm.weight") || has("ffn_gate_inp") || has("ssm_conv1d") || name.size() < 7 ||
         name.compare(name.size() - 6, 6, "weight") != 0;
}

bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// llama-quantize's tensor_type_fallback: a row that is not whole blocks of the
// chosen type takes a 32-block type of about its bits, else F16.
DType fallback(DType t, int64_t cols) {
  if (cols % dtype_block(t).elems == 0) return t;
  DType smaller = t;  // a 32-block type has none smaller
  if (t == DType::kQ4_K) smaller = DType::kQ5_0;
  if (t == DType::kQ5_K) smaller = DType::kQ5_1;
  if (t == DType::kQ6_K) smaller = DType::kQ8_0;
  if (t == DType::kQ2_K || t == DType::kQ3_K) smaller = DType::kQ4_0;
  if (t == DType::kIQ4_XS) smaller = DType::kIQ4_NL;
  return cols % dtype_block(smaller).elems == 0 ? smaller : DType::kF16;
}

struct TypePicker {
  GgufFileType file_type;
  int64_t n_layers = 0;
  int64_t n_attention_v = 0;  // attn_v and attn_qkv tensors of the file
  int64_t i_attention_v = 0;
  bool tied = false;
  int64_t n_gqa = 0;     // query heads per key-value head (llama.cpp's n_gqa())
  int64_t n_experts = 0;

  DType base() const {
    switch (file_type) {
      case GgufFileType::kF32:
        return DType::kF32;
      case GgufFileType::kBF16:
        return DType::kBF16;
      case GgufFileType::kQ8_0:
        return DType::kQ8_0;
      case GgufFileType::kQ4_0:
        return DType::kQ4_0;
      case GgufFileType::kQ4_K_M:
        return DType::kQ4_K;
      case GgufFileType::kQ5_K_M:
        return DType::kQ5_K;
      case GgufFileType::kQ6_K:
        return DType::kQ6_K;
      case GgufFileType::kQ2_K:
        return DType::kQ2_K;
      case GgufFileType::kQ3_K_M:
        return DType::kQ3_K;
      case GgufFileType::kIQ4_NL:
        return DType::kIQ4_NL;
      case GgufFileType::kIQ4_XS:
        return DType::kIQ4_XS;
    }
    return DType::kF32;
  }
  // The low-bit mixes' rules for attn_v/attn_qkv, ffn_down and attn_output
  // (llama_tensor_get_type_impl without an importance matrix); t otherwise.
  DType pick_low_bit(const std::string& name, DType t, bool is_v) const {
    const bool iq4 = file_type == GgufFileType::kIQ4_NL || file_type == GgufFileType::kIQ4_XS;
    if (is_v) {
      if (file_type == GgufFileType::kQ2_K) return n_gqa >= 4 ? DType::kQ4_K : DType::kQ3_K;
      if (file_type == GgufFileType::kQ3_K_M) return i_attention_v < 2 ? DType::kQ5_K : DType::kQ4_K;
      if (iq4 && n_gqa >= 4) return DType::kQ5_K;
      return t;
    }
    if (name.find("ffn_down") != std::string::npos) {
      const int64_t layer = std::stoll(name.substr(4, name.find('.', 4) - 4));
      if (file_type == GgufFileType::kQ2_K) return DType::kQ3_K;
      if (file_type == GgufFileType::kQ3_K_M) return layer < n_layers / 16 ? DType::kQ5_K : DType::kQ4_K;
      if (iq4 && layer < n_layers / 8) return DType::kQ5_K;
      return t;
    }
    if (name.find("attn_output.weight") != std::string::npos) {
      if (n_experts == 8) return DType::kQ5_K;
      if (file_type == GgufFileType::kQ2_K) return DType::kQ3_K;
      if (file_type == GgufFileType::kQ3_K_M) return DType::kQ4_K;
    }
    return t;
  }
  bool low_bit() const {
    return file_type == GgufFileType::kQ2_K || file_type == GgufFileType::kQ3_K_M ||
           file_type == GgufFileType::kIQ4_NL || file_type == GgufFileType::kIQ4_XS;
  }
  // llama-quantize's choice for the mixes (its llama_tensor_get_type), then
  // the fallback for rows that are not whole blocks.
  DType pick(const std::string& name, const std::vector<int64_t>& shape) {
    if (kept_f32(name, shape)) return DType::kF32;
    DType t = base();
    if (!dtype_is_quantized(t)) return t;
    // The n-gram table as the published files store it: IQ4_NL, or, where a
    // row is not whole blocks, llama-quantize's fallback (F16).
    if (name == "per_layer_token_embd.weight") return fallback(DType::kIQ4_NL, shape.back());
    // llama-quantize leaves the indexer's projections unquantized (small).
    if (name.find("indexer.q_proj") != std::string::npos || name.find("indexer.k_proj") != std::string::npos)
      return DType::kF32;
    const bool mix = file_type == GgufFileType::kQ4_K_M || file_type == GgufFileType::kQ5_K_M;
    const bool is_v =
        name.find("attn_v.weight") != std::string::npos || name.find("attn_qkv.weight") != std::string::npos;
    if (name == "output.weight" || (tied && name == "token_embd.weight")) {
      t = t == DType::kQ8_0 || shape.back() % dtype_block(t).elems != 0 ? DType::kQ8_0 : DType::kQ6_K;
    } else if (low_bit()) {
      t = pick_low_bit(name, t, is_v);
      if (is_v) ++i_attention_v;
    } else if (is_v) {
      if (mix && use_more_bits(i_attention_v, n_attention_v)) t = DType::kQ6_K;
      ++i_attention_v;
    } else if (name.find("ffn_down") != std::string::npos) {
      const int64_t layer = std::stoll(name.substr(4, name.find('.', 4) - 4));
      if (mix && use_more_bits(layer, n_layers)) t = DType::kQ6_K;
    }
    return fallback(t, shape.back());
  }
};

Status encode(const std::string& name, DType t, const std::vector<float>& v, int64_t cols, std::vector<uint8_t>* out) {
  const int64_t rows = static_cast<int64_t>(v.size()) / cols;
  out->assign(static_cast<size_t>(rows * (dtype_is_quantized(t) ? dtype_row_bytes(t, cols)
                                                                : cols * static_cast<int64_t>(dtype_size(t)))),
              0);
  if (t == DType::kF32) {
    std::memcpy(out->data(), v.data(), out->size());
  } else if (t == DType::kBF16 || t == DType::kF16) {
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t h = t == DType::kBF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
      std::memcpy(out->data() + 2 * i, &h, 2);
    }
  } else {
    const int64_t rb = dtype_row_bytes(t, cols);
    for (int64_t r = 0; r < rows; ++r) {
      Status s = quantize_row(t, v.data() + r * cols, cols, out->data() + r * rb);
      if (!s.is_ok()) return Status::invalid("tensor " + name + ": " + s.message());
    }
  }
  return Status::ok();
}

// llama.cpp's qwen4exp holds one set of n-gram hash constants, reads the PLE
// conv history from a linear-attention layer's cache and projects the
// n-gram rows from the hidden size.
Status check_qwen4exp(const ModelConfig& c, const std::string& dir) {
  if (c.ple_layers.size() > 1)
    return Status::unsupported(dir + ": " + std::to_string(c.ple_layers.size()) +
                               " PLE layers; llama.cpp's qwen4exp (and its GGUF keys) hold one");
  if (!c.ple_layers.empty() && c.layer_types[c.ple_layers[0]] != LayerType::kLinearAttention)
    return Status::unsupported(dir + ": the PLE layer " + std::to_string(c.ple_layers[0]) +
                               " is not a linear-attention layer, as llama.cpp's qwen4exp requires");
  if (!c.ple_layers.empty() && c.ple_embed_dim != c.hidden_size)
    return Status::unsupported(dir + ": ple_embed_dim " + std::to_string(c.ple_embed_dim) +
                               " is not hidden_size; llama.cpp's qwen4exp needs them equal");
  return Status::ok();
}

Status check_exportable(const ModelConfig& c, const std::string& dir) {
  if (c.arch == Arch::kQwen4Exp) SB_RETURN_IF_ERROR(check_qwen4exp(c, dir));
  if (c.arch != Arch::kQwen3) {
    if (c.lin_key_head_dim != c.lin_value_head_dim)
      return Status::unsupported(dir +
                                 ": llama.cpp's Gated DeltaNet needs linear_key_head_dim == linear_value_head_dim");
  }
  if (c.n_experts > 0 && !c.norm_topk_prob)
    return Status::unsupported(dir + ": norm_topk_prob false (llama.cpp always renormalises the top-k expert weights)");
  for (int64_t i = 0; i < c.n_layers; ++i) {
    if (c.arch == Arch::kQwen3Next && !c.layer_is_moe(i))
      return Status::unsupported(dir + ": layer " + std::to_string(i) +
                                 " is dense; llama.cpp's qwen3next has mixture-of-experts layers only");
  }
  return Status::ok();
}

uint32_t llama_file_type(GgufFileType t) {
  switch (t) {
    case GgufFileType::kF32:
      return 0;
    case GgufFileType::kBF16:
      return 32;
    case GgufFileType::kQ8_0:
      return 7;
    case GgufFileType::kQ4_0:
      return 2;
    case GgufFileType::kQ4_K_M:
      return 15;
    case GgufFileType::kQ5_K_M:
      return 17;
    case GgufFileType::kQ6_K:
      return 18;
    case GgufFileType::kQ2_K:
      return 10;
    case GgufFileType::kQ3_K_M:
      return 12;
    case GgufFileType::kIQ4_NL:
      return 25;
    case GgufFileType::kIQ4_XS:
      return 30;
  }
  return 0;
}

// The file from an open checkpoint; check_exportable has passed.
Status write_gguf(ModelConfig c, const Checkpoint& ck, const std::string& vocab_dir, GgufFileType type,
                  const std::string& out_path, const TensorHook& before_tensor) {
  WeightSet ws;
  SB_RETURN_IF_ERROR(WeightSet::bind(ck, c, &ws));
  if (!ck.find("mtp.fc.weight")) c.mtp_layers = 0;  // a config naming a head whose tensors were stripped
  if (c.arch == Arch::kQwen4Exp) c.mtp_layers = 0;     // llama.cpp's converter leaves qwen4exp's head out
  const bool nextn = c.mtp_layers == 1 && c.arch != Arch::kQwen3;
  Head head;
  if (nextn) SB_RETURN_IF_ERROR(bind_head(ck, c, &head));
  GgufWriter w;
  w.set("general.architecture", GgufValue::string(gguf_arch_name(c.arch)));
  w.set("general.name", GgufValue::string(std::string("statebank ") + arch_name(c.arch)));
  w.set("general.file_type", GgufValue::u32(llama_file_type(type)));
  if (type != GgufFileType::kF32 && type != GgufFileType::kBF16)
    w.set("general.quantization_version", GgufValue::u32(2));
  put_config(c, &w);
  SB_RETURN_IF_ERROR(put_vocab(vocab_dir, c.vocab_size, &w));

  const std::vector<TensorSpec> specs = gguf_expected_tensors(c);
  TypePicker picker{type, c.n_layers + (nextn ? 1 : 0)};  // llama-quantize counts the nextn block's ffn_down
  picker.tied = c.tie_word_embeddings;
  picker.n_gqa = c.n_kv_heads > 0 ? c.n_heads / c.n_kv_heads : 0;
  picker.n_experts = c.n_experts;
  for (const TensorSpec& s : specs)
    if (s.name.find("attn_v.weight") != std::string::npos || s.name.find("attn_qkv.weight") != std::string::npos)
      ++picker.n_attention_v;
  const Source src{c, ws};
  // Each tensor is read, converted and encoded while the file is written,
  // one at a time: a file of the bench preset (GBs) never sits in memory.
  for (const TensorSpec& s : specs) {
    const DType t = picker.pick(s.name, s.shape);
    w.add_tensor(s.name, t, s.shape, [&, name = s.name, t, cols = s.shape.back()](std::vector<uint8_t>* out) {
      if (before_tensor) SB_RETURN_IF_ERROR(before_tensor(name));
      return encode(name, t, values(src, &head, name), cols, out);
    });
  }
  return w.write(out_path);
}

}  // namespace

Status write_gguf_model(const std::string& dir, GgufFileType type, const std::string& out_path) {
  ModelConfig c;
  SB_RETURN_IF_ERROR(parse_config(dir, &c));
  SB_RETURN_IF_ERROR(check_exportable(c, dir));
  std::unique_ptr<Checkpoint> ck;
  SB_RETURN_IF_ERROR(Checkpoint::open(dir, &ck));
  return write_gguf(std::move(c), *ck, dir, type, out_path, {});
}

Status write_gguf_model(const ModelConfig& config, const Checkpoint& ck, const std::string& source,
                        const std::string& vocab_dir, GgufFileType type, const std::string& out_path,
                        const TensorHook& before_tensor) {
  SB_RETURN_IF_ERROR(check_exportable(config, source));
  return write_gguf(config, ck, vocab_dir, type, out_path, before_tensor);
}

Status parse_gguf_file_type(const std::string& text, GgufFileType* out) {
  for (GgufFileType t : {GgufFileType::kF32, GgufFileType::kBF16, GgufFileType::kQ8_0, GgufFileType::kQ4_0,
                         GgufFileType::kQ4_K_M, GgufFileType::kQ5_K_M, GgufFileType::kQ6_K, GgufFileType::kQ2_K,
                         GgufFileType::kQ3_K_M, GgufFileType::kIQ4_NL, GgufFileType::kIQ4_XS})
    if (text == gguf_file_type_name(t)) {
      *out = t;
      return Status::ok();
    }
  return Status::invalid("type '" + text +
                         "' is not one of f32, bf16, q8_0, q4_0, q4_k_m, q5_k_m, q6_k, q2_k, q3_k_m, iq4_nl, iq4_xs");
}

const char* gguf_file_type_name(GgufFileType t) {
  switch (t) {
    case GgufFileType::kF32:
      return "f32";
    case GgufFileType::kBF16:
      return "bf16";
    case GgufFileType::kQ8_0:
      return "q8_0";
    case GgufFileType::kQ4_0:
      return "q4_0";
    case GgufFileType::kQ4_K_M:
      return "q4_k_m";
    case GgufFileType::kQ5_K_M:
      return "q5_k_m";
    case GgufFileType::kQ6_K:
      return "q6_k";
    case GgufFileType::kQ2_K:
      return "q2_k";
    case GgufFileType::kQ3_K_M:
      return "q3_k_m";
    case GgufFileType::kIQ4_NL:
      return "iq4_nl";
    case GgufFileType::kIQ4_XS:
      return "iq4_xs";
  }
  return "?";
}

bool is_gguf_path(const std::string& path) {
  static constexpr char kSuffix[] = ".gguf";
  const size_t n = sizeof kSuffix - 1;
  bool suffix = path.size() > n;
  for (size_t i = 0; suffix && i < n; ++i)
    suffix = std::tolower(static_cast<unsigned char>(path[path.size() - n + i])) == kSuffix[i];
  std::error_code ec;
  return suffix || std::filesystem::is_regular_file(path, ec);
}

}  // namespace sb
