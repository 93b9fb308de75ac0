// ModelConfig: everything the runtime needs from a checkpoint's config.json,
// normalised across the families (spec: docs/model-spec.md section 1 and
// "qwen4exp").
//
// Accepted layouts: flat `qwen3`, `qwen3_next`, `qwen4_exp_text`; nested `qwen3_5` / `qwen3_5_moe` / `qwen4_exp` (fields
// under `text_config`, tie flag at either level); rope settings in
// `rope_parameters` first, then top-level keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace sb {

enum class Arch { kQwen3, kQwen3Next, kQwen35, kQwen35Moe, kQwen4Exp };
enum class LayerType { kFullAttention, kLinearAttention, kSparseAttention };

// "qwen3", "qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen4exp"
const char* arch_name(Arch arch);
const char* layer_type_name(LayerType type);  // "full_attention", ...

struct ModelConfig {
  Arch arch = Arch::kQwen3;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // dense MLP width
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 1e6;
  double partial_rotary_factor = 1.0;  // qwen3: 1.0; hybrids: 0.25
  bool tie_word_embeddings = false;
  std::vector<LayerType> layer_types;  // one per layer
  // The context length (max_position_embeddings); 0 when config.json has
  // none. A limit for the server, not a number of the forward pass: it is
  // not part of describe(), so it never changes a fingerprint.
  int64_t max_position_embeddings = 0;

  // Gated DeltaNet (linear_attention layers).
  int64_t conv_kernel = 4;
  int64_t lin_key_head_dim = 0;
  int64_t lin_value_head_dim = 0;
  int64_t lin_n_key_heads = 0;
  int64_t lin_n_value_heads = 0;

  // Mixture of experts; n_experts == 0 means dense MLP everywhere.
  int64_t n_experts = 0;
  int64_t n_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;
  bool norm_topk_prob = true;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;

  // qwen4exp's QSA layers' indexer (docs/qsa.md), whose config gives
  // indexer_budget = index_topk_blocks * ratio.
  int64_t index_n_heads = 4;
  int64_t index_head_dim = 128;
  int64_t index_compress_ratio = 4;
  int64_t index_topk_blocks = 512;

  // qwen4exp only (docs/model-spec.md "qwen4exp"); left at these values elsewhere.
  // Hyper-connections: hc_count residual streams, mixers of rank hc_lowrank
  // in place of every norm.
  int64_t hc_count = 0;
  int64_t hc_lowrank = 0;
  // The PLE n-gram layers, 0-based (config.json's ple_layer_ids count from 1).
  std::vector<int64_t> ple_layers;
  int64_t ple_embed_dim = 0;       // the concatenated rows of all heads
  int64_t ple_conv_kernel = 4;     // dilation is ngram_size
  int64_t ngram_size = 3;          // 2- up to ngram_size-grams
  int64_t heads_per_ngram = 8;
  int64_t ngram_vocab_base = 20000000;
  int64_t ngram_vocab_divisor = 128;
  int64_t ngram_seed = 1234;
  // How many safetensors tensors (`ngram_embedding.shard_<i>.weight`) hold
  // the table's rows; a storage layout, not part of describe().
  int64_t ngram_split_parts = 1;
  // The id that cuts n-grams (the PLE hash reads tokens behind it as it);
  // -1 when the config names none.
  int64_t eos_token_id = -1;
  bool gdn_gate_sigmoid = false;  // Gated DeltaNet's output gate: sigmoid instead of SiLU

  // Derived by parse_config from the family.
  bool attention_gated = true;   // per-head [query|gate] q_proj layout; false for qwen3
  bool norm_weight_offset = true;  // zero-centred (1 + w) RMSNorm; false for qwen3
  std::string tensor_prefix = "model.";  // "model.language_model." for qwen3_5*
  // Set by the GGUF loader (model/gguf_model.h), never by config.json: each
  // Gated DeltaNet layer holds linear_attn.A = -exp(A_log), GGUF's ssm_a,
  // instead of linear_attn.A_log.
  bool a_stored_negated = false;
  // Qwen3.5 from a GGUF file: every tensor indexed by value head keeps the
  // file's tiled order (model/gguf_model.h) and the layer puts the heads in
  // order itself; part of describe() when set.
  bool value_heads_tiled = false;
  // Qwen3-Next from a GGUF file: in_proj_qkvz is held as the file holds it,
  // split in two, in_proj_qkv [all q | all k | all v] (attn_qkv) and
  // in_proj_z (attn_gate), each in its own type; part of describe() when set.
  bool qkvz_split = false;
  // qwen4exp from a GGUF file: the indexer's projection is held as the file
  // holds it, two tensors (indexer.q_proj, indexer.k_proj) bound as
  // self_attn.indexer.index_q_proj / index_k_proj; the layer fuses the same
  // rows either way, so its numbers do not change.
  bool index_qk_split = false;
  // qwen4exp from a GGUF file: the n-gram hash constants as the file's
  // metadata holds them (a file has no base, divisor or seed to derive them
  // from) and the table's rows; empty otherwise (ngram_hash derives them).
  // Part of describe() when set.
  std::vector<int64_t> ngram_multipliers, ngram_head_vocab, ngram_head_offset;
  int64_t ngram_table_rows = 0;
  // Multi-token-prediction layers (`mtp_num_hidden_layers`, or
  // `num_nextn_predict_layers`): the head's tensors are `mtp.*` (model/mtp_head.h).
  // 0: none. Not part of describe(): the head changes no logit of the model
  // and no bit of its State, only the drafts speculation proposes.
  int64_t mtp_layers = 0;

  int64_t rotary_dim() const { return static_cast<int64_t>(head_dim * partial_rotary_factor); }
  bool layer_has_ple(int64_t layer) const;
  int64_t ngram_heads() const { return (ngram_size - 1) * heads_per_ngram; }
  bool layer_is_moe(int64_t layer) const;
  // A stable text form of every field that changes the numbers (all but
  // max_position_embeddings); part of the model fingerprint.
  std::string describe() const;
};

// Reads DIR/config.json. Every missing or inconsistent field is an error that
// names the field and the file.
Status parse_config(const std::string& dir, ModelConfig* out);
Status parse_config_json(const std::string& json_text, const std::string& source, ModelConfig* out);
// Writes a config.json that parse_config reads back into the same ModelConfig,
// in the layout the family's real checkpoints use.
std::string config_to_json(const ModelConfig& config);

// One tensor the checkpoint must hold for this config.
struct TensorSpec {
  std::string name;             // full safetensors name
  std::vector<int64_t> shape;
  bool integer = false;         // I64 constants (qwen4exp's n-gram hash), not weights
};
// Every tensor of the text model, in a stable order. Routed experts use the
// family's native layout (per-expert 2-D for qwen3_next, fused 3-D for
// qwen3_5_moe and qwen4exp); the loader also accepts the other layout.
// qwen4exp's n-gram table is ngram_split_parts tensors of equal rows.
std::vector<TensorSpec> expected_tensors(const ModelConfig& config);

}  // namespace sb
