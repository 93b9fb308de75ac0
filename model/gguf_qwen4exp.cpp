// qwen4exp's metadata keys (model/gguf_metadata.h), as llama.cpp's converter
// writes them and its loader reads them: hyper-connections, the indexer, the
// compression ratio per block, the PLE layer and its hash constants.
#include "model/gguf_metadata.h"
#include "model/gguf_layout.h"
#include "model/ngram_hash.h"

namespace sb {

namespace {

std::string key(const std::string& name) { return std::string("qwen4exp.") + name; }

GgufValue u32(int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); }

Status bad(const GgufFile& g, const std::string& name, const std::string& why) {
  return Status::corruption("metadata key " + key(name) + " in file " + g.file() + " " + why);
}

// A positive integer key (absent: an error naming it).
Status positive(const GgufFile& g, const std::string& name, int64_t limit, int64_t* out) {
  SB_RETURN_IF_ERROR(g.get_int(key(name), out));
  if (*out <= 0 || *out > limit)
    return bad(g, name, "is " + std::to_string(*out) + ", outside [1, " + std::to_string(limit) + "]");
  return Status::ok();
}

Status int_list(const GgufFile& g, const std::string& name, size_t n, std::vector<int64_t>* out) {
  const GgufValue* v = nullptr;
  SB_RETURN_IF_ERROR(g.get_array(key(name), "integer", &v));
  if (v->ints.size() != n)
    return bad(g, name, "has " + std::to_string(v->ints.size()) + " entries, not " + std::to_string(n));
  *out = v->ints;
  return Status::ok();
}

constexpr int64_t kMaxSize = int64_t{1} << 24;

// The indexer and its ratio: one ratio, on exactly the attention layers.
Status read_indexer(const GgufFile& g, ModelConfig* c) {
  int64_t top_k = 0;
  SB_RETURN_IF_ERROR(positive(g, "attention.indexer.head_count", kMaxSize, &c->index_n_heads));
  SB_RETURN_IF_ERROR(positive(g, "attention.indexer.key_length", kMaxSize, &c->index_head_dim));
  SB_RETURN_IF_ERROR(positive(g, "attention.indexer.top_k", int64_t{1} << 40, &top_k));
  std::vector<int64_t> ratios;
  SB_RETURN_IF_ERROR(int_list(g, "attention.compress_ratios", static_cast<size_t>(c->n_layers), &ratios));
  c->index_compress_ratio = 0;
  for (int64_t i = 0; i < c->n_layers; ++i) {
    const bool attention = c->layer_types[i] != LayerType::kLinearAttention;
    const int64_t r = ratios[i];
    if (!attention && r != 0)
      return bad(g, "attention.compress_ratios", "gives linear-attention layer " + std::to_string(i) + " ratio " +
                                                     std::to_string(r) + " (must be 0)");
    if (attention && (r <= 0 || (c->index_compress_ratio != 0 && r != c->index_compress_ratio)))
      return bad(g, "attention.compress_ratios", "gives attention layer " + std::to_string(i) + " ratio " +
                                                     std::to_string(r) + "; statebank needs one positive ratio");
    if (attention) c->index_compress_ratio = r;
  }
  if (c->index_compress_ratio == 0) return bad(g, "attention.compress_ratios", "names no attention layer");
  if (top_k % c->index_compress_ratio != 0)
    return bad(g, "attention.indexer.top_k", "(" + std::to_string(top_k) + ") is not a multiple of the ratio " +
                                                 std::to_string(c->index_compress_ratio));
  c->index_topk_blocks = top_k / c->index_compress_ratio;
  return Status::ok();
}

// The PLE layer: one (llama.cpp holds one set of hash constants), on a
// linear-attention layer, with its constants taken as the file gives them.
Status read_ple(const GgufFile& g, const TensorView* table, ModelConfig* c) {
  c->ple_layers.clear();
  if (!g.find(key("ple.layers"))) return Status::ok();
  std::vector<int64_t> layers;
  SB_RETURN_IF_ERROR(int_list(g, "ple.layers", 1, &layers));
  if (layers[0] < 0 || layers[0] >= c->n_layers)
    return bad(g, "ple.layers", "names layer " + std::to_string(layers[0]) + " of " + std::to_string(c->n_layers));
  c->ple_layers = layers;
  int64_t row_dim = 0;
  SB_RETURN_IF_ERROR(positive(g, "ple.ngram_size", 8, &c->ngram_size));
  if (c->ngram_size < 2) return bad(g, "ple.ngram_size", "is " + std::to_string(c->ngram_size) + ", less than 2");
  SB_RETURN_IF_ERROR(positive(g, "ple.heads_per_ngram", 1024, &c->heads_per_ngram));
  SB_RETURN_IF_ERROR(positive(g, "ple.conv_kernel", 1024, &c->ple_conv_kernel));
  SB_RETURN_IF_ERROR(g.get_int(key("ple.eos_token_id"), &c->eos_token_id));
  SB_RETURN_IF_ERROR(positive(g, "embedding_length_per_layer_input", kMaxSize, &row_dim));
  c->ple_embed_dim = row_dim * c->ngram_heads();
  if (c->ple_embed_dim != c->hidden_size)
    return bad(g, "embedding_length_per_layer_input",
               "(" + std::to_string(row_dim) + ") times the " + std::to_string(c->ngram_heads()) +
                   " n-gram heads is not embedding_length " + std::to_string(c->hidden_size));
  const size_t heads = static_cast<size_t>(c->ngram_heads());
  SB_RETURN_IF_ERROR(int_list(g, "ple.layer_multipliers", static_cast<size_t>(c->ngram_size), &c->ngram_multipliers));
  SB_RETURN_IF_ERROR(int_list(g, "ple.head_vocab_sizes", heads, &c->ngram_head_vocab));
  SB_RETURN_IF_ERROR(int_list(g, "ple.head_offsets", heads, &c->ngram_head_offset));
  if (!table || table->shape.size() != 2)
    return Status::not_found("file " + g.file() + " has no 2-D tensor per_layer_token_embd.weight (the n-gram table)");
  c->ngram_table_rows = table->shape[0];
  for (size_t h = 0; h < heads; ++h) {
    const int64_t vocab = c->ngram_head_vocab[h], offset = c->ngram_head_offset[h];
    if (vocab <= 0 || offset < 0 || offset > c->ngram_table_rows - vocab)
      return bad(g, "ple.head_offsets", "and head_vocab_sizes put head " + std::to_string(h) + " at rows [" +
                                            std::to_string(offset) + ", " + std::to_string(offset + vocab) +
                                            "), outside the table's " + std::to_string(c->ngram_table_rows));
  }
  for (int64_t m : c->ngram_multipliers)
    if (m <= 0) return bad(g, "ple.layer_multipliers", "holds " + std::to_string(m) + " (must be positive)");
  c->ngram_split_parts = 1;  // the table is one tensor
  return Status::ok();
}

}  // namespace

void put_qwen4exp_config(const ModelConfig& c, GgufWriter* w) {
  w->set(key("hyper_connection.count"), u32(c.hc_count));
  w->set(key("hyper_connection.low_rank"), u32(c.hc_lowrank));
  w->set(key("attention.indexer.head_count"), u32(c.index_n_heads));
  w->set(key("attention.indexer.key_length"), u32(c.index_head_dim));
  w->set(key("attention.indexer.top_k"), u32(c.index_topk_blocks * c.index_compress_ratio));  // the budget in tokens
  std::vector<int64_t> ratios;
  for (LayerType t : c.layer_types) ratios.push_back(t == LayerType::kLinearAttention ? 0 : c.index_compress_ratio);
  w->set(key("attention.compress_ratios"), GgufValue::int_array(GgufType::kI32, ratios));
  if (c.ple_layers.empty()) return;
  const NgramHash hash = ngram_hash(c, 0);
  w->set(key("ple.layers"), GgufValue::int_array(GgufType::kI32, c.ple_layers));
  w->set(key("ple.ngram_size"), u32(c.ngram_size));
  w->set(key("ple.heads_per_ngram"), u32(c.heads_per_ngram));
  w->set(key("ple.conv_kernel"), u32(c.ple_conv_kernel));
  w->set(key("ple.eos_token_id"), u32(c.eos_token_id));
  w->set(key("embedding_length_per_layer_input"), u32(c.ple_embed_dim / c.ngram_heads()));
  w->set(key("ple.layer_multipliers"), GgufValue::int_array(GgufType::kU64, hash.multipliers));
  w->set(key("ple.head_offsets"), GgufValue::int_array(GgufType::kU64, hash.head_offset));
  w->set(key("ple.head_vocab_sizes"), GgufValue::int_array(GgufType::kU64, hash.head_vocab));
}

Status read_qwen4exp_config(const GgufFile& g, ModelConfig* c) {
  SB_RETURN_IF_ERROR(positive(g, "hyper_connection.count", 64, &c->hc_count));
  if (c->hc_count < 2) return bad(g, "hyper_connection.count", "is 1; qwen4exp mixes at least 2 streams");
  SB_RETURN_IF_ERROR(positive(g, "hyper_connection.low_rank", kMaxSize, &c->hc_lowrank));
  SB_RETURN_IF_ERROR(read_indexer(g, c));
  SB_RETURN_IF_ERROR(read_ple(g, g.find_tensor("per_layer_token_embd.weight"), c));
  c->gdn_gate_sigmoid = true;  // llama.cpp's qwen4exp gates its Gated DeltaNet with a sigmoid
  return Status::ok();
}

}  // namespace sb
