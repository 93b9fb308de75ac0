// qwen4exp (Qwen3.8-Flash-Next): its config.json as published, the tensors
// its checkpoint holds under their real names, the n-gram hash constants the
// config defines, and gen-model's checkpoints of it loading back.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "model/checkpoint.h"
#include "tests/model/config_expect.h"
#include "model/gen_model.h"
#include "model/model.h"
#include "model/ngram_hash.h"
#include "model/ngram_table.h"
#include "model/qwen4exp.h"
#include "model/weights.h"
#include "runtime/cpu/backend.h"
#include "runtime/threads.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

using nlohmann::json;

// The released model's config.json (Qwen4ExpForConditionalGeneration), the
// text fields that matter; layer_types as the checkpoint lists them.
json released_config() {
  json types = json::array();
  for (int i = 0; i < 48; ++i) types.push_back((i + 1) % 4 == 0 ? "full_attention" : "linear_attention");
  json text = json::parse(R"({
    "model_type": "qwen4_exp_text", "vocab_size": 248320, "hidden_size": 2560, "num_hidden_layers": 48,
    "num_attention_heads": 24, "num_key_value_heads": 2, "head_dim": 256, "hidden_act": "silu",
    "rms_norm_eps": 1e-6, "max_position_embeddings": 262144, "tie_word_embeddings": false,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                        "mrope_section": [11, 11, 10], "mrope_interleaved": true},
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 48, "output_gate_type": "sigmoid",
    "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 640,
    "shared_expert_intermediate_size": 640, "norm_topk_prob": true,
    "hc_count": 4, "hc_lowrank": 320,
    "indexer_n_heads": 4, "indexer_kv_heads": 1, "indexer_head_dim": 128, "indexer_budget": 2048,
    "indexer_compress_ratio": 4,
    "ple_layer_ids": [2], "ple_embed_dim": 2560, "ple_conv_kernel_size": 4, "ngram_size": 3,
    "heads_per_ngram": 8, "ngram_vocab_size_base": 20000000, "make_ngram_vocab_size_divisible_by": 128,
    "split_ngram_parts": 128, "eos_token_id": [248046, 248044], "mtp_num_hidden_layers": 1})");
  text["layer_types"] = types;
  json root = {{"architectures", {"Qwen4ExpForConditionalGeneration"}},
               {"model_type", "qwen4_exp"},
               {"tie_word_embeddings", false},
               {"text_config", text},
               {"vision_config", {{"depth", 27}}}};
  return root;
}

Status parse(const json& j, ModelConfig* c) { return testing::parse_config_as(j, c); }
void expect_error(const json& j, const std::string& field) { testing::expect_config_error(j, field); }

TEST(Qwen4ExpConfigTest, ParsesTheReleasedConfig) {
  ModelConfig c;
  Status s = parse(released_config(), &c);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(c.arch, Arch::kQwen4Exp);
  EXPECT_EQ(c.tensor_prefix, "model.language_model.");
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.rotary_dim(), 64);
  for (int64_t i = 0; i < 48; ++i) {
    EXPECT_EQ(c.layer_types[i], (i + 1) % 4 == 0 ? LayerType::kSparseAttention : LayerType::kLinearAttention) << i;
    EXPECT_TRUE(c.layer_is_moe(i)) << i;
  }
  EXPECT_EQ(c.index_n_heads, 4);
  EXPECT_EQ(c.index_head_dim, 128);
  EXPECT_EQ(c.index_compress_ratio, 4);
  EXPECT_EQ(c.index_topk_blocks, 512);  // budget 2048 / ratio 4
  EXPECT_EQ(c.hc_count, 4);
  EXPECT_EQ(c.hc_lowrank, 320);
  EXPECT_EQ(c.ple_layers, std::vector<int64_t>{1});  // ple_layer_ids counts from 1
  EXPECT_TRUE(c.layer_has_ple(1));
  EXPECT_EQ(c.layer_types[1], LayerType::kLinearAttention);
  EXPECT_EQ(c.ngram_heads(), 16);
  EXPECT_EQ(c.ple_embed_dim / c.ngram_heads(), 160);
  EXPECT_EQ(c.ngram_seed, 1234);  // absent: the definition's default
  EXPECT_EQ(c.eos_token_id, 248046);  // the first of the list
  EXPECT_TRUE(c.gdn_gate_sigmoid);
  EXPECT_EQ(c.mtp_layers, 1);
}

TEST(Qwen4ExpConfigTest, TransformersLayerNamesAndTheIntervalGiveTheSameLayers) {
  ModelConfig a, b, d;
  ASSERT_TRUE(parse(released_config(), &a).is_ok());
  json j = released_config();
  for (int i = 0; i < 48; ++i)
    if ((i + 1) % 4 == 0) j["text_config"]["layer_types"][i] = i == 3 ? "hybrid_indexed" : "deepseek_sparse_attention";
  ASSERT_TRUE(parse(j, &b).is_ok());
  j["text_config"].erase("layer_types");
  ASSERT_TRUE(parse(j, &d).is_ok());
  EXPECT_EQ(a.describe(), b.describe());
  EXPECT_EQ(a.describe(), d.describe());
}

TEST(Qwen4ExpConfigTest, TextOnlyConfigIsTheCausalLmLayout) {
  json j = released_config()["text_config"];
  j["architectures"] = {"Qwen4ExpForCausalLM"};
  ModelConfig c;
  ASSERT_TRUE(parse(j, &c).is_ok());
  EXPECT_EQ(c.arch, Arch::kQwen4Exp);
  EXPECT_EQ(c.tensor_prefix, "model.");
}

TEST(Qwen4ExpConfigTest, BadFieldsAreNamed) {
  auto with = [](const char* key, json v) {
    json j = released_config();
    j["text_config"][key] = std::move(v);
    return j;
  };
  auto without = [](const char* key) {
    json j = released_config();
    j["text_config"].erase(key);
    return j;
  };
  expect_error(with("indexer_kv_heads", 2), "indexer_kv_heads");
  expect_error(with("indexer_budget", 2050), "indexer_budget");
  expect_error(without("indexer_budget"), "indexer_budget");
  expect_error(with("indexer_head_dim", 32), "indexer_head_dim");  // below the 64 rotary dims
  expect_error(with("indexer_compress_ratio", 3), "indexer_budget");
  expect_error(with("indexer_compress_ratio", 128), "indexer_compress_ratio");  // does not divide the prefill grid
  expect_error(with("ple_layer_ids", json::array({0})), "ple_layer_ids");  // counts from 1
  expect_error(with("ple_layer_ids", json::array({49})), "ple_layer_ids");
  expect_error(with("ple_embed_dim", 2561), "ple_embed_dim");
  expect_error(without("eos_token_id"), "eos_token_id");
  expect_error(with("output_gate_type", "gelu"), "output_gate_type");
  expect_error(with("hc_count", 1), "hc_count");
  expect_error(with("split_ngram_parts", 7), "split_ngram_parts");
  expect_error(without("num_experts"), "num_experts");
  json bad_type = released_config();
  bad_type["text_config"]["layer_types"][3] = "sparse_attention";
  expect_error(bad_type, "layer_types");
}

// Reference values from an independent evaluation of the definition
// (transformers' Qwen4ExpTextNGramEmbedding: the (g+1)-th prime at or above
// the base for head g, splitmix64-drawn odd multipliers below 2^63 / vocab).
// The padded row count is the released table's: 128 shards of 2,500,012 rows.
TEST(Qwen4ExpConfigTest, NgramHashConstantsOfTheReleasedModel) {
  ModelConfig c;
  ASSERT_TRUE(parse(released_config(), &c).is_ok());
  NgramHash h = ngram_hash(c, 0);
  EXPECT_EQ(h.multipliers, (std::vector<int64_t>{23703573157769, 20109073645365, 8052911324071}));
  ASSERT_EQ(h.head_vocab.size(), 16u);
  EXPECT_EQ(h.head_vocab[0], 20000003);
  EXPECT_EQ(h.head_vocab[1], 20000023);
  EXPECT_EQ(h.head_vocab[15], 20000171);
  EXPECT_EQ(h.head_offset[1], 20000003);
  EXPECT_EQ(h.head_offset[15], 300001275);
  EXPECT_EQ(h.table_rows, 320001536);
  EXPECT_EQ(h.table_rows / c.ngram_split_parts, 2500012);
  // A second PLE layer would take the next 16 primes.
  EXPECT_EQ(ngram_hash(c, 1).head_vocab[0], 20000213);
}

TEST(Qwen4ExpConfigTest, NgramRowsAndTheEosCut) {
  ModelConfig c;
  ASSERT_TRUE(preset_config(Arch::kQwen4Exp, "tiny", &c).is_ok());
  NgramHash h = ngram_hash(c, 0);
  EXPECT_EQ(h.head_vocab, (std::vector<int64_t>{1009, 1013, 1019, 1021}));
  EXPECT_EQ(h.table_rows, 4096);
  const int64_t eos = c.eos_token_id;
  int64_t ctx[2], rows[4];
  // Token 5 after [.., 7]: the first token of the sequence before 7 reads as eos.
  const int64_t history[] = {7};
  ngram_context(history, 1, 2, eos, ctx);
  EXPECT_EQ(ctx[0], 7);
  EXPECT_EQ(ctx[1], eos);
  ngram_rows(h, c.heads_per_ngram, 5, ctx, rows);
  EXPECT_EQ(std::vector<int64_t>(rows, rows + 4), (std::vector<int64_t>{987, 1638, 3015, 3667}));
  // Behind an eos, everything at or before it reads as eos.
  const int64_t cut[] = {3, 4, eos, 9};
  ngram_context(cut, 4, 2, eos, ctx);
  EXPECT_EQ(ctx[0], 9);
  EXPECT_EQ(ctx[1], eos);
  ngram_context(cut, 3, 2, eos, ctx);
  EXPECT_EQ(ctx[0], eos);
  EXPECT_EQ(ctx[1], eos);
  const int64_t plain[] = {3, 4, 8, 9};
  ngram_context(plain, 4, 2, eos, ctx);
  EXPECT_EQ(ctx[0], 9);
  EXPECT_EQ(ctx[1], 8);
}

TEST(Qwen4ExpConfigTest, TensorsHaveTheCheckpointsNames) {
  ModelConfig c;
  ASSERT_TRUE(preset_config(Arch::kQwen4Exp, "tiny", &c).is_ok());
  std::set<std::string> names;
  for (const TensorSpec& s : expected_tensors(c)) names.insert(s.name);
  const std::string P = "model.language_model.";
  for (const char* n : {"embed_tokens.weight", "hyper_connection_mixer.hc_norm.weight",
                        "hyper_connection_mixer.input_mix_weight_down.weight",
                        "hyper_connection_mixer.input_mix_weight_up.weight",
                        "layers.0.attn_hyper_connection.block_inject_weight.weight",
                        "layers.0.mlp_hyper_connection.input_mix_weight_up.weight",
                        "layers.0.linear_attn.in_proj_qkv.weight", "layers.0.linear_attn.in_proj_a.weight",
                        "layers.1.ple.ple_embedding.ngram_embedding.shard_0.weight",
                        "layers.1.ple.ple_embedding.ngram_embedding.shard_1.weight",
                        "layers.1.ple.ple_embedding.layer_multipliers", "layers.1.ple.key_proj.weight",
                        "layers.1.ple.norm_conv.weight", "layers.1.ple.conv1d.weight",
                        "layers.3.self_attn.q_proj.weight", "layers.3.self_attn.indexer.index_qk_proj.weight",
                        "layers.3.self_attn.indexer.q_layernorm.weight",
                        "layers.3.self_attn.indexer.k_layernorm.weight", "layers.3.mlp.experts.gate_up_proj",
                        "layers.3.mlp.shared_expert_gate.weight"})
    EXPECT_TRUE(names.count(P + n)) << n;
  EXPECT_TRUE(names.count("lm_head.weight"));
  for (const std::string& n : names) {
    EXPECT_EQ(n.find("input_layernorm"), std::string::npos) << n;  // mixers in place of the norms
    EXPECT_EQ(n.find("post_attention_layernorm"), std::string::npos) << n;
    if (n.find(".ple.") != std::string::npos) {
      EXPECT_EQ(n.rfind(P + "layers.1.", 0), 0u) << n;
    }
  }
  EXPECT_FALSE(names.count(P + "norm.weight"));
  EXPECT_FALSE(names.count(P + "layers.0.ple.key_proj.weight"));
}

TEST(Qwen4ExpConfigTest, PresetsRoundTripThroughConfigJson) {
  for (const char* preset : {"tiny", "small", "bench"}) {
    ModelConfig c, back;
    ASSERT_TRUE(preset_config(Arch::kQwen4Exp, preset, &c).is_ok());
    std::string text = config_to_json(c);
    Status s = parse_config_json(text, "gen", &back);
    ASSERT_TRUE(s.is_ok()) << preset << ": " << s.to_string();
    EXPECT_EQ(c.describe(), back.describe()) << preset;
    json j = json::parse(text);
    EXPECT_EQ(j["model_type"], "qwen4_exp");
    EXPECT_EQ(j["architectures"][0], "Qwen4ExpForConditionalGeneration");
    EXPECT_EQ(j["text_config"]["model_type"], "qwen4_exp_text");
    // transformers' config class accepts only its own layer names.
    for (const json& t : j["text_config"]["layer_types"])
      EXPECT_TRUE(t == "linear_attention" || t == "deepseek_sparse_attention" || t == "hybrid_indexed") << t;
  }
  ModelConfig tiny;
  ASSERT_TRUE(preset_config(Arch::kQwen4Exp, "tiny", &tiny).is_ok());
  // Top-k really drops blocks in tests: 4 blocks of 4 tokens selected.
  EXPECT_EQ(tiny.index_topk_blocks * tiny.index_compress_ratio, 16);
  ModelConfig bench;
  ASSERT_TRUE(preset_config(Arch::kQwen4Exp, "bench", &bench).is_ok());
  EXPECT_EQ(bench.hidden_size, 2560);
  EXPECT_EQ(bench.n_layers, 48);
  EXPECT_EQ(bench.n_heads, 24);
  EXPECT_EQ(bench.lin_n_value_heads, 48);
  EXPECT_EQ(bench.index_topk_blocks, 512);
  EXPECT_EQ(bench.n_experts_per_tok, 10);
  ModelConfig none;
  EXPECT_FALSE(preset_config(Arch::kQwen4Exp, "0.8b", &none).is_ok());
}

std::string tokenizer_dir() {
  std::string dir;
  Status s = find_tokenizer_dir("", &dir);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return dir;
}

// Overwrites entry 0 of an I64 tensor in a written model.safetensors.
void poke_first_int(const std::string& dir, const std::string& name, int64_t value) {
  std::unique_ptr<Checkpoint> ck;
  ASSERT_TRUE(Checkpoint::open(dir, &ck).is_ok());
  const TensorView* v = ck->find(name);
  ASSERT_NE(v, nullptr);
  std::string path = dir + "/model.safetensors";
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t header_len;
  std::memcpy(&header_len, bytes.data(), 8);
  // Find the tensor's bytes by its value: the first multiplier is unique in the file.
  int64_t old;
  std::memcpy(&old, v->data, 8);
  std::string needle(reinterpret_cast<const char*>(&old), 8);
  size_t at = bytes.find(needle, 8 + header_len);
  ASSERT_NE(at, std::string::npos);
  std::memcpy(&bytes[at], &value, 8);
  ck.reset();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

TEST(Qwen4ExpConfigTest, GenModelCheckpointLoadsAndItsConstantsAreChecked) {
  testing::TempDir dir;
  ModelConfig c;
  ASSERT_TRUE(preset_config(Arch::kQwen4Exp, "tiny", &c).is_ok());
  ASSERT_TRUE(write_random_checkpoint(c, 7, DType::kBF16, tokenizer_dir(), dir.path()).is_ok());
  ModelConfig back;
  ASSERT_TRUE(parse_config(dir.path(), &back).is_ok());
  EXPECT_EQ(back.describe(), c.describe());
  {
    std::unique_ptr<Checkpoint> ck;
    ASSERT_TRUE(Checkpoint::open(dir.path(), &ck).is_ok());
    WeightSet ws;
    Status s = WeightSet::bind(*ck, back, &ws);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    const std::string M = "model.language_model.layers.1.ple.ple_embedding.";
    const TensorView& m = ws.get(M + "layer_multipliers");
    EXPECT_EQ(m.dtype, DType::kI64);
    std::vector<int64_t> got(3);
    std::memcpy(got.data(), m.data, 24);
    EXPECT_EQ(got, ngram_hash(c, 0).multipliers);
    EXPECT_EQ(ws.get(M + "ngram_embedding.shard_1.weight").shape, (std::vector<int64_t>{2048, 16}));
  }
  {
    // It loads to run (its forward pass against the reference:
    // tests/runtime/reference_test.cpp), without an MTP head even when asked.
    std::unique_ptr<Model> model;
    RuntimeOptions options;
    options.mtp_head = true;
    Status s = Model::load(dir.path(), options, cpu_kernels_factory(), &model);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_FALSE(model->has_mtp());
  }
  // The same file with another multiplier hashes other rows: refused, naming the tensor.
  poke_first_int(dir.path(), "model.language_model.layers.1.ple.ple_embedding.layer_multipliers", 12345);
  std::unique_ptr<Checkpoint> ck;
  ASSERT_TRUE(Checkpoint::open(dir.path(), &ck).is_ok());
  WeightSet ws;
  Status s = WeightSet::bind(*ck, back, &ws);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("layer_multipliers"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("12345"), std::string::npos) << s.message();
}

// Qwen4ExpForCausalLM's layout (flat config, tensors under "model.") loads
// as the composite one does; a hash constant stored as floats is refused.
TEST(Qwen4ExpConfigTest, CausalLmLayoutLoadsAndConstantsMustBeIntegers) {
  testing::TempDir flat, floats;
  ModelConfig c;
  ASSERT_TRUE(preset_config(Arch::kQwen4Exp, "tiny", &c).is_ok());
  c.tensor_prefix = "model.";
  ASSERT_TRUE(write_random_checkpoint(c, 5, DType::kBF16, tokenizer_dir(), flat.path()).is_ok());
  ModelConfig back;
  ASSERT_TRUE(parse_config(flat.path(), &back).is_ok());
  EXPECT_EQ(back.tensor_prefix, "model.");
  EXPECT_EQ(back.describe(), c.describe());
  std::unique_ptr<Checkpoint> ck;
  ASSERT_TRUE(Checkpoint::open(flat.path(), &ck).is_ok());
  WeightSet ws;
  Status s = WeightSet::bind(*ck, back, &ws);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_NE(ws.find("model.layers.1.ple.key_proj.weight"), nullptr);

  // The same tensors, the multipliers as F32 (as a converter that casts every
  // tensor to float would leave them): bind names the tensor and the type.
  const std::string M = "model.layers.1.ple.ple_embedding.layer_multipliers";
  SafetensorsWriter w;
  for (const auto& [name, v] : ck->tensors()) {
    const uint8_t* b = static_cast<const uint8_t*>(v.data);
    if (name == M) {
      std::vector<uint8_t> bytes(4 * 3);
      for (int i = 0; i < 3; ++i) {
        int64_t x;
        std::memcpy(&x, b + 8 * i, 8);
        const float f = static_cast<float>(x);
        std::memcpy(bytes.data() + 4 * i, &f, 4);
      }
      w.add(name, DType::kF32, v.shape, std::move(bytes));
    } else {
      w.add(name, v.dtype, v.shape, std::vector<uint8_t>(b, b + v.nbytes));
    }
  }
  ASSERT_TRUE(w.write(floats.path() + "/model.safetensors").is_ok());
  std::unique_ptr<Checkpoint> fck;
  ASSERT_TRUE(Checkpoint::open(floats.path(), &fck).is_ok());
  WeightSet fws;
  s = WeightSet::bind(*fck, back, &fws);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find(M), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("i64"), std::string::npos) << s.message();
}

// The table is read where the mapping has it: each shard's view is the
// checkpoint's own bytes, and a gathered row is that row, across shard edges.
TEST(Qwen4ExpConfigTest, NgramTableReadsRowsInPlace) {
  testing::TempDir dir;
  ModelConfig c;
  ASSERT_TRUE(preset_config(Arch::kQwen4Exp, "tiny", &c).is_ok());
  ASSERT_TRUE(write_random_checkpoint(c, 3, DType::kBF16, tokenizer_dir(), dir.path()).is_ok());
  std::unique_ptr<Checkpoint> ck;
  ASSERT_TRUE(Checkpoint::open(dir.path(), &ck).is_ok());
  WeightSet ws;
  ASSERT_TRUE(WeightSet::bind(*ck, c, &ws).is_ok());
  NgramTable table;
  ASSERT_TRUE(NgramTable::bind(ws, c, 0, &table).is_ok());
  EXPECT_EQ(table.rows(), ngram_hash(c, 0).table_rows);
  EXPECT_EQ(table.dim(), c.ple_embed_dim / c.ngram_heads());
  const std::string S = "model.language_model.layers.1.ple.ple_embedding.ngram_embedding.shard_";
  for (int s = 0; s < 2; ++s) EXPECT_EQ(table.shards()[s].data, ck->find(S + std::to_string(s) + ".weight")->data);
  ThreadPool pool(1);
  auto kernels = make_cpu_kernels(&pool);
  const std::vector<int64_t> rows = {0, 2047, 2048, 4095, 1638};
  std::vector<float> got(rows.size() * table.dim());
  table.gather(*kernels, rows, got.data());
  for (size_t j = 0; j < rows.size(); ++j) {
    const TensorView& shard = *ck->find(S + std::to_string(rows[j] / 2048) + ".weight");
    std::vector<float> want(table.dim());
    convert_to_f32(shard.dtype, static_cast<const uint8_t*>(shard.data) + (rows[j] % 2048) * table.dim() * 2,
                   table.dim(), want.data());
    EXPECT_EQ(std::memcmp(want.data(), got.data() + j * table.dim(), want.size() * 4), 0) << "row " << rows[j];
  }
  NgramTable none;
  EXPECT_FALSE(NgramTable::bind(ws, c, 1, &none).is_ok());
}

}  // namespace
}  // namespace sb
