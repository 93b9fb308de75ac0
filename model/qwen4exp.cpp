#include "model/qwen4exp.h"

#include <cstring>

#include "model/ngram_hash.h"

namespace sb {

using nlohmann::json;

namespace {

std::string layer_prefix(const ModelConfig& c, int64_t layer) {
  return c.tensor_prefix + "layers." + std::to_string(layer) + ".";
}

// The PLE layer number (place in ple_layers) of a tensor name under
// "layers.<i>.ple.", or -1.
int64_t ple_index_of(const ModelConfig& c, const std::string& name) {
  for (size_t k = 0; k < c.ple_layers.size(); ++k)
    if (name.rfind(layer_prefix(c, c.ple_layers[k]) + "ple.", 0) == 0) return static_cast<int64_t>(k);
  return -1;
}

void mixer_tensors(const ModelConfig& c, const std::string& M, bool inject, std::vector<TensorSpec>* out) {
  const int64_t W = c.hc_count * c.hidden_size;
  out->push_back({M + "hc_norm.weight", {W}});
  out->push_back({M + "input_mix_weight_down.weight", {c.hc_lowrank, W}});
  out->push_back({M + "input_mix_weight_up.weight", {W, c.hc_lowrank}});
  if (inject) out->push_back({M + "block_inject_weight.weight", {c.hc_count, W}});
}

// The indexer: all five fields or none (then the config is not qwen4exp's).
Status parse_indexer_fields(const ConfigReader& r, ModelConfig* c) {
  int64_t kv_heads = 0, budget = 0;
  SB_RETURN_IF_ERROR(r.get_int("indexer_n_heads", &c->index_n_heads, true));
  SB_RETURN_IF_ERROR(r.get_int("indexer_kv_heads", &kv_heads, true));
  SB_RETURN_IF_ERROR(r.get_int("indexer_head_dim", &c->index_head_dim, true));
  SB_RETURN_IF_ERROR(r.get_int("indexer_budget", &budget, true));
  SB_RETURN_IF_ERROR(r.get_int("indexer_compress_ratio", &c->index_compress_ratio, true));
  if (kv_heads != 1) return r.error("indexer_kv_heads", "is " + std::to_string(kv_heads) + ", must be 1");
  if (budget % c->index_compress_ratio != 0)
    return r.error("indexer_budget", "(" + std::to_string(budget) + ") is not a multiple of indexer_compress_ratio (" +
                                         std::to_string(c->index_compress_ratio) + ")");
  if (64 % c->index_compress_ratio != 0)
    return r.error("indexer_compress_ratio", "(" + std::to_string(c->index_compress_ratio) +
                                                 ") must divide 64 (the prefill grid)");
  if (c->index_head_dim % 2 != 0) return r.error("indexer_head_dim", "must be even (RoPE pairs)");
  if (c->rotary_dim() > c->index_head_dim)
    return r.error("indexer_head_dim", "(" + std::to_string(c->index_head_dim) + ") is less than the rotary dimensions (" +
                                           std::to_string(c->rotary_dim()) + ")");
  c->index_topk_blocks = budget / c->index_compress_ratio;
  return Status::ok();
}

// eos_token_id: one id, or a list whose first id is the one the n-gram hash
// cuts on (transformers' definition).
Status parse_eos(const ConfigReader& r, ModelConfig* c) {
  c->eos_token_id = -1;
  if (!r.has("eos_token_id")) return Status::ok();
  const json& v = r.obj()["eos_token_id"];
  const json& id = v.is_array() && !v.empty() ? v[0] : v;
  if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= c->vocab_size)
    return r.error("eos_token_id", "must be a token id (or a list of them) below vocab_size");
  c->eos_token_id = id.get<int64_t>();
  return Status::ok();
}

Status parse_ple(const ConfigReader& r, ModelConfig* c) {
  c->ple_layers.clear();
  if (r.has("ple_layer_ids")) {
    const json& v = r.obj()["ple_layer_ids"];
    if (!v.is_array()) return r.error("ple_layer_ids", "must be an array of layer numbers (counting from 1)");
    for (const json& e : v) {
      if (!e.is_number_integer() || e.get<int64_t>() < 1 || e.get<int64_t>() > c->n_layers)
        return r.error("ple_layer_ids", "entry " + e.dump() + " is not a layer number in [1, " +
                                            std::to_string(c->n_layers) + "] (they count from 1)");
      if (!c->layer_has_ple(e.get<int64_t>() - 1)) c->ple_layers.push_back(e.get<int64_t>() - 1);
    }
  }
  c->ple_embed_dim = c->hidden_size;
  SB_RETURN_IF_ERROR(r.get_int("ple_embed_dim", &c->ple_embed_dim, false));
  SB_RETURN_IF_ERROR(r.get_int("ple_conv_kernel_size", &c->ple_conv_kernel, false));
  SB_RETURN_IF_ERROR(r.get_int("ngram_size", &c->ngram_size, false, 2));
  SB_RETURN_IF_ERROR(r.get_int("heads_per_ngram", &c->heads_per_ngram, false));
  SB_RETURN_IF_ERROR(r.get_int("ngram_vocab_size_base", &c->ngram_vocab_base, false, 2));
  SB_RETURN_IF_ERROR(r.get_int("make_ngram_vocab_size_divisible_by", &c->ngram_vocab_divisor, false));
  SB_RETURN_IF_ERROR(r.get_int("seed", &c->ngram_seed, false, 0));
  SB_RETURN_IF_ERROR(r.get_int("split_ngram_parts", &c->ngram_split_parts, false));
  if (c->ple_layers.empty()) return Status::ok();
  if (c->ple_embed_dim % c->ngram_heads() != 0)
    return r.error("ple_embed_dim", "(" + std::to_string(c->ple_embed_dim) + ") is not a multiple of the n-gram heads (" +
                                        std::to_string(c->ngram_heads()) + " = (ngram_size - 1) * heads_per_ngram)");
  if (c->eos_token_id < 0) return r.error("eos_token_id", "is missing (the PLE n-gram hash cuts on it)");
  for (size_t k = 0; k < c->ple_layers.size(); ++k) {
    const int64_t rows = ngram_hash(*c, static_cast<int64_t>(k)).table_rows;
    if (rows % c->ngram_split_parts != 0)
      return r.error("split_ngram_parts", "(" + std::to_string(c->ngram_split_parts) + ") does not divide the " +
                                              std::to_string(rows) + " rows of the n-gram table");
  }
  return Status::ok();
}

}  // namespace

bool qwen4exp_attention_name(const std::string& name) {
  return name == "full_attention" || name == "deepseek_sparse_attention" || name == "hybrid_indexed";
}

const char* qwen4exp_layer_type_name(const ModelConfig& c, int64_t layer) {
  if (c.layer_types[layer] == LayerType::kLinearAttention) return "linear_attention";
  return c.layer_has_ple(layer) ? "hybrid_indexed" : "deepseek_sparse_attention";
}

Status parse_qwen4exp(const ConfigReader& r, ModelConfig* c) {
  c->hc_count = 4;
  c->hc_lowrank = 320;
  SB_RETURN_IF_ERROR(r.get_int("hc_count", &c->hc_count, false, 2));
  SB_RETURN_IF_ERROR(r.get_int("hc_lowrank", &c->hc_lowrank, false));
  SB_RETURN_IF_ERROR(parse_indexer_fields(r, c));
  SB_RETURN_IF_ERROR(parse_eos(r, c));
  SB_RETURN_IF_ERROR(parse_ple(r, c));
  std::string gate = r.has("output_gate_type") ? r.obj()["output_gate_type"].dump() : "\"silu\"";
  if (gate != "\"sigmoid\"" && gate != "\"silu\"") return r.error("output_gate_type", "must be 'sigmoid' or 'silu'");
  c->gdn_gate_sigmoid = gate == "\"sigmoid\"";
  return Status::ok();
}

std::string qwen4exp_describe(const ModelConfig& c) {
  std::string s = " hc_count=" + std::to_string(c.hc_count) + " hc_lowrank=" + std::to_string(c.hc_lowrank) +
                  " ple_layers=[";
  for (size_t i = 0; i < c.ple_layers.size(); ++i) s += (i ? "," : "") + std::to_string(c.ple_layers[i]);
  s += "] ple_embed_dim=" + std::to_string(c.ple_embed_dim) + " ple_conv_kernel=" + std::to_string(c.ple_conv_kernel) +
       " ngram_size=" + std::to_string(c.ngram_size) + " heads_per_ngram=" + std::to_string(c.heads_per_ngram) +
       " ngram_vocab_base=" + std::to_string(c.ngram_vocab_base) +
       " ngram_vocab_divisor=" + std::to_string(c.ngram_vocab_divisor) + " ngram_seed=" + std::to_string(c.ngram_seed) +
       " eos_token_id=" + std::to_string(c.eos_token_id) + " gdn_gate_sigmoid=" + std::to_string(c.gdn_gate_sigmoid);
  if (c.ngram_multipliers.empty()) return s;  // derived from the fields above
  auto list = [&](const char* name, const std::vector<int64_t>& v) {
    s += std::string(" ") + name + "=[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    s += "]";
  };
  list("ngram_multipliers", c.ngram_multipliers);
  list("ngram_head_vocab", c.ngram_head_vocab);
  list("ngram_head_offset", c.ngram_head_offset);
  return s + " ngram_table_rows=" + std::to_string(c.ngram_table_rows);
}

void qwen4exp_to_json(const ModelConfig& c, nlohmann::ordered_json* t) {
  (*t)["hc_count"] = c.hc_count;
  (*t)["hc_lowrank"] = c.hc_lowrank;
  (*t)["indexer_n_heads"] = c.index_n_heads;
  (*t)["indexer_kv_heads"] = 1;
  (*t)["indexer_head_dim"] = c.index_head_dim;
  (*t)["indexer_budget"] = c.index_topk_blocks * c.index_compress_ratio;
  (*t)["indexer_compress_ratio"] = c.index_compress_ratio;
  json ids = json::array();
  for (int64_t l : c.ple_layers) ids.push_back(l + 1);
  (*t)["ple_layer_ids"] = ids;
  (*t)["ple_embed_dim"] = c.ple_embed_dim;
  (*t)["ple_conv_kernel_size"] = c.ple_conv_kernel;
  (*t)["ngram_size"] = c.ngram_size;
  (*t)["heads_per_ngram"] = c.heads_per_ngram;
  (*t)["ngram_vocab_size_base"] = c.ngram_vocab_base;
  (*t)["make_ngram_vocab_size_divisible_by"] = c.ngram_vocab_divisor;
  (*t)["seed"] = c.ngram_seed;
  (*t)["split_ngram_parts"] = c.ngram_split_parts;
  (*t)["output_gate_type"] = c.gdn_gate_sigmoid ? "sigmoid" : "silu";
  if (c.eos_token_id >= 0) (*t)["eos_token_id"] = c.eos_token_id;
}

void qwen4exp_layer_tensors(const ModelConfig& c, int64_t layer, std::vector<TensorSpec>* out) {
  const std::string L = layer_prefix(c, layer);
  const int64_t H = c.hidden_size, W = c.hc_count * H, D = c.ple_embed_dim;
  for (size_t k = 0; k < c.ple_layers.size(); ++k) {
    if (c.ple_layers[k] != layer) continue;
    const std::string P = L + "ple.";
    const NgramHash hash = ngram_hash(c, static_cast<int64_t>(k));
    const int64_t heads = c.ngram_heads();
    for (int64_t s = 0; s < c.ngram_split_parts; ++s)
      out->push_back({P + "ple_embedding.ngram_embedding.shard_" + std::to_string(s) + ".weight",
                      {hash.table_rows / c.ngram_split_parts, D / heads}});
    out->push_back({P + "ple_embedding.layer_multipliers", {c.ngram_size}, true});
    out->push_back({P + "ple_embedding.ngram_heads_vocab_sizes", {heads}, true});
    out->push_back({P + "ple_embedding.ngram_heads_offsets", {heads}, true});
    out->push_back({P + "key_proj.weight", {W, D}});
    out->push_back({P + "value_proj.weight", {H, D}});
    out->push_back({P + "norm_key.weight", {W}});
    out->push_back({P + "norm_query.weight", {W}});
    out->push_back({P + "norm_conv.weight", {W}});
    out->push_back({P + "conv1d.weight", {W, 1, c.ple_conv_kernel}});
  }
  mixer_tensors(c, L + "attn_hyper_connection.", true, out);
  mixer_tensors(c, L + "mlp_hyper_connection.", true, out);
}

void qwen4exp_head_tensors(const ModelConfig& c, std::vector<TensorSpec>* out) {
  mixer_tensors(c, c.tensor_prefix + "hyper_connection_mixer.", false, out);
}

bool qwen4exp_constant(const ModelConfig& c, const std::string& name, std::vector<int64_t>* values) {
  const int64_t k = ple_index_of(c, name);
  if (k < 0) return false;
  const NgramHash hash = ngram_hash(c, k);
  const std::string E = layer_prefix(c, c.ple_layers[k]) + "ple.ple_embedding.";
  if (name == E + "layer_multipliers") *values = hash.multipliers;
  else if (name == E + "ngram_heads_vocab_sizes") *values = hash.head_vocab;
  else if (name == E + "ngram_heads_offsets") *values = hash.head_offset;
  else return false;
  return true;
}

Status qwen4exp_check_constants(const Checkpoint& ck, const ModelConfig& c) {
  for (const auto& [name, view] : ck.tensors()) {
    std::vector<int64_t> want;
    if (view.dtype != DType::kI64 || !qwen4exp_constant(c, name, &want)) continue;
    for (size_t i = 0; i < want.size(); ++i) {
      int64_t got;
      std::memcpy(&got, static_cast<const uint8_t*>(view.data) + 8 * i, 8);
      if (got != want[i])
        return Status::invalid("tensor " + name + " in file " + view.file + " holds " + std::to_string(got) +
                               " at entry " + std::to_string(i) + ", but the config defines " +
                               std::to_string(want[i]) + " (n-gram hash constants disagree with config.json)");
    }
  }
  return Status::ok();
}

}  // namespace sb
