// gen-model: deterministic by seed, tensors independent of each other,
// exactly expected_tensors() on disk for every arch, sane value ranges, and
// the cached demo model.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "model/checkpoint.h"
#include "model/demo.h"
#include "model/gen_model.h"
#include "model/weights.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

// qwen4exp's checkpoints: Qwen4ExpConfigTest.GenModelCheckpointLoadsAndItsConstantsAreChecked.
const Arch kArchs[] = {Arch::kQwen3, Arch::kQwen3Next, Arch::kQwen35, Arch::kQwen35Moe};

std::string tokenizer_dir() {
  std::string dir;
  Status s = find_tokenizer_dir("", &dir);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return dir;
}

ModelConfig tiny(Arch arch, int64_t vocab = 0) {
  ModelConfig c;
  EXPECT_TRUE(preset_config(arch, "tiny", &c).is_ok());
  if (vocab) c.vocab_size = vocab;
  return c;
}

std::vector<float> values(const TensorView& v) {
  std::vector<float> out(static_cast<size_t>(v.numel()));
  convert_to_f32(v.dtype, v.data, v.numel(), out.data());
  return out;
}

TEST(GenModelTest, WritesExactlyTheExpectedTensorsForEveryArch) {
  const std::string tok = tokenizer_dir();
  for (Arch arch : kArchs) {
    testing::TempDir dir;
    // The real tiny preset for one arch; a small vocabulary keeps the others quick.
    ModelConfig c = tiny(arch, arch == Arch::kQwen3Next ? 0 : 1000);
    Status s = write_random_checkpoint(c, 0, DType::kBF16, tok, dir.path());
    ASSERT_TRUE(s.is_ok()) << s.to_string();

    ModelConfig back;
    ASSERT_TRUE(parse_config(dir.path(), &back).is_ok());
    EXPECT_EQ(back.describe(), c.describe()) << arch_name(arch);
    EXPECT_EQ(testing::read_file(dir.file("tokenizer.json")), testing::read_file(tok + "/tokenizer.json"));
    EXPECT_EQ(testing::read_file(dir.file("tokenizer_config.json")),
              testing::read_file(tok + "/tokenizer_config.json"));

    std::unique_ptr<Checkpoint> ck;
    ASSERT_TRUE(Checkpoint::open(dir.path(), &ck).is_ok());
    std::vector<TensorSpec> want = expected_tensors(c);
    EXPECT_EQ(ck->tensors().size(), want.size()) << arch_name(arch);
    for (const auto& spec : want) {
      const TensorView* v = ck->find(spec.name);
      ASSERT_NE(v, nullptr) << arch_name(arch) << " lacks " << spec.name;
      EXPECT_EQ(v->shape, spec.shape) << spec.name;
      bool f32_param = spec.name.ends_with("A_log") || spec.name.ends_with("dt_bias");
      EXPECT_EQ(v->dtype, f32_param ? DType::kF32 : DType::kBF16) << spec.name;
    }
    WeightSet ws;
    s = WeightSet::bind(*ck, back, &ws);
    EXPECT_TRUE(s.is_ok()) << arch_name(arch) << ": " << s.to_string();
  }
}

TEST(GenModelTest, TensorNamesMatchTheFamilies) {
  auto names = [](Arch arch) {
    std::set<std::string> out;
    for (const auto& s : expected_tensors(tiny(arch))) out.insert(s.name);
    return out;
  };
  auto qwen3 = names(Arch::kQwen3);
  EXPECT_TRUE(qwen3.count("model.layers.1.self_attn.q_norm.weight"));
  EXPECT_TRUE(qwen3.count("model.layers.1.mlp.gate_proj.weight"));
  EXPECT_FALSE(qwen3.count("lm_head.weight"));  // tied
  auto next = names(Arch::kQwen3Next);
  EXPECT_TRUE(next.count("model.layers.0.linear_attn.in_proj_qkvz.weight"));
  EXPECT_TRUE(next.count("model.layers.0.linear_attn.in_proj_ba.weight"));
  EXPECT_TRUE(next.count("model.layers.0.mlp.experts.7.down_proj.weight"));
  EXPECT_TRUE(next.count("model.layers.0.mlp.shared_expert_gate.weight"));
  auto q35 = names(Arch::kQwen35);
  EXPECT_TRUE(q35.count("model.language_model.layers.0.linear_attn.in_proj_qkv.weight"));
  EXPECT_TRUE(q35.count("model.language_model.layers.0.linear_attn.in_proj_a.weight"));
  EXPECT_TRUE(q35.count("model.language_model.layers.3.self_attn.o_proj.weight"));
  auto q35moe = names(Arch::kQwen35Moe);
  EXPECT_TRUE(q35moe.count("model.language_model.layers.0.mlp.experts.gate_up_proj"));
  EXPECT_TRUE(q35moe.count("model.language_model.layers.0.mlp.experts.down_proj"));
  auto q4 = names(Arch::kQwen4Exp);
  EXPECT_TRUE(q4.count("model.language_model.layers.3.self_attn.indexer.index_qk_proj.weight"));
  EXPECT_TRUE(q4.count("model.language_model.layers.3.self_attn.indexer.k_layernorm.weight"));
  EXPECT_FALSE(q4.count("model.language_model.layers.2.self_attn.indexer.index_qk_proj.weight"));  // a GDN layer
  auto shape_of = [](const ModelConfig& c, const std::string& name) {
    for (const auto& s : expected_tensors(c))
      if (s.name == name) return s.shape;
    return std::vector<int64_t>{};
  };
  // The indexer's query heads, then its one key head, in one projection.
  EXPECT_EQ(shape_of(tiny(Arch::kQwen4Exp), "model.language_model.layers.3.self_attn.indexer.index_qk_proj.weight"),
            (std::vector<int64_t>{96, 64}));
  ModelConfig c = tiny(Arch::kQwen3Next);
  EXPECT_EQ(shape_of(c, "model.layers.3.self_attn.q_proj.weight"), (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(shape_of(c, "model.layers.0.linear_attn.conv1d.weight"), (std::vector<int64_t>{128, 1, 4}));
  EXPECT_EQ(shape_of(c, "model.layers.0.linear_attn.in_proj_qkvz.weight"), (std::vector<int64_t>{192, 64}));
  EXPECT_EQ(shape_of(c, "model.layers.0.linear_attn.in_proj_ba.weight"), (std::vector<int64_t>{8, 64}));
  EXPECT_EQ(shape_of(tiny(Arch::kQwen3), "model.layers.0.self_attn.q_proj.weight"), (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(shape_of(tiny(Arch::kQwen35Moe), "model.language_model.layers.2.mlp.experts.gate_up_proj"),
            (std::vector<int64_t>{8, 64, 64}));
  EXPECT_EQ(shape_of(tiny(Arch::kQwen35Moe), "model.language_model.layers.2.mlp.experts.down_proj"),
            (std::vector<int64_t>{8, 64, 32}));
  EXPECT_EQ(shape_of(tiny(Arch::kQwen35), "model.language_model.layers.0.linear_attn.in_proj_qkv.weight"),
            (std::vector<int64_t>{128, 64}));
}

TEST(GenModelTest, SameSeedSameBytesOtherSeedOtherBytes) {
  ModelConfig c = tiny(Arch::kQwen3Next, 1000);
  testing::TempDir dir;
  ASSERT_TRUE(write_random_weights(c, 5, DType::kBF16, dir.file("a.safetensors")).is_ok());
  ASSERT_TRUE(write_random_weights(c, 5, DType::kBF16, dir.file("b.safetensors")).is_ok());
  ASSERT_TRUE(write_random_weights(c, 6, DType::kBF16, dir.file("c.safetensors")).is_ok());
  std::string a = testing::read_file(dir.file("a.safetensors"));
  EXPECT_GT(a.size(), 100000u);
  EXPECT_EQ(a, testing::read_file(dir.file("b.safetensors")));
  std::string c6 = testing::read_file(dir.file("c.safetensors"));
  ASSERT_EQ(a.size(), c6.size());
  EXPECT_NE(a, c6);
}

TEST(GenModelTest, TensorValuesDependOnlyOnSeedAndName) {
  // Two configs that share a tensor name and shape but differ elsewhere (and
  // so in write order and offsets) give that tensor the same values.
  testing::TempDir a, b;
  ModelConfig next = tiny(Arch::kQwen3Next, 1000), other = next;
  other.mlp_only_layers = {1};  // layer 1 dense: other tensors before layer 2's
  other.intermediate_size = 96;
  ASSERT_TRUE(write_random_weights(next, 3, DType::kF32, a.file("model.safetensors")).is_ok());
  ASSERT_TRUE(write_random_weights(other, 3, DType::kF32, b.file("model.safetensors")).is_ok());
  std::unique_ptr<Checkpoint> ca, cb;
  ASSERT_TRUE(Checkpoint::open(a.path(), &ca).is_ok());
  ASSERT_TRUE(Checkpoint::open(b.path(), &cb).is_ok());
  for (const char* name : {"model.embed_tokens.weight", "model.layers.2.linear_attn.A_log", "model.norm.weight",
                           "model.layers.3.mlp.experts.5.up_proj.weight"}) {
    ASSERT_NE(ca->find(name), nullptr) << name;
    ASSERT_NE(cb->find(name), nullptr) << name;
    EXPECT_EQ(values(*ca->find(name)), values(*cb->find(name))) << name;
  }
  // ...and differently named tensors of one shape differ.
  EXPECT_NE(values(*ca->find("model.layers.0.mlp.experts.0.gate_proj.weight")),
            values(*ca->find("model.layers.0.mlp.experts.0.up_proj.weight")));
}

TEST(GenModelTest, Bf16IsTheRoundedF32) {
  ModelConfig c = tiny(Arch::kQwen35, 500);
  testing::TempDir a, b;
  ASSERT_TRUE(write_random_weights(c, 9, DType::kF32, a.file("model.safetensors")).is_ok());
  ASSERT_TRUE(write_random_weights(c, 9, DType::kBF16, b.file("model.safetensors")).is_ok());
  std::unique_ptr<Checkpoint> ca, cb;
  ASSERT_TRUE(Checkpoint::open(a.path(), &ca).is_ok());
  ASSERT_TRUE(Checkpoint::open(b.path(), &cb).is_ok());
  for (const auto& [name, v] : ca->tensors()) {
    std::vector<float> f = values(v), h = values(*cb->find(name));
    ASSERT_EQ(f.size(), h.size());
    const bool kept_f32 = cb->find(name)->dtype == DType::kF32;  // A_log, dt_bias
    EXPECT_EQ(kept_f32, name.ends_with("A_log") || name.ends_with("dt_bias")) << name;
    for (size_t i = 0; i < f.size(); ++i)
      ASSERT_EQ(h[i], kept_f32 ? f[i] : bf16_to_f32(f32_to_bf16(f[i]))) << name << " " << i;
  }
}

double mean(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s / v.size();
}
double stddev(const std::vector<float>& v) {
  double m = mean(v), s = 0;
  for (float x : v) s += (x - m) * (x - m);
  return std::sqrt(s / v.size());
}

TEST(GenModelTest, ValuesFollowTheInitRules) {
  ModelConfig c = tiny(Arch::kQwen3Next, 2000);
  testing::TempDir dir;
  ASSERT_TRUE(write_random_weights(c, 0, DType::kF32, dir.file("model.safetensors")).is_ok());
  std::unique_ptr<Checkpoint> ck;
  ASSERT_TRUE(Checkpoint::open(dir.path(), &ck).is_ok());
  auto get = [&](const std::string& n) { return values(*ck->find(n)); };
  // Matrices: std 1/sqrt(in_features), mean ~0.
  std::vector<float> embed = get("model.embed_tokens.weight");
  EXPECT_NEAR(stddev(embed), 1 / std::sqrt(64.0), 0.005);
  EXPECT_NEAR(mean(embed), 0, 0.005);
  std::vector<float> down = get("model.layers.0.mlp.shared_expert.down_proj.weight");
  EXPECT_NEAR(stddev(down), 1 / std::sqrt(32.0), 0.02);
  std::vector<float> out = get("model.layers.0.linear_attn.out_proj.weight");  // [64, 64]
  EXPECT_NEAR(stddev(out), 1 / std::sqrt(64.0), 0.01);
  // A_log = log(uniform(1, 16)).
  for (float x : get("model.layers.0.linear_attn.A_log")) {
    EXPECT_GE(x, 0.0f);
    EXPECT_LT(x, std::log(16.0f));
  }
  // Zero-centred norms around 0, the gated norm of linear attention around 1.
  for (float x : get("model.layers.0.input_layernorm.weight")) EXPECT_LE(std::fabs(x), 0.2f);
  for (float x : get("model.layers.3.self_attn.q_norm.weight")) EXPECT_LE(std::fabs(x), 0.2f);
  for (float x : get("model.layers.0.linear_attn.norm.weight")) EXPECT_LE(std::fabs(x - 1), 0.2f);
  std::vector<float> dt = get("model.layers.0.linear_attn.dt_bias");
  for (float x : dt) EXPECT_LE(std::fabs(x), 0.5f * std::sqrt(3.0f));
  // Dense qwen3 norms are plain: around 1.
  ModelConfig q = tiny(Arch::kQwen3, 100);
  testing::TempDir qd;
  ASSERT_TRUE(write_random_weights(q, 0, DType::kF32, qd.file("model.safetensors")).is_ok());
  std::unique_ptr<Checkpoint> qck;
  ASSERT_TRUE(Checkpoint::open(qd.path(), &qck).is_ok());
  for (const char* n : {"model.norm.weight", "model.layers.1.post_attention_layernorm.weight",
                        "model.layers.0.self_attn.k_norm.weight"})
    for (float x : values(*qck->find(n))) EXPECT_LE(std::fabs(x - 1), 0.2f) << n;
}

TEST(GenModelTest, PresetsHaveTheDocumentedShapes) {
  ModelConfig c;
  ASSERT_TRUE(preset_config(Arch::kQwen35, "0.8b", &c).is_ok());
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.n_layers, 24);
  EXPECT_EQ(c.vocab_size, 248320);
  EXPECT_EQ(c.rotary_dim(), 64);
  EXPECT_EQ(c.rope_theta, 1e7);
  EXPECT_TRUE(c.tie_word_embeddings);
  int64_t params = 0;
  for (const auto& s : expected_tensors(c)) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    params += n;
  }
  // Qwen3.5-0.8B's text model without MTP: about 0.75 billion values.
  EXPECT_GT(params, 700'000'000);
  EXPECT_LT(params, 800'000'000);
  // Qwen3.5-4B's text model: about 4.2 billion values, 8 of 32 layers attention.
  ASSERT_TRUE(preset_config(Arch::kQwen35, "4b", &c).is_ok());
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.lin_n_value_heads * c.lin_value_head_dim, 4096);
  EXPECT_EQ(std::count(c.layer_types.begin(), c.layer_types.end(), LayerType::kFullAttention), 8);
  params = 0;
  for (const auto& s : expected_tensors(c)) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    params += n;
  }
  EXPECT_GT(params, 4'100'000'000);
  EXPECT_LT(params, 4'300'000'000);
  EXPECT_FALSE(preset_config(Arch::kQwen3Next, "4b", &c).is_ok());
  ASSERT_TRUE(preset_config(Arch::kQwen3Next, "small", &c).is_ok());
  EXPECT_EQ(c.hidden_size, 256);
  EXPECT_EQ(c.n_layers, 8);
  EXPECT_EQ(c.layer_types[7], LayerType::kFullAttention);
  ASSERT_TRUE(preset_config(Arch::kQwen4Exp, "tiny", &c).is_ok());
  EXPECT_EQ(c.layer_types, (std::vector<LayerType>{LayerType::kLinearAttention, LayerType::kLinearAttention,
                                                    LayerType::kLinearAttention, LayerType::kSparseAttention}));
  EXPECT_FALSE(preset_config(Arch::kQwen4Exp, "huge", &c).is_ok());
  Arch a;
  EXPECT_FALSE(parse_arch("llama", &a).is_ok());
  Status retired = parse_arch("statebank_qsa", &a);
  EXPECT_NE(retired.message().find("statebank_qsa was retired; use qwen4exp"), std::string::npos) << retired.message();
  ASSERT_TRUE(parse_arch("qwen3_5_moe", &a).is_ok());
  EXPECT_EQ(a, Arch::kQwen35Moe);
}

TEST(GenModelTest, MissingTokenizerDirIsAClearError) {
  testing::TempDir empty;
  std::string dir;
  Status s = find_tokenizer_dir(empty.path(), &dir);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("tokenizer.json"), std::string::npos) << s.message();
  testing::TempDir out;
  s = write_random_checkpoint(tiny(Arch::kQwen3, 100), 0, DType::kBF16, empty.path(), out.file("m"));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("tokenizer.json"), std::string::npos) << s.message();
}

TEST(DemoModelTest, GeneratedOnceThenReused) {
  testing::TempDir cache;
  ASSERT_EQ(::setenv("XDG_CACHE_HOME", cache.path().c_str(), 1), 0);
  // Two first users at once: both get the one complete model.
  std::string dir, dir2;
  Status s, s2;
  std::thread other([&] { s2 = ensure_demo_model(&dir2); });
  s = ensure_demo_model(&dir);
  other.join();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  ASSERT_TRUE(s2.is_ok()) << s2.to_string();
  EXPECT_EQ(dir, cache.path() + "/statebank/models/demo");
  EXPECT_EQ(dir2, dir);
  int leftovers = 0;
  for (const auto& e : std::filesystem::directory_iterator(cache.path() + "/statebank/models"))
    leftovers += e.path().filename() != "demo";
  EXPECT_EQ(leftovers, 0) << "temporary directories left behind";
  ModelConfig c;
  ASSERT_TRUE(parse_config(dir, &c).is_ok());
  EXPECT_EQ(c.arch, Arch::kQwen3Next);
  EXPECT_EQ(c.hidden_size, 256);
  std::unique_ptr<Checkpoint> ck;
  ASSERT_TRUE(Checkpoint::open(dir, &ck).is_ok());
  WeightSet ws;
  ASSERT_TRUE(WeightSet::bind(*ck, c, &ws).is_ok());
  const std::string digest = ck->weights_digest();
  ck.reset();

  struct stat before, after;
  ASSERT_EQ(::stat((dir + "/model.safetensors").c_str(), &before), 0);
  std::string again;
  ASSERT_TRUE(ensure_demo_model(&again).is_ok());
  EXPECT_EQ(again, dir);
  ASSERT_EQ(::stat((dir + "/model.safetensors").c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino) << "reused, not rewritten";

  // A damaged cache (a file missing) is regenerated with the same bytes.
  std::remove((dir + "/model.safetensors").c_str());
  ASSERT_TRUE(ensure_demo_model(&again).is_ok());
  ASSERT_TRUE(Checkpoint::open(dir, &ck).is_ok());
  EXPECT_EQ(ck->weights_digest(), digest);
  ::unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace sb
