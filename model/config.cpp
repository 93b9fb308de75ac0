#include "model/config.h"

#include <cmath>
#include <functional>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/config_reader.h"
#include "model/qwen4exp.h"

namespace sb {

using nlohmann::json;
using ordered_json = nlohmann::ordered_json;

const char* arch_name(Arch arch) {
  switch (arch) {
    case Arch::kQwen3: return "qwen3";
    case Arch::kQwen3Next: return "qwen3_next";
    case Arch::kQwen35: return "qwen3_5";
    case Arch::kQwen35Moe: return "qwen3_5_moe";
    case Arch::kQwen4Exp: return "qwen4exp";
  }
  return "unknown";
}

const char* layer_type_name(LayerType type) {
  switch (type) {
    case LayerType::kFullAttention: return "full_attention";
    case LayerType::kLinearAttention: return "linear_attention";
    case LayerType::kSparseAttention: return "sparse_attention";
  }
  return "unknown";
}

bool ModelConfig::layer_is_moe(int64_t layer) const {
  if (n_experts <= 0) return false;
  if (arch == Arch::kQwen35Moe || arch == Arch::kQwen4Exp) return true;
  for (int64_t l : mlp_only_layers)
    if (l == layer) return false;
  return decoder_sparse_step > 0 && (layer + 1) % decoder_sparse_step == 0;
}

bool ModelConfig::layer_has_ple(int64_t layer) const {
  for (int64_t l : ple_layers)
    if (l == layer) return true;
  return false;
}

namespace {

std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

bool is_hybrid(Arch a) { return a != Arch::kQwen3; }
bool is_nested(Arch a) { return a == Arch::kQwen35 || a == Arch::kQwen35Moe || a == Arch::kQwen4Exp; }

Status parse_layer_types(const ConfigReader& r, Arch arch, ModelConfig* c) {
  c->layer_types.clear();
  if (!r.has("layer_types")) {
    if (arch == Arch::kQwen3) {
      c->layer_types.assign(c->n_layers, LayerType::kFullAttention);
      return Status::ok();
    }
    int64_t interval = 4;
    SB_RETURN_IF_ERROR(r.get_int("full_attention_interval", &interval, false));
    // qwen4exp's attention layers are all QSA layers.
    const LayerType attention = arch == Arch::kQwen4Exp ? LayerType::kSparseAttention : LayerType::kFullAttention;
    for (int64_t i = 0; i < c->n_layers; ++i)
      c->layer_types.push_back((i + 1) % interval == 0 ? attention : LayerType::kLinearAttention);
    return Status::ok();
  }
  const json& v = r.obj()["layer_types"];
  if (!v.is_array()) return r.error("layer_types", "must be an array of strings");
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) return r.error("layer_types", "entry " + std::to_string(i) + " is not a string");
    std::string name = v[i].get<std::string>();
    LayerType t;
    if (arch == Arch::kQwen4Exp && qwen4exp_attention_name(name)) {
      t = LayerType::kSparseAttention;
    } else if (name == "full_attention" || name == "attention") {
      t = LayerType::kFullAttention;
    } else if ((name == "linear_attention" || name == "mamba") && arch != Arch::kQwen3) {
      t = LayerType::kLinearAttention;
    } else {
      return r.error("layer_types", "entry " + std::to_string(i) + " '" + name + "' is not a layer type of " +
                                        arch_name(arch));
    }
    c->layer_types.push_back(t);
  }
  if (static_cast<int64_t>(c->layer_types.size()) != c->n_layers)
    return r.error("layer_types", "has " + std::to_string(c->layer_types.size()) +
                                      " entries, but num_hidden_layers is " + std::to_string(c->n_layers));
  return Status::ok();
}

// Rope settings: the rope_parameters dict first, then top-level keys.
Status parse_rope(const ConfigReader& r, ModelConfig* c) {
  SB_RETURN_IF_ERROR(r.get_double("rope_theta", &c->rope_theta));
  SB_RETURN_IF_ERROR(r.get_double("partial_rotary_factor", &c->partial_rotary_factor));
  if (r.has("rope_parameters")) {
    const json& rp = r.obj()["rope_parameters"];
    if (!rp.is_object()) return r.error("rope_parameters", "must be an object");
    ConfigReader sub(rp, "", "");
    auto wrap = [&](Status s, const char* key) {
      return s.is_ok() ? s : r.error(std::string("rope_parameters.") + key, "must be a number");
    };
    SB_RETURN_IF_ERROR(wrap(sub.get_double("rope_theta", &c->rope_theta), "rope_theta"));
    SB_RETURN_IF_ERROR(wrap(sub.get_double("partial_rotary_factor", &c->partial_rotary_factor), "partial_rotary_factor"));
    if (rp.contains("rope_type") && rp["rope_type"].is_string()) {
      std::string type = rp["rope_type"].get<std::string>();
      if (type != "default") return r.error("rope_parameters.rope_type", "'" + type + "' is not supported (only 'default')");
    }
  }
  if (r.has("rope_scaling")) {
    const json& rs = r.obj()["rope_scaling"];
    if (!rs.is_object()) return r.error("rope_scaling", "must be an object or null");
    std::string type = rs.value("rope_type", rs.value("type", std::string("default")));
    if (type != "default") return r.error("rope_scaling", "type '" + type + "' is not supported");
  }
  if (!(c->rope_theta > 0) || !std::isfinite(c->rope_theta)) return r.error("rope_theta", "must be a positive number");
  if (!(c->partial_rotary_factor > 0 && c->partial_rotary_factor <= 1))
    return r.error("partial_rotary_factor", "must be in (0, 1]");
  double rot = c->head_dim * c->partial_rotary_factor;
  if (rot != std::floor(rot) || static_cast<int64_t>(rot) % 2 != 0)
    return r.error("partial_rotary_factor", "times head_dim (" + std::to_string(c->head_dim) +
                                                ") must be an even whole number of rotary dimensions");
  return Status::ok();
}

// The Gated DeltaNet fields, when a layer uses them.
Status parse_linear_attention(const ConfigReader& r, ModelConfig* c) {
  bool has_linear = false;
  for (LayerType t : c->layer_types) has_linear |= t == LayerType::kLinearAttention;
  if (has_linear) {
    SB_RETURN_IF_ERROR(r.get_int("linear_conv_kernel_dim", &c->conv_kernel, false));
    SB_RETURN_IF_ERROR(r.get_int("linear_key_head_dim", &c->lin_key_head_dim, true));
    SB_RETURN_IF_ERROR(r.get_int("linear_value_head_dim", &c->lin_value_head_dim, true));
    SB_RETURN_IF_ERROR(r.get_int("linear_num_key_heads", &c->lin_n_key_heads, true));
    SB_RETURN_IF_ERROR(r.get_int("linear_num_value_heads", &c->lin_n_value_heads, true));
    if (c->lin_n_value_heads % c->lin_n_key_heads != 0)
      return r.error("linear_num_value_heads", "(" + std::to_string(c->lin_n_value_heads) +
                                                   ") is not a multiple of linear_num_key_heads (" +
                                                   std::to_string(c->lin_n_key_heads) + ")");
  } else {
    c->conv_kernel = 4;
    c->lin_key_head_dim = c->lin_value_head_dim = c->lin_n_key_heads = c->lin_n_value_heads = 0;
  }
  return Status::ok();
}

// Mixture of experts.
Status parse_experts(const ConfigReader& r, Arch arch, ModelConfig* c) {
  c->n_experts = c->n_experts_per_tok = c->moe_intermediate_size = c->shared_expert_intermediate_size = 0;
  c->norm_topk_prob = true;
  c->decoder_sparse_step = 1;
  c->mlp_only_layers.clear();
  if (arch == Arch::kQwen35Moe || arch == Arch::kQwen4Exp) {
    SB_RETURN_IF_ERROR(r.get_int("num_experts", &c->n_experts, true));
  } else if (arch == Arch::kQwen3Next) {
    SB_RETURN_IF_ERROR(r.get_int("num_experts", &c->n_experts, false, 0));
  }
  if (c->n_experts > 0) {
    SB_RETURN_IF_ERROR(r.get_int("num_experts_per_tok", &c->n_experts_per_tok, true));
    SB_RETURN_IF_ERROR(r.get_int("moe_intermediate_size", &c->moe_intermediate_size, true));
    SB_RETURN_IF_ERROR(r.get_int("shared_expert_intermediate_size", &c->shared_expert_intermediate_size, true));
    if (c->n_experts_per_tok > c->n_experts)
      return r.error("num_experts_per_tok", "(" + std::to_string(c->n_experts_per_tok) + ") exceeds num_experts (" +
                                                std::to_string(c->n_experts) + ")");
    if (arch == Arch::kQwen4Exp) SB_RETURN_IF_ERROR(r.get_bool("norm_topk_prob", &c->norm_topk_prob));
    if (arch != Arch::kQwen35Moe && arch != Arch::kQwen4Exp) {
      SB_RETURN_IF_ERROR(r.get_bool("norm_topk_prob", &c->norm_topk_prob));
      SB_RETURN_IF_ERROR(r.get_int("decoder_sparse_step", &c->decoder_sparse_step, false));
      if (r.has("mlp_only_layers")) {
        const json& v = r.obj()["mlp_only_layers"];
        if (!v.is_array()) return r.error("mlp_only_layers", "must be an array of layer indices");
        for (const json& e : v) {
          if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= c->n_layers)
            return r.error("mlp_only_layers", "entry " + e.dump() + " is not a layer index in [0, " +
                                                  std::to_string(c->n_layers) + ")");
          c->mlp_only_layers.push_back(e.get<int64_t>());
        }
      }
    }
  }
  return Status::ok();
}

// Only qwen4exp has an indexer (parse_qwen4exp reads it under its own
// names); the others keep the defaults, so their describe() stays the same.
void default_indexer(ModelConfig* c) {
  const ModelConfig defaults;
  c->index_n_heads = defaults.index_n_heads;
  c->index_head_dim = defaults.index_head_dim;
  c->index_compress_ratio = defaults.index_compress_ratio;
  c->index_topk_blocks = defaults.index_topk_blocks;
}

Status parse_text(const ConfigReader& r, Arch arch, ModelConfig* c) {
  c->arch = arch;
  c->attention_gated = is_hybrid(arch);
  c->norm_weight_offset = is_hybrid(arch);
  c->tensor_prefix = is_nested(arch) ? "model.language_model." : "model.";
  c->rope_theta = arch == Arch::kQwen3 ? 1e6 : 10000.0;
  c->partial_rotary_factor = arch == Arch::kQwen3 ? 1.0 : 0.25;

  SB_RETURN_IF_ERROR(r.get_int("vocab_size", &c->vocab_size, true));
  SB_RETURN_IF_ERROR(r.get_int("hidden_size", &c->hidden_size, true));
  SB_RETURN_IF_ERROR(r.get_int("num_hidden_layers", &c->n_layers, true));
  SB_RETURN_IF_ERROR(r.get_int("num_attention_heads", &c->n_heads, true));
  SB_RETURN_IF_ERROR(r.get_int("num_key_value_heads", &c->n_kv_heads, true));
  SB_RETURN_IF_ERROR(r.get_int("head_dim", &c->head_dim, true));
  SB_RETURN_IF_ERROR(r.get_double("rms_norm_eps", &c->rms_norm_eps));
  if (!(c->rms_norm_eps > 0) || !std::isfinite(c->rms_norm_eps)) return r.error("rms_norm_eps", "must be a positive number");
  SB_RETURN_IF_ERROR(r.get_bool("tie_word_embeddings", &c->tie_word_embeddings));
  SB_RETURN_IF_ERROR(r.get_int("max_position_embeddings", &c->max_position_embeddings, false));
  SB_RETURN_IF_ERROR(r.get_int(r.has("mtp_num_hidden_layers") ? "mtp_num_hidden_layers" : "num_nextn_predict_layers",
                               &c->mtp_layers, false, 0));
  if (c->n_heads % c->n_kv_heads != 0)
    return r.error("num_attention_heads", "(" + std::to_string(c->n_heads) + ") is not a multiple of num_key_value_heads (" +
                                              std::to_string(c->n_kv_heads) + ")");
  if (r.has("attention_bias") && r.obj()["attention_bias"] == true) return r.error("attention_bias", "true is not supported");
  if (r.has("hidden_act") && r.obj()["hidden_act"] != "silu") return r.error("hidden_act", "must be 'silu'");
  SB_RETURN_IF_ERROR(parse_rope(r, c));
  SB_RETURN_IF_ERROR(parse_layer_types(r, arch, c));
  SB_RETURN_IF_ERROR(parse_linear_attention(r, c));
  SB_RETURN_IF_ERROR(parse_experts(r, arch, c));
  bool has_dense = false;
  for (int64_t i = 0; i < c->n_layers; ++i) has_dense |= !c->layer_is_moe(i);
  c->intermediate_size = 0;
  SB_RETURN_IF_ERROR(r.get_int("intermediate_size", &c->intermediate_size, has_dense));

  if (arch == Arch::kQwen4Exp) return parse_qwen4exp(r, c);
  default_indexer(c);
  return Status::ok();
}

}  // namespace

std::string ModelConfig::describe() const {
  std::ostringstream o;
  o << "arch=" << arch_name(arch) << " vocab_size=" << vocab_size << " hidden_size=" << hidden_size
    << " intermediate_size=" << intermediate_size << " n_layers=" << n_layers << " n_heads=" << n_heads
    << " n_kv_heads=" << n_kv_heads << " head_dim=" << head_dim << " rms_norm_eps=" << fmt_double(rms_norm_eps)
    << " rope_theta=" << fmt_double(rope_theta) << " partial_rotary_factor=" << fmt_double(partial_rotary_factor)
    << " tie_word_embeddings=" << tie_word_embeddings << " layer_types=[";
  for (size_t i = 0; i < layer_types.size(); ++i) o << (i ? "," : "") << layer_type_name(layer_types[i]);
  o << "] conv_kernel=" << conv_kernel << " lin_key_head_dim=" << lin_key_head_dim
    << " lin_value_head_dim=" << lin_value_head_dim << " lin_n_key_heads=" << lin_n_key_heads
    << " lin_n_value_heads=" << lin_n_value_heads << " n_experts=" << n_experts
    << " n_experts_per_tok=" << n_experts_per_tok << " moe_intermediate_size=" << moe_intermediate_size
    << " shared_expert_intermediate_size=" << shared_expert_intermediate_size << " norm_topk_prob=" << norm_topk_prob
    << " decoder_sparse_step=" << decoder_sparse_step << " mlp_only_layers=[";
  for (size_t i = 0; i < mlp_only_layers.size(); ++i) o << (i ? "," : "") << mlp_only_layers[i];
  o << "] index_n_heads=" << index_n_heads << " index_head_dim=" << index_head_dim
    << " index_compress_ratio=" << index_compress_ratio << " index_topk_blocks=" << index_topk_blocks
    << " attention_gated=" << attention_gated << " norm_weight_offset=" << norm_weight_offset
    << " tensor_prefix=" << tensor_prefix;
  if (a_stored_negated) o << " a_stored_negated=1";  // absent otherwise: checkpoints' fingerprints unchanged
  if (value_heads_tiled) o << " value_heads_tiled=1";
  if (qkvz_split) o << " qkvz_split=1";
  if (index_qk_split) o << " index_qk_split=1";
  if (arch == Arch::kQwen4Exp) o << qwen4exp_describe(*this);
  return o.str();
}

Status parse_config_json(const std::string& json_text, const std::string& source, ModelConfig* out) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Status::invalid(source + ": not valid JSON");
  if (!root.is_object()) return Status::invalid(source + ": not a JSON object");
  if (!root.contains("model_type") || !root["model_type"].is_string())
    return Status::invalid(source + ": field 'model_type' is missing");
  std::string type = root["model_type"].get<std::string>();
  ModelConfig c;
  if (type == "statebank_qsa")  // the stand-in for qwen4exp written before the real model was public
    return Status::unsupported(source + ": model_type statebank_qsa was retired; use qwen4exp (gen-model --arch qwen4exp)");
  if (type == "qwen3" || type == "qwen3_next" || type == "qwen4_exp_text") {
    Arch arch = type == "qwen3" ? Arch::kQwen3 : type == "qwen3_next" ? Arch::kQwen3Next : Arch::kQwen4Exp;
    SB_RETURN_IF_ERROR(parse_text(ConfigReader(root, source, ""), arch, &c));
    if (arch == Arch::kQwen4Exp) c.tensor_prefix = "model.";  // Qwen4ExpForCausalLM: the text model alone
  } else if (type == "qwen3_5" || type == "qwen3_5_moe" || type == "qwen4_exp") {
    Arch arch = type == "qwen3_5" ? Arch::kQwen35 : type == "qwen3_5_moe" ? Arch::kQwen35Moe : Arch::kQwen4Exp;
    if (!root.contains("text_config") || !root["text_config"].is_object())
      return Status::invalid(source + ": field 'text_config' is missing (model_type " + type + " nests the text model)");
    ConfigReader text(root["text_config"], source, "text_config.");
    SB_RETURN_IF_ERROR(parse_text(text, arch, &c));
    // The top-level flag is the one the composite model applies.
    SB_RETURN_IF_ERROR(ConfigReader(root, source, "").get_bool("tie_word_embeddings", &c.tie_word_embeddings));
  } else {
    return Status::unsupported(source + ": field 'model_type' is '" + type +
                               "', not one of qwen3, qwen3_next, qwen3_5, qwen3_5_moe, qwen4_exp, qwen4_exp_text");
  }
  *out = std::move(c);
  return Status::ok();
}

Status parse_config(const std::string& dir, ModelConfig* out) {
  std::string path = dir + "/config.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::io_error(path + ": read failed");
  return parse_config_json(ss.str(), path, out);
}

std::string config_to_json(const ModelConfig& c) {
  ordered_json t;
  const bool q4 = c.arch == Arch::kQwen4Exp;
  // qwen4exp flat is Qwen4ExpForCausalLM's layout: the text model at "model.".
  bool nested = is_nested(c.arch) && !(q4 && c.tensor_prefix == "model.");
  if (!nested) {
    t["architectures"] = json::array({c.arch == Arch::kQwen3       ? "Qwen3ForCausalLM"
                                      : c.arch == Arch::kQwen3Next ? "Qwen3NextForCausalLM"
                                                                   : "Qwen4ExpForCausalLM"});
    t["model_type"] = q4 ? "qwen4_exp_text" : arch_name(c.arch);
  } else {
    t["model_type"] = c.arch == Arch::kQwen35 ? "qwen3_5_text" : q4 ? "qwen4_exp_text" : "qwen3_5_moe_text";
  }
  t["vocab_size"] = c.vocab_size;
  t["hidden_size"] = c.hidden_size;
  if (c.intermediate_size > 0) t["intermediate_size"] = c.intermediate_size;
  t["num_hidden_layers"] = c.n_layers;
  t["num_attention_heads"] = c.n_heads;
  t["num_key_value_heads"] = c.n_kv_heads;
  t["head_dim"] = c.head_dim;
  t["hidden_act"] = "silu";
  t["rms_norm_eps"] = c.rms_norm_eps;
  t["attention_bias"] = false;
  t["tie_word_embeddings"] = c.tie_word_embeddings;
  if (c.max_position_embeddings > 0) t["max_position_embeddings"] = c.max_position_embeddings;
  if (c.mtp_layers > 0) t["mtp_num_hidden_layers"] = c.mtp_layers;
  t["rope_parameters"] = {{"rope_type", "default"},
                          {"rope_theta", c.rope_theta},
                          {"partial_rotary_factor", c.partial_rotary_factor}};
  json types = json::array();
  for (int64_t i = 0; i < c.n_layers; ++i)
    types.push_back(q4 ? qwen4exp_layer_type_name(c, i) : layer_type_name(c.layer_types[i]));
  t["layer_types"] = types;
  if (c.arch != Arch::kQwen3) {
    t["linear_conv_kernel_dim"] = c.conv_kernel;
    t["linear_key_head_dim"] = c.lin_key_head_dim;
    t["linear_value_head_dim"] = c.lin_value_head_dim;
    t["linear_num_key_heads"] = c.lin_n_key_heads;
    t["linear_num_value_heads"] = c.lin_n_value_heads;
  }
  if (c.arch == Arch::kQwen3Next || c.arch == Arch::kQwen35Moe || q4) {
    t["num_experts"] = c.n_experts;
    if (c.n_experts > 0) {
      t["num_experts_per_tok"] = c.n_experts_per_tok;
      t["moe_intermediate_size"] = c.moe_intermediate_size;
      t["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size;
      if (q4) t["norm_topk_prob"] = c.norm_topk_prob;
      if (c.arch != Arch::kQwen35Moe && !q4) {
        t["norm_topk_prob"] = c.norm_topk_prob;
        t["decoder_sparse_step"] = c.decoder_sparse_step;
        t["mlp_only_layers"] = c.mlp_only_layers;
      }
    }
  }
  if (q4) qwen4exp_to_json(c, &t);
  if (!nested) return t.dump(2) + "\n";
  ordered_json root;
  root["architectures"] = json::array({c.arch == Arch::kQwen35      ? "Qwen3_5ForConditionalGeneration"
                                       : c.arch == Arch::kQwen35Moe ? "Qwen3_5MoeForConditionalGeneration"
                                                                    : "Qwen4ExpForConditionalGeneration"});
  root["model_type"] = q4 ? "qwen4_exp" : arch_name(c.arch);
  root["tie_word_embeddings"] = c.tie_word_embeddings;
  root["text_config"] = t;
  return root.dump(2) + "\n";
}

namespace {

// The tensors of layer `i` (names under `L`), by part: the mixer of a
// linear-attention layer, of a full or sparse attention layer, and the MLP.
using TensorAdder = std::function<void(std::string, std::vector<int64_t>)>;

void linear_attention_tensors(const ModelConfig& c, const std::string& L, const TensorAdder& add) {
  const int64_t H = c.hidden_size;
  const bool q4 = c.arch == Arch::kQwen4Exp;
  const int64_t key_dim = c.lin_n_key_heads * c.lin_key_head_dim;
  const int64_t value_dim = c.lin_n_value_heads * c.lin_value_head_dim;
  const int64_t conv_dim = 2 * key_dim + value_dim;
  const std::string A = L + "linear_attn.";
  const bool flat = c.arch == Arch::kQwen35 || c.arch == Arch::kQwen35Moe || q4;
  if (flat || c.qkvz_split) {
    add(A + "in_proj_qkv.weight", {conv_dim, H});
    add(A + "in_proj_z.weight", {value_dim, H});
  } else {
    add(A + "in_proj_qkvz.weight", {2 * key_dim + 2 * value_dim, H});
  }
  if (flat) {
    add(A + "in_proj_b.weight", {c.lin_n_value_heads, H});
    add(A + "in_proj_a.weight", {c.lin_n_value_heads, H});
  } else {
    add(A + "in_proj_ba.weight", {2 * c.lin_n_value_heads, H});
  }
  add(A + "conv1d.weight", {conv_dim, 1, c.conv_kernel});
  add(A + "dt_bias", {c.lin_n_value_heads});
  add(A + (c.a_stored_negated ? "A" : "A_log"), {c.lin_n_value_heads});
  add(A + "norm.weight", {c.lin_value_head_dim});
  add(A + "out_proj.weight", {H, value_dim});
}

void attention_tensors(const ModelConfig& c, LayerType type, const std::string& L, const TensorAdder& add) {
  const int64_t H = c.hidden_size;
  const std::string A = L + "self_attn.";
  const int64_t q_dim = c.n_heads * c.head_dim;
  add(A + "q_proj.weight", {c.attention_gated ? 2 * q_dim : q_dim, H});
  add(A + "k_proj.weight", {c.n_kv_heads * c.head_dim, H});
  add(A + "v_proj.weight", {c.n_kv_heads * c.head_dim, H});
  add(A + "o_proj.weight", {H, q_dim});
  add(A + "q_norm.weight", {c.head_dim});
  add(A + "k_norm.weight", {c.head_dim});
  if (type != LayerType::kSparseAttention) return;  // only qwen4exp has QSA layers
  if (c.index_qk_split) {
    add(A + "indexer.index_q_proj.weight", {c.index_n_heads * c.index_head_dim, H});
    add(A + "indexer.index_k_proj.weight", {c.index_head_dim, H});
  } else {
    add(A + "indexer.index_qk_proj.weight", {(c.index_n_heads + 1) * c.index_head_dim, H});
  }
  add(A + "indexer.q_layernorm.weight", {c.index_head_dim});
  add(A + "indexer.k_layernorm.weight", {c.index_head_dim});
}

void mlp_tensors(const ModelConfig& c, int64_t i, const std::string& L, const TensorAdder& add) {
  const int64_t H = c.hidden_size;
  const bool q4 = c.arch == Arch::kQwen4Exp;
  const std::string M = L + "mlp.";
  if (c.layer_is_moe(i)) {
    const int64_t E = c.n_experts, I = c.moe_intermediate_size, S = c.shared_expert_intermediate_size;
    add(M + "gate.weight", {E, H});
    if (c.arch == Arch::kQwen35Moe || q4) {
      add(M + "experts.gate_up_proj", {E, 2 * I, H});
      add(M + "experts.down_proj", {E, H, I});
    } else {
      for (int64_t e = 0; e < E; ++e) {
        const std::string X = M + "experts." + std::to_string(e) + ".";
        add(X + "gate_proj.weight", {I, H});
        add(X + "up_proj.weight", {I, H});
        add(X + "down_proj.weight", {H, I});
      }
    }
    add(M + "shared_expert.gate_proj.weight", {S, H});
    add(M + "shared_expert.up_proj.weight", {S, H});
    add(M + "shared_expert.down_proj.weight", {H, S});
    add(M + "shared_expert_gate.weight", {1, H});
  } else {
    add(M + "gate_proj.weight", {c.intermediate_size, H});
    add(M + "up_proj.weight", {c.intermediate_size, H});
    add(M + "down_proj.weight", {H, c.intermediate_size});
  }
}

}  // namespace

std::vector<TensorSpec> expected_tensors(const ModelConfig& c) {
  std::vector<TensorSpec> out;
  const std::string& P = c.tensor_prefix;
  const int64_t H = c.hidden_size;
  const TensorAdder add = [&](std::string name, std::vector<int64_t> shape) {
    out.push_back({std::move(name), std::move(shape)});
  };
  // qwen4exp has hyper-connection mixers where the others have norms.
  const bool q4 = c.arch == Arch::kQwen4Exp;
  add(P + "embed_tokens.weight", {c.vocab_size, H});
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string L = P + "layers." + std::to_string(i) + ".";
    if (q4) qwen4exp_layer_tensors(c, i, &out);
    else add(L + "input_layernorm.weight", {H});
    const LayerType type = c.layer_types[i];
    if (type == LayerType::kLinearAttention) linear_attention_tensors(c, L, add);
    else attention_tensors(c, type, L, add);
    if (!q4) add(L + "post_attention_layernorm.weight", {H});
    mlp_tensors(c, i, L, add);
  }
  if (q4) qwen4exp_head_tensors(c, &out);
  else add(P + "norm.weight", {H});
  if (!c.tie_word_embeddings) add("lm_head.weight", {c.vocab_size, H});
  return out;
}

}  // namespace sb
