// Config parsing across the families, and every config error naming its field
// and file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "tests/model/config_expect.h"
#include "model/gen_model.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

using nlohmann::json;

// A Qwen3-Next-80B-A3B-like config, shrunk, in the older top-level rope layout.
json next_config() {
  return json::parse(R"({
    "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
    "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 8,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "hidden_act": "silu",
    "rms_norm_eps": 1e-6, "rope_theta": 10000000, "partial_rotary_factor": 0.25,
    "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 16,
    "linear_value_head_dim": 8, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
    "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
    "shared_expert_intermediate_size": 40, "norm_topk_prob": true, "decoder_sparse_step": 1,
    "mlp_only_layers": [], "tie_word_embeddings": false})");
}

// A Qwen3.5-0.8B config, as published (nested, rope_parameters in text_config).
json qwen35_config() {
  return json::parse(R"({
    "architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
    "tie_word_embeddings": true,
    "text_config": {
      "model_type": "qwen3_5_text", "vocab_size": 248320, "hidden_size": 1024, "intermediate_size": 3584,
      "num_hidden_layers": 24, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
      "rms_norm_eps": 1e-6, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
      "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 16,
      "full_attention_interval": 4, "attn_output_gate": true, "mamba_ssm_dtype": "float32",
      "mtp_num_hidden_layers": 1, "tie_word_embeddings": false,
      "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                          "mrope_interleaved": true, "mrope_section": [11, 11, 10]}
    },
    "vision_config": {"depth": 12}})");
}

json qwen3_config() {
  return json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936, "hidden_size": 1024,
    "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
    "head_dim": 128, "rms_norm_eps": 1e-6, "rope_theta": 1000000, "tie_word_embeddings": true,
    "max_position_embeddings": 40960, "rope_scaling": null})");
}

Status parse(const json& j, ModelConfig* c) { return testing::parse_config_as(j, c); }
void expect_error(const json& j, const std::string& field) { testing::expect_config_error(j, field); }

TEST(ConfigTest, ParsesQwen3NextWithTopLevelRope) {
  ModelConfig c;
  ASSERT_TRUE(parse(next_config(), &c).is_ok());
  EXPECT_EQ(c.arch, Arch::kQwen3Next);
  EXPECT_EQ(c.vocab_size, 1000);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 96);
  EXPECT_EQ(c.n_layers, 8);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.rotary_dim(), 8);
  EXPECT_EQ(c.lin_key_head_dim, 16);
  EXPECT_EQ(c.lin_value_head_dim, 8);
  EXPECT_EQ(c.lin_n_key_heads, 2);
  EXPECT_EQ(c.lin_n_value_heads, 4);
  EXPECT_EQ(c.n_experts, 8);
  EXPECT_EQ(c.n_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 24);
  EXPECT_EQ(c.shared_expert_intermediate_size, 40);
  EXPECT_TRUE(c.attention_gated);
  EXPECT_TRUE(c.norm_weight_offset);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.tensor_prefix, "model.");
  ASSERT_EQ(c.layer_types.size(), 8u);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(c.layer_types[i], (i + 1) % 4 == 0 ? LayerType::kFullAttention : LayerType::kLinearAttention) << i;
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(c.layer_is_moe(i)) << i;
}

TEST(ConfigTest, RopeParametersDictWinsOverTopLevel) {
  json j = next_config();
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e6}, {"partial_rotary_factor", 0.5}};
  ModelConfig c;
  ASSERT_TRUE(parse(j, &c).is_ok());
  EXPECT_EQ(c.rope_theta, 5e6);
  EXPECT_EQ(c.partial_rotary_factor, 0.5);
  EXPECT_EQ(c.rotary_dim(), 16);
}

TEST(ConfigTest, HybridRopeDefaultsWhenAbsent) {
  json j = next_config();
  j.erase("rope_theta");
  j.erase("partial_rotary_factor");
  ModelConfig c;
  ASSERT_TRUE(parse(j, &c).is_ok());
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.partial_rotary_factor, 0.25);
}

TEST(ConfigTest, MoePlacementFollowsSparseStepAndMlpOnlyLayers) {
  json j = next_config();
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  ModelConfig c;
  ASSERT_TRUE(parse(j, &c).is_ok());
  std::vector<bool> moe;
  for (int i = 0; i < 8; ++i) moe.push_back(c.layer_is_moe(i));
  EXPECT_EQ(moe, (std::vector<bool>{false, true, false, false, false, true, false, true}));
  j["num_experts"] = 0;
  ASSERT_TRUE(parse(j, &c).is_ok());
  for (int i = 0; i < 8; ++i) EXPECT_FALSE(c.layer_is_moe(i));
}

TEST(ConfigTest, LegacyLayerNamesAreRemapped) {
  json j = next_config();
  j["layer_types"] = {"mamba", "attention", "linear_attention", "full_attention",
                      "mamba", "mamba",     "mamba",            "attention"};
  ModelConfig c;
  ASSERT_TRUE(parse(j, &c).is_ok());
  using L = LayerType;
  EXPECT_EQ(c.layer_types, (std::vector<L>{L::kLinearAttention, L::kFullAttention, L::kLinearAttention,
                                           L::kFullAttention, L::kLinearAttention, L::kLinearAttention,
                                           L::kLinearAttention, L::kFullAttention}));
}

TEST(ConfigTest, ParsesNestedQwen35WithTopLevelTieFlag) {
  ModelConfig c;
  ASSERT_TRUE(parse(qwen35_config(), &c).is_ok());
  EXPECT_EQ(c.arch, Arch::kQwen35);
  EXPECT_EQ(c.vocab_size, 248320);
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.intermediate_size, 3584);
  EXPECT_EQ(c.n_layers, 24);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(c.rotary_dim(), 64);
  EXPECT_EQ(c.lin_n_value_heads, 16);
  EXPECT_EQ(c.n_experts, 0);
  EXPECT_TRUE(c.tie_word_embeddings);  // top level says true, text_config false
  EXPECT_EQ(c.tensor_prefix, "model.language_model.");
  EXPECT_EQ(c.layer_types[3], LayerType::kFullAttention);
  EXPECT_EQ(c.layer_types[4], LayerType::kLinearAttention);
  for (int i = 0; i < 24; ++i) EXPECT_FALSE(c.layer_is_moe(i));
}

TEST(ConfigTest, NestedTieFlagInTextConfigOnly) {
  json j = qwen35_config();
  j.erase("tie_word_embeddings");
  j["text_config"]["tie_word_embeddings"] = true;
  ModelConfig c;
  ASSERT_TRUE(parse(j, &c).is_ok());
  EXPECT_TRUE(c.tie_word_embeddings);
  j["text_config"]["tie_word_embeddings"] = false;
  ASSERT_TRUE(parse(j, &c).is_ok());
  EXPECT_FALSE(c.tie_word_embeddings);
}

TEST(ConfigTest, NestedRopeAtTopOfTextConfig) {
  json j = qwen35_config();
  j["text_config"].erase("rope_parameters");
  j["text_config"]["rope_theta"] = 2e6;
  j["text_config"]["partial_rotary_factor"] = 0.5;
  ModelConfig c;
  ASSERT_TRUE(parse(j, &c).is_ok());
  EXPECT_EQ(c.rope_theta, 2e6);
  EXPECT_EQ(c.rotary_dim(), 128);
}

TEST(ConfigTest, ParsesQwen35MoeWithEveryLayerMoe) {
  json j = qwen35_config();
  j["model_type"] = "qwen3_5_moe";
  json& t = j["text_config"];
  t.erase("intermediate_size");
  t["num_experts"] = 16;
  t["num_experts_per_tok"] = 4;
  t["moe_intermediate_size"] = 64;
  t["shared_expert_intermediate_size"] = 64;
  t["norm_topk_prob"] = false;       // not a field of this family: ignored
  t["decoder_sparse_step"] = 2;      // likewise
  ModelConfig c;
  ASSERT_TRUE(parse(j, &c).is_ok());
  EXPECT_EQ(c.arch, Arch::kQwen35Moe);
  EXPECT_TRUE(c.norm_topk_prob);
  for (int i = 0; i < 24; ++i) EXPECT_TRUE(c.layer_is_moe(i)) << i;
}

TEST(ConfigTest, ParsesDenseQwen3) {
  ModelConfig c;
  ASSERT_TRUE(parse(qwen3_config(), &c).is_ok());
  EXPECT_EQ(c.arch, Arch::kQwen3);
  EXPECT_FALSE(c.attention_gated);
  EXPECT_FALSE(c.norm_weight_offset);
  EXPECT_EQ(c.partial_rotary_factor, 1.0);
  EXPECT_EQ(c.rotary_dim(), 128);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.layer_types, std::vector<LayerType>(28, LayerType::kFullAttention));
  json j = qwen3_config();
  j.erase("rope_theta");
  ASSERT_TRUE(parse(j, &c).is_ok());
  EXPECT_EQ(c.rope_theta, 1e6);
}

// The stand-in for qwen4exp is gone; its configs get a message that says so
// rather than the generic unknown-model_type one.
TEST(ConfigTest, RetiredStatebankQsaIsNamed) {
  json j = next_config();
  j["model_type"] = "statebank_qsa";
  ModelConfig c;
  Status s = parse(j, &c);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("statebank_qsa was retired; use qwen4exp"), std::string::npos) << s.message();
}

TEST(ConfigTest, ParseConfigReadsTheDirectory) {
  testing::TempDir dir;
  testing::write_file(dir.file("config.json"), qwen35_config().dump());
  ModelConfig c;
  ASSERT_TRUE(parse_config(dir.path(), &c).is_ok());
  EXPECT_EQ(c.arch, Arch::kQwen35);
  testing::TempDir empty;
  Status s = parse_config(empty.path(), &c);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("config.json"), std::string::npos);
}

TEST(ConfigTest, EveryRequiredFieldMissingIsNamed) {
  for (const char* f : {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                        "num_key_value_heads", "head_dim", "linear_key_head_dim", "linear_value_head_dim",
                        "linear_num_key_heads", "linear_num_value_heads", "num_experts_per_tok",
                        "moe_intermediate_size", "shared_expert_intermediate_size"}) {
    json j = next_config();
    j.erase(f);
    expect_error(j, f);
  }
  json j = qwen3_config();
  j.erase("intermediate_size");
  expect_error(j, "intermediate_size");
  j = qwen35_config();
  j["text_config"].erase("hidden_size");
  expect_error(j, "text_config.hidden_size");
  j = qwen35_config();
  j.erase("text_config");
  expect_error(j, "text_config");
  j = next_config();
  j.erase("model_type");
  expect_error(j, "model_type");
}

TEST(ConfigTest, InconsistentFieldsAreNamed) {
  json j = next_config();
  j["num_key_value_heads"] = 3;
  expect_error(j, "num_attention_heads");
  j = next_config();
  j["layer_types"] = {"linear_attention", "full_attention"};
  expect_error(j, "layer_types");
  j = next_config();
  j["linear_num_value_heads"] = 3;
  expect_error(j, "linear_num_value_heads");
  j = next_config();
  j["num_experts_per_tok"] = 9;
  expect_error(j, "num_experts_per_tok");
  j = next_config();
  j["mlp_only_layers"] = {8};
  expect_error(j, "mlp_only_layers");
  j = next_config();
  j["hidden_size"] = -5;
  expect_error(j, "hidden_size");
  j = next_config();
  j["hidden_size"] = "64";
  expect_error(j, "hidden_size");
  j = next_config();
  j["partial_rotary_factor"] = 0.3;  // 32 * 0.3 is not a whole number of dims
  expect_error(j, "partial_rotary_factor");
  j = next_config();
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4}};
  expect_error(j, "rope_type");
  j = next_config();
  j["layer_types"] = std::vector<std::string>(8, "sliding_attention");
  expect_error(j, "layer_types");
  j = next_config();
  j["layer_types"] = std::vector<std::string>(8, "sparse_attention");  // qwen4exp's QSA layers are named otherwise
  expect_error(j, "layer_types");
  j = qwen3_config();
  j["layer_types"] = std::vector<std::string>(28, "linear_attention");
  expect_error(j, "layer_types");
  j = next_config();
  j["model_type"] = "llama";
  expect_error(j, "model_type");
  ModelConfig c;
  Status s = parse_config_json("{not json", "/m/config.json", &c);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("/m/config.json"), std::string::npos);
}

TEST(ConfigTest, ConfigToJsonRoundTripsEveryPreset) {
  for (Arch arch : {Arch::kQwen3, Arch::kQwen3Next, Arch::kQwen35, Arch::kQwen35Moe}) {
    for (const char* preset : {"tiny", "small", "0.8b"}) {
      ModelConfig c, back;
      ASSERT_TRUE(preset_config(arch, preset, &c).is_ok());
      std::string text = config_to_json(c);
      Status s = parse_config_json(text, "gen", &back);
      ASSERT_TRUE(s.is_ok()) << arch_name(arch) << " " << preset << ": " << s.to_string();
      EXPECT_EQ(c.describe(), back.describe()) << arch_name(arch) << " " << preset;
      json j = json::parse(text);
      EXPECT_EQ(j["model_type"], arch_name(arch));
      bool nested = arch == Arch::kQwen35 || arch == Arch::kQwen35Moe;
      EXPECT_EQ(j.contains("text_config"), nested) << arch_name(arch);
    }
  }
}

TEST(ConfigTest, DescribeChangesWithEveryField) {
  ModelConfig base;
  ASSERT_TRUE(preset_config(Arch::kQwen4Exp, "tiny", &base).is_ok());
  std::vector<ModelConfig> variants(7, base);
  variants[0].rope_theta = 1e6 + 1;
  variants[1].layer_types[0] = LayerType::kFullAttention;
  variants[2].index_topk_blocks += 1;
  variants[3].norm_topk_prob = !base.norm_topk_prob;
  variants[4].rms_norm_eps = 1e-5;
  variants[5].index_compress_ratio = 8;
  variants[6].mlp_only_layers = {1};
  for (const auto& v : variants) EXPECT_NE(v.describe(), base.describe());
}

}  // namespace
}  // namespace sb
