// qwen4exp's gen-model presets (model/gen_model.h).
#include "model/gen_model.h"

namespace sb {

namespace {

// The fields every qwen4exp preset shares with the released model, and the
// test presets' sizes of its own parts.
void qwen4exp_fields(bool tiny, ModelConfig& c) {
  c.arch = Arch::kQwen4Exp;
  c.attention_gated = true;
  c.norm_weight_offset = true;
  c.tensor_prefix = "model.language_model.";
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1e7;
  c.partial_rotary_factor = 0.25;
  c.tie_word_embeddings = false;
  c.intermediate_size = 0;  // every layer is MoE
  c.gdn_gate_sigmoid = true;
  c.hc_count = 4;
  c.ple_layers = {1};
  c.ple_embed_dim = c.hidden_size;
  c.ngram_size = 3;
  c.ngram_vocab_divisor = 128;
  c.ngram_seed = 1234;
  c.eos_token_id = 151645;  // <|im_end|> of the Qwen3 tokenizer the checkpoints carry
  c.max_position_embeddings = 262144;
  c.hc_lowrank = tiny ? 16 : 32;
  c.heads_per_ngram = tiny ? 2 : 4;
  c.ngram_vocab_base = tiny ? 1000 : 20000;
  c.ngram_split_parts = tiny ? 2 : 4;
}

// The released model's sizes, fewer experts and a smaller n-gram table.
void bench_shape(ModelConfig& c) {
  c.vocab_size = 248320;
  c.hidden_size = 2560;
  c.n_layers = 48;
  c.n_heads = 24;
  c.n_kv_heads = 2;
  c.head_dim = 256;
  c.conv_kernel = 4;
  c.lin_n_key_heads = 16;
  c.lin_n_value_heads = 48;
  c.lin_key_head_dim = c.lin_value_head_dim = 128;
  c.n_experts = 12;
  c.n_experts_per_tok = 10;
  c.moe_intermediate_size = 640;
  c.shared_expert_intermediate_size = 640;
  c.index_n_heads = 4;
  c.index_head_dim = 128;
  c.index_compress_ratio = 4;
  c.index_topk_blocks = 512;
}

}  // namespace

Status qwen4exp_preset(const std::string& preset, ModelConfig c, ModelConfig* out) {
  if (preset == "tiny" || preset == "small") {
    qwen4exp_fields(preset == "tiny", c);
  } else if (preset == "bench") {
    bench_shape(c);
    qwen4exp_fields(false, c);
    c.hc_lowrank = 320;
    c.heads_per_ngram = 8;
    c.ngram_vocab_base = 200000;
    c.ngram_split_parts = 128;
  } else {
    return Status::invalid("unknown preset '" + preset + "' for qwen4exp (tiny, small, bench)");
  }
  c.layer_types.clear();
  for (int64_t i = 0; i < c.n_layers; ++i)
    c.layer_types.push_back((i + 1) % 4 == 0 ? LayerType::kSparseAttention : LayerType::kLinearAttention);
  *out = std::move(c);
  return Status::ok();
}

}  // namespace sb
