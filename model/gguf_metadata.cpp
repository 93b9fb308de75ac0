#include "model/gguf_metadata.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/gguf_layout.h"

namespace sb {

using nlohmann::json;

namespace {

std::string key(const ModelConfig& c, const std::string& name) {
  return std::string(gguf_arch_name(c.arch)) + "." + name;
}

GgufValue u32(int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); }

// Interleaved M-RoPE: slot j takes the t/h/w position by j % 3; with text
// positions all three are equal, so a split covering every slot is plain
// RoPE (Qwen3.5's [11, 11, 10] for 32 slots).
std::vector<int64_t> rope_sections(int64_t rotary_dim) {
  const int64_t n = rotary_dim / 2;
  return {(n + 2) / 3, (n + 1) / 3, n / 3, 0};
}

// The MTP head goes into the file as one block after the trunk's
// (model/gguf_layout.h); qwen3 has none in llama.cpp.
int64_t nextn_blocks(const ModelConfig& c) { return c.mtp_layers == 1 && c.arch != Arch::kQwen3 ? 1 : 0; }

}  // namespace

void put_config(const ModelConfig& c, GgufWriter* w) {
  const int64_t nextn = nextn_blocks(c);
  w->set(key(c, "block_count"), u32(c.n_layers + nextn));
  if (nextn > 0) w->set(key(c, "nextn_predict_layers"), u32(nextn));
  w->set(key(c, "context_length"), u32(c.max_position_embeddings > 0 ? c.max_position_embeddings : 32768));
  w->set(key(c, "embedding_length"), u32(c.hidden_size));
  if (c.intermediate_size > 0) w->set(key(c, "feed_forward_length"), u32(c.intermediate_size));
  w->set(key(c, "attention.head_count"), u32(c.n_heads));
  w->set(key(c, "attention.head_count_kv"), u32(c.n_kv_heads));
  w->set(key(c, "attention.key_length"), u32(c.head_dim));
  w->set(key(c, "attention.value_length"), u32(c.head_dim));
  w->set(key(c, "attention.layer_norm_rms_epsilon"), GgufValue::f32(static_cast<float>(c.rms_norm_eps)));
  w->set(key(c, "rope.freq_base"), GgufValue::f32(static_cast<float>(c.rope_theta)));
  w->set(key(c, "rope.dimension_count"), u32(c.rotary_dim()));
  if (c.n_experts > 0) {
    w->set(key(c, "expert_count"), u32(c.n_experts));
    w->set(key(c, "expert_used_count"), u32(c.n_experts_per_tok));
    w->set(key(c, "expert_feed_forward_length"), u32(c.moe_intermediate_size));
    if (c.shared_expert_intermediate_size > 0)
      w->set(key(c, "expert_shared_feed_forward_length"), u32(c.shared_expert_intermediate_size));
  }
  if (c.arch == Arch::kQwen3) return;
  w->set(key(c, "ssm.conv_kernel"), u32(c.conv_kernel));
  w->set(key(c, "ssm.state_size"), u32(c.lin_key_head_dim));
  w->set(key(c, "ssm.group_count"), u32(c.lin_n_key_heads));
  w->set(key(c, "ssm.time_step_rank"), u32(c.lin_n_value_heads));
  w->set(key(c, "ssm.inner_size"), u32(c.lin_n_value_heads * c.lin_value_head_dim));
  int64_t interval = 0;
  std::vector<int64_t> recurrent;
  for (size_t i = 0; i < c.layer_types.size(); ++i) {
    recurrent.push_back(c.layer_types[i] == LayerType::kLinearAttention);
    if (!recurrent.back() && interval == 0) interval = static_cast<int64_t>(i) + 1;
  }
  recurrent.insert(recurrent.end(), static_cast<size_t>(nextn), 0);  // llama.cpp reads one entry per block
  w->set(key(c, "full_attention_interval"), u32(interval > 0 ? interval : 4));
  w->set(key(c, "attention.recurrent_layers"), GgufValue::int_array(GgufType::kBool, recurrent));
  if (c.arch == Arch::kQwen35 || c.arch == Arch::kQwen35Moe || c.arch == Arch::kQwen4Exp)
    w->set(key(c, "rope.dimension_sections"), GgufValue::int_array(GgufType::kI32, rope_sections(c.rotary_dim())));
  if (c.arch == Arch::kQwen4Exp) put_qwen4exp_config(c, w);
}

namespace {

Status arch_of(const std::string& name, const std::string& file, Arch* out) {
  for (Arch a : {Arch::kQwen3, Arch::kQwen3Next, Arch::kQwen35, Arch::kQwen35Moe, Arch::kQwen4Exp})
    if (name == gguf_arch_name(a)) {
      *out = a;
      return Status::ok();
    }
  return Status::unsupported("file " + file + ": general.architecture is '" + name +
                             "'; statebank serves qwen3, qwen3next, qwen35, qwen35moe and qwen4exp");
}

// Layer types: {arch}.attention.recurrent_layers when present, else every
// full_attention_interval-th layer is full attention (llama.cpp's rule).
Status layer_types(const GgufFile& g, const ModelConfig& c, std::vector<LayerType>* out) {
  out->assign(static_cast<size_t>(c.n_layers), LayerType::kFullAttention);
  if (c.arch == Arch::kQwen3) return Status::ok();
  const GgufValue* rec = nullptr;
  if (g.find(key(c, "attention.recurrent_layers"))) {
    SB_RETURN_IF_ERROR(g.get_array(key(c, "attention.recurrent_layers"), "integer", &rec));
    if (static_cast<int64_t>(rec->ints.size()) < c.n_layers)
      return Status::corruption("metadata key " + key(c, "attention.recurrent_layers") + " in file " + g.file() +
                                " has " + std::to_string(rec->ints.size()) + " entries for " +
                                std::to_string(c.n_layers) + " layers");
    for (int64_t i = 0; i < c.n_layers; ++i)
      if (rec->ints[i]) (*out)[i] = LayerType::kLinearAttention;
    return Status::ok();
  }
  int64_t interval = 4;
  if (g.find(key(c, "full_attention_interval")))
    SB_RETURN_IF_ERROR(g.get_int(key(c, "full_attention_interval"), &interval));
  if (interval < 1)
    return Status::corruption("metadata key " + key(c, "full_attention_interval") + " in file " + g.file() + " is " +
                              std::to_string(interval));
  for (int64_t i = 0; i < c.n_layers; ++i)
    if ((i + 1) % interval != 0) (*out)[i] = LayerType::kLinearAttention;
  return Status::ok();
}

// Sizes are bounded before anything is built from them (a layer list, the
// expected tensors); the tensors' shapes then check them exactly.
constexpr int64_t kMaxLayers = 4096, kMaxSize = int64_t{1} << 24;

Status read_sizes(const GgufFile& g, ModelConfig* c) {
  auto get = [&](const std::string& name, int64_t* v) -> Status {
    SB_RETURN_IF_ERROR(g.get_int(key(*c, name), v));
    const int64_t limit = name == "block_count" ? kMaxLayers : name == "context_length" ? int64_t{1} << 40 : kMaxSize;
    if (*v < 0 || *v > limit)
      return Status::corruption("metadata key " + key(*c, name) + " in file " + g.file() + " is " + std::to_string(*v) +
                                ", outside [0, " + std::to_string(limit) + "]");
    return Status::ok();
  };
  auto opt = [&](const std::string& name, int64_t* v) { return g.find(key(*c, name)) ? get(name, v) : Status::ok(); };
  SB_RETURN_IF_ERROR(get("block_count", &c->n_layers));
  // Multi-token-prediction blocks come after the trunk's (blk.<n_layers>...),
  // counted in block_count: one is the MTP head (model/gguf_layout.h).
  int64_t mtp = 0;
  SB_RETURN_IF_ERROR(opt("nextn_predict_layers", &mtp));
  if (mtp > c->n_layers)
    return Status::corruption("file " + g.file() + ": nextn_predict_layers " + std::to_string(mtp) +
                              " exceeds block_count " + std::to_string(c->n_layers));
  c->n_layers -= mtp;
  c->mtp_layers = mtp;
  SB_RETURN_IF_ERROR(opt("context_length", &c->max_position_embeddings));
  SB_RETURN_IF_ERROR(get("embedding_length", &c->hidden_size));
  SB_RETURN_IF_ERROR(opt("feed_forward_length", &c->intermediate_size));
  SB_RETURN_IF_ERROR(get("attention.head_count", &c->n_heads));
  SB_RETURN_IF_ERROR(get("attention.head_count_kv", &c->n_kv_heads));
  c->head_dim = c->n_heads > 0 ? c->hidden_size / c->n_heads : 0;
  SB_RETURN_IF_ERROR(opt("attention.key_length", &c->head_dim));
  SB_RETURN_IF_ERROR(g.get_float(key(*c, "attention.layer_norm_rms_epsilon"), &c->rms_norm_eps));
  if (g.find(key(*c, "rope.freq_base"))) SB_RETURN_IF_ERROR(g.get_float(key(*c, "rope.freq_base"), &c->rope_theta));
  int64_t rot = c->head_dim;
  SB_RETURN_IF_ERROR(opt("rope.dimension_count", &rot));
  c->partial_rotary_factor = c->head_dim > 0 ? static_cast<double>(rot) / static_cast<double>(c->head_dim) : 1.0;
  SB_RETURN_IF_ERROR(opt("expert_count", &c->n_experts));
  if (c->n_experts > 0) {
    SB_RETURN_IF_ERROR(get("expert_used_count", &c->n_experts_per_tok));
    SB_RETURN_IF_ERROR(get("expert_feed_forward_length", &c->moe_intermediate_size));
    SB_RETURN_IF_ERROR(opt("expert_shared_feed_forward_length", &c->shared_expert_intermediate_size));
  }
  if (c->arch == Arch::kQwen3) return Status::ok();
  int64_t inner = 0;
  SB_RETURN_IF_ERROR(opt("ssm.conv_kernel", &c->conv_kernel));
  SB_RETURN_IF_ERROR(get("ssm.state_size", &c->lin_key_head_dim));
  SB_RETURN_IF_ERROR(get("ssm.group_count", &c->lin_n_key_heads));
  SB_RETURN_IF_ERROR(get("ssm.time_step_rank", &c->lin_n_value_heads));
  SB_RETURN_IF_ERROR(get("ssm.inner_size", &inner));
  c->lin_value_head_dim = c->lin_n_value_heads > 0 ? inner / c->lin_n_value_heads : 0;
  if (c->lin_n_value_heads <= 0 || c->lin_n_key_heads <= 0 || inner % c->lin_n_value_heads != 0 ||
      c->lin_n_value_heads % c->lin_n_key_heads != 0)
    return Status::corruption("file " + g.file() + ": ssm.inner_size " + std::to_string(inner) + ", time_step_rank " +
                              std::to_string(c->lin_n_value_heads) + " and group_count " +
                              std::to_string(c->lin_n_key_heads) + " do not make whole heads");
  return Status::ok();
}

}  // namespace

Status read_config(const GgufFile& g, ModelConfig* out) {
  std::string arch;
  SB_RETURN_IF_ERROR(g.get_string("general.architecture", &arch));
  ModelConfig c;
  SB_RETURN_IF_ERROR(arch_of(arch, g.file(), &c.arch));
  SB_RETURN_IF_ERROR(read_sizes(g, &c));
  const TensorView* embd = g.find_tensor("token_embd.weight");
  if (!embd || embd->shape.size() != 2)
    return Status::not_found("file " + g.file() + " has no 2-D tensor token_embd.weight");
  c.vocab_size = embd->shape[0];
  c.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;
  SB_RETURN_IF_ERROR(layer_types(g, c, &c.layer_types));
  if (c.arch == Arch::kQwen35Moe || c.arch == Arch::kQwen4Exp) c.intermediate_size = 0;
  if (c.arch == Arch::kQwen4Exp) SB_RETURN_IF_ERROR(read_qwen4exp_config(g, &c));
  // Through config.json's validation: one set of rules for every source.
  ModelConfig checked;
  SB_RETURN_IF_ERROR(parse_config_json(config_to_json(c), "metadata of " + g.file(), &checked));
  checked.norm_weight_offset = false;  // the file holds 1 + w
  checked.a_stored_negated = checked.arch != Arch::kQwen3;
  checked.value_heads_tiled =
      checked.arch == Arch::kQwen35 || checked.arch == Arch::kQwen35Moe || checked.arch == Arch::kQwen4Exp;
  checked.qkvz_split = checked.arch == Arch::kQwen3Next;
  if (checked.arch == Arch::kQwen4Exp) {  // what config.json cannot say (model/config.h)
    checked.index_qk_split = true;
    checked.ngram_multipliers = c.ngram_multipliers;
    checked.ngram_head_vocab = c.ngram_head_vocab;
    checked.ngram_head_offset = c.ngram_head_offset;
    checked.ngram_table_rows = c.ngram_table_rows;
  }
  *out = std::move(checked);
  return Status::ok();
}

namespace {

Status read_json(const std::string& path, json* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  *out = json::parse(ss.str(), nullptr, false);
  if (out->is_discarded() || !out->is_object()) return Status::corruption(path + ": not a JSON object");
  return Status::ok();
}

std::string merge_text(const json& m) {
  if (m.is_string()) return m.get<std::string>();
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
    return m[0].get<std::string>() + " " + m[1].get<std::string>();
  return "";
}

// Token types as llama.cpp numbers them.
constexpr int64_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

}  // namespace

Status put_vocab(const std::string& dir, int64_t vocab_size, GgufWriter* w) {
  json tok, cfg;
  const std::string path = dir + "/tokenizer.json";
  SB_RETURN_IF_ERROR(read_json(path, &tok));
  if (!tok.contains("model") || !tok["model"].is_object() || !tok["model"].contains("vocab") ||
      !tok["model"]["vocab"].is_object() || !tok["model"].contains("merges") || !tok["model"]["merges"].is_array())
    return Status::corruption(path + ": model.vocab and model.merges are needed (byte-level BPE)");
  std::vector<std::string> tokens(static_cast<size_t>(vocab_size));
  std::vector<int64_t> types(static_cast<size_t>(vocab_size), kUnused);
  for (int64_t i = 0; i < vocab_size; ++i) tokens[i] = "[PAD" + std::to_string(i) + "]";
  auto place = [&](int64_t id, const std::string& text, int64_t type) -> Status {
    if (id < 0 || id >= vocab_size)
      return Status::invalid(path + ": token id " + std::to_string(id) + " is beyond vocab_size " +
                             std::to_string(vocab_size));
    tokens[id] = text;
    types[id] = type;
    return Status::ok();
  };
  for (auto it = tok["model"]["vocab"].begin(); it != tok["model"]["vocab"].end(); ++it)
    if (it.value().is_number_integer()) SB_RETURN_IF_ERROR(place(it.value().get<int64_t>(), it.key(), kNormal));
  std::map<std::string, int64_t> added;
  for (const json& a : tok.value("added_tokens", json::array())) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string())
      return Status::corruption(path + ": an added_tokens entry needs an integer id and a string content");
    const std::string text = a["content"].get<std::string>();
    // tokenizer.json's own flag (convert.py also makes every <|...|> control):
    // a non-special added token is matched in text even when special tokens
    // are not, and the ids must stay those of tokenizer.json.
    const bool special = a.value("special", false) == true;
    SB_RETURN_IF_ERROR(place(a["id"].get<int64_t>(), text, special ? kControl : kUserDefined));
    added[text] = a["id"].get<int64_t>();
  }
  std::vector<std::string> merges;
  for (const json& m : tok["model"]["merges"]) merges.push_back(merge_text(m));
  w->set("tokenizer.ggml.model", GgufValue::string("gpt2"));
  // Qwen3.5's split pattern lets letter runs take combining marks (\p{M}).
  const std::string pre =
      tok.value("pre_tokenizer", json::object()).dump().find("\\p{L}\\p{M}") != std::string::npos ? "qwen35" : "qwen2";
  w->set("tokenizer.ggml.pre", GgufValue::string(pre));
  w->set("tokenizer.ggml.tokens", GgufValue::string_array(std::move(tokens)));
  w->set("tokenizer.ggml.token_type", GgufValue::int_array(GgufType::kI32, std::move(types)));
  w->set("tokenizer.ggml.merges", GgufValue::string_array(std::move(merges)));
  if (!read_json(dir + "/tokenizer_config.json", &cfg).is_ok()) return Status::ok();
  auto id_key = [&](const char* field, const char* gguf_key) {
    if (cfg.contains(field) && cfg[field].is_string() && added.count(cfg[field].get<std::string>()))
      w->set(gguf_key, u32(added[cfg[field].get<std::string>()]));
  };
  id_key("eos_token", "tokenizer.ggml.eos_token_id");
  id_key("pad_token", "tokenizer.ggml.padding_token_id");
  w->set("tokenizer.ggml.add_bos_token", GgufValue::boolean(cfg.value("add_bos_token", false) == true));
  if (cfg.contains("chat_template") && cfg["chat_template"].is_string())
    w->set("tokenizer.chat_template", GgufValue::string(cfg["chat_template"].get<std::string>()));
  return Status::ok();
}

}  // namespace sb
