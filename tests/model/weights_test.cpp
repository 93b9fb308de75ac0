// WeightSet::bind: every tensor checked by name and shape, errors naming the
// tensor and the file, skipped prefixes, tied heads, and both MoE expert
// layouts giving the same expert matrices.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "model/checkpoint.h"
#include "model/gen_model.h"
#include "model/weights.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

// A tiny preset with a small vocabulary, so that each checkpoint is a few hundred KB.
ModelConfig small_vocab(Arch arch) {
  ModelConfig c;
  EXPECT_TRUE(preset_config(arch, "tiny", &c).is_ok());
  c.vocab_size = 300;
  return c;
}

std::vector<uint8_t> bytes_of(const TensorView& v) {
  const uint8_t* p = static_cast<const uint8_t*>(v.data);
  return std::vector<uint8_t>(p, p + v.nbytes);
}

// Writes every tensor of `specs` (zeros, f32) after letting `edit` change the list.
void write_specs(const std::string& dir, std::vector<TensorSpec> specs,
                 const std::function<void(std::vector<TensorSpec>&)>& edit = nullptr) {
  if (edit) edit(specs);
  SafetensorsWriter w;
  for (const auto& s : specs) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    w.add(s.name, DType::kF32, s.shape, std::vector<uint8_t>(static_cast<size_t>(n) * 4));
  }
  ASSERT_TRUE(w.write(dir + "/model.safetensors").is_ok());
}

Status bind_dir(const std::string& dir, const ModelConfig& c, std::unique_ptr<Checkpoint>* ck, WeightSet* ws) {
  SB_RETURN_IF_ERROR(Checkpoint::open(dir, ck));
  return WeightSet::bind(**ck, c, ws);
}

TEST(WeightsTest, BindsEveryGeneratedArch) {
  for (Arch arch : {Arch::kQwen3, Arch::kQwen3Next, Arch::kQwen35, Arch::kQwen35Moe}) {
    testing::TempDir dir;
    ModelConfig c = small_vocab(arch);
    ASSERT_TRUE(write_random_weights(c, 1, DType::kBF16, dir.file("model.safetensors")).is_ok());
    std::unique_ptr<Checkpoint> ck;
    WeightSet ws;
    Status s = bind_dir(dir.path(), c, &ck, &ws);
    ASSERT_TRUE(s.is_ok()) << arch_name(arch) << ": " << s.to_string();
    for (const auto& spec : expected_tensors(c)) {
      if (spec.name.find(".mlp.experts.") != std::string::npos) continue;  // reached through expert()
      const TensorView* v = ws.find(spec.name);
      ASSERT_NE(v, nullptr) << spec.name;
      EXPECT_EQ(v->shape, spec.shape) << spec.name;
    }
    EXPECT_EQ(&ws.embed(), ck->find(c.tensor_prefix + "embed_tokens.weight"));
    EXPECT_EQ(&ws.lm_head(), &ws.embed()) << "tied: the head is the embedding";
    EXPECT_EQ(&ws.final_norm(), ck->find(c.tensor_prefix + "norm.weight"));
    EXPECT_EQ(&ws.layer(0, "input_layernorm.weight"), ck->find(c.tensor_prefix + "layers.0.input_layernorm.weight"));
    for (int64_t l = 0; l < c.n_layers; ++l) {
      if (!c.layer_is_moe(l)) continue;
      EXPECT_EQ(ws.fused_experts(l), arch == Arch::kQwen35Moe);
      const ExpertWeights& x = ws.expert(l, c.n_experts - 1);
      EXPECT_EQ(x.gate.rows, c.moe_intermediate_size);
      EXPECT_EQ(x.gate.cols, c.hidden_size);
      EXPECT_EQ(x.down.rows, c.hidden_size);
      EXPECT_EQ(x.down.cols, c.moe_intermediate_size);
      EXPECT_EQ(x.gate.dtype, DType::kBF16);
    }
  }
}

TEST(WeightsTest, UntiedModelHasItsOwnHead) {
  testing::TempDir dir;
  ModelConfig c = small_vocab(Arch::kQwen3Next);
  c.tie_word_embeddings = false;
  ASSERT_TRUE(write_random_weights(c, 1, DType::kF32, dir.file("model.safetensors")).is_ok());
  std::unique_ptr<Checkpoint> ck;
  WeightSet ws;
  ASSERT_TRUE(bind_dir(dir.path(), c, &ck, &ws).is_ok());
  EXPECT_EQ(&ws.lm_head(), ck->find("lm_head.weight"));
  EXPECT_NE(&ws.lm_head(), &ws.embed());
  // The same checkpoint read as tied: lm_head.weight is ignored, not an error.
  c.tie_word_embeddings = true;
  ASSERT_TRUE(WeightSet::bind(*ck, c, &ws).is_ok());
  EXPECT_EQ(&ws.lm_head(), &ws.embed());
}

TEST(WeightsTest, MissingTensorIsNamed) {
  testing::TempDir dir;
  ModelConfig c = small_vocab(Arch::kQwen35);
  const std::string victim = "model.language_model.layers.2.linear_attn.in_proj_z.weight";
  write_specs(dir.path(), expected_tensors(c), [&](std::vector<TensorSpec>& s) {
    std::erase_if(s, [&](const TensorSpec& t) { return t.name == victim; });
  });
  std::unique_ptr<Checkpoint> ck;
  WeightSet ws;
  Status s = bind_dir(dir.path(), c, &ck, &ws);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("missing tensor " + victim), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("model.safetensors"), std::string::npos) << s.message();
}

TEST(WeightsTest, UntiedModelWithoutHeadIsMissingIt) {
  testing::TempDir dir;
  ModelConfig c = small_vocab(Arch::kQwen3);
  write_specs(dir.path(), expected_tensors(c));  // tied: no lm_head
  c.tie_word_embeddings = false;
  std::unique_ptr<Checkpoint> ck;
  WeightSet ws;
  Status s = bind_dir(dir.path(), c, &ck, &ws);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("missing tensor lm_head.weight"), std::string::npos) << s.message();
}

TEST(WeightsTest, WrongShapeIsNamedWithBothShapes) {
  testing::TempDir dir;
  ModelConfig c = small_vocab(Arch::kQwen3Next);
  const std::string victim = "model.layers.3.self_attn.q_proj.weight";
  write_specs(dir.path(), expected_tensors(c), [&](std::vector<TensorSpec>& s) {
    for (auto& t : s)
      if (t.name == victim) t.shape = {128, 64};  // ungated layout: half the rows
  });
  std::unique_ptr<Checkpoint> ck;
  WeightSet ws;
  Status s = bind_dir(dir.path(), c, &ck, &ws);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("tensor " + victim + " in file model.safetensors has shape [128, 64], expected [256, 64]"),
            std::string::npos)
      << s.message();
}

TEST(WeightsTest, ExtraTensorIsRejectedUnlessSkipped) {
  ModelConfig c = small_vocab(Arch::kQwen35);
  {
    testing::TempDir dir;
    write_specs(dir.path(), expected_tensors(c), [](std::vector<TensorSpec>& s) {
      s.push_back({"model.language_model.layers.1.self_attn.rotary_emb.inv_freq", {4}});
    });
    std::unique_ptr<Checkpoint> ck;
    WeightSet ws;
    Status s = bind_dir(dir.path(), c, &ck, &ws);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("tensor model.language_model.layers.1.self_attn.rotary_emb.inv_freq in file "
                               "model.safetensors"),
              std::string::npos)
        << s.message();
  }
  {
    testing::TempDir dir;
    write_specs(dir.path(), expected_tensors(c), [](std::vector<TensorSpec>& s) {
      s.push_back({"model.visual.blocks.0.attn.qkv.weight", {6, 2}});
      s.push_back({"mtp.layers.0.mlp.experts.0.gate_proj.weight", {2, 2}});
      s.push_back({"mtp.fc.weight", {2, 4}});
    });
    std::unique_ptr<Checkpoint> ck;
    WeightSet ws;
    Status s = bind_dir(dir.path(), c, &ck, &ws);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(ws.find("mtp.fc.weight"), nullptr);
  }
}

// Rewrites a checkpoint's routed experts into the other layout (per-expert
// <-> fused), keeping every value.
void relayout_experts(const Checkpoint& src, const ModelConfig& c, bool to_fused, const std::string& path) {
  const int64_t E = c.n_experts, I = c.moe_intermediate_size, H = c.hidden_size;
  SafetensorsWriter w;
  for (const auto& [name, v] : src.tensors()) {
    if (name.find(".mlp.experts.") == std::string::npos) w.add(name, v.dtype, v.shape, bytes_of(v));
  }
  const size_t el = 4;  // f32
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string L = c.tensor_prefix + "layers." + std::to_string(l) + ".mlp.experts.";
    if (to_fused) {
      std::vector<uint8_t> gu, dn;
      for (int64_t e = 0; e < E; ++e) {
        for (const char* part : {"gate_proj", "up_proj"}) {
          auto b = bytes_of(*src.find(L + std::to_string(e) + "." + part + ".weight"));
          gu.insert(gu.end(), b.begin(), b.end());
        }
        auto b = bytes_of(*src.find(L + std::to_string(e) + ".down_proj.weight"));
        dn.insert(dn.end(), b.begin(), b.end());
      }
      w.add(L + "gate_up_proj", DType::kF32, {E, 2 * I, H}, gu);
      w.add(L + "down_proj", DType::kF32, {E, H, I}, dn);
    } else {
      auto gu = bytes_of(*src.find(L + "gate_up_proj"));
      auto dn = bytes_of(*src.find(L + "down_proj"));
      const size_t mat = static_cast<size_t>(I * H) * el;
      for (int64_t e = 0; e < E; ++e) {
        auto at = [&](const std::vector<uint8_t>& b, size_t off) {
          return std::vector<uint8_t>(b.begin() + off, b.begin() + off + mat);
        };
        w.add(L + std::to_string(e) + ".gate_proj.weight", DType::kF32, {I, H}, at(gu, 2 * e * mat));
        w.add(L + std::to_string(e) + ".up_proj.weight", DType::kF32, {I, H}, at(gu, (2 * e + 1) * mat));
        w.add(L + std::to_string(e) + ".down_proj.weight", DType::kF32, {H, I}, at(dn, e * mat));
      }
    }
  }
  ASSERT_TRUE(w.write(path).is_ok());
}

void expect_same_experts(const WeightSet& a, const WeightSet& b, const ModelConfig& c) {
  for (int64_t l = 0; l < c.n_layers; ++l) {
    for (int64_t e = 0; e < c.n_experts; ++e) {
      const ExpertWeights& x = a.expert(l, e);
      const ExpertWeights& y = b.expert(l, e);
      EXPECT_EQ(to_f32(x.gate), to_f32(y.gate)) << l << " " << e;
      EXPECT_EQ(to_f32(x.up), to_f32(y.up)) << l << " " << e;
      EXPECT_EQ(to_f32(x.down), to_f32(y.down)) << l << " " << e;
      EXPECT_NE(to_f32(x.gate), to_f32(x.up));
    }
  }
}

TEST(WeightsTest, BothExpertLayoutsGiveTheSameExperts) {
  for (Arch arch : {Arch::kQwen3Next, Arch::kQwen35Moe}) {
    ModelConfig c = small_vocab(arch);
    const bool native_fused = arch == Arch::kQwen35Moe;
    testing::TempDir native, other;
    ASSERT_TRUE(write_random_weights(c, 7, DType::kF32, native.file("model.safetensors")).is_ok());
    std::unique_ptr<Checkpoint> ck_native, ck_other;
    WeightSet ws_native, ws_other;
    ASSERT_TRUE(bind_dir(native.path(), c, &ck_native, &ws_native).is_ok());
    relayout_experts(*ck_native, c, !native_fused, other.file("model.safetensors"));
    Status s = bind_dir(other.path(), c, &ck_other, &ws_other);
    ASSERT_TRUE(s.is_ok()) << arch_name(arch) << ": " << s.to_string();
    for (int64_t l = 0; l < c.n_layers; ++l) {
      EXPECT_EQ(ws_native.fused_experts(l), native_fused);
      EXPECT_EQ(ws_other.fused_experts(l), !native_fused);
    }
    expect_same_experts(ws_native, ws_other, c);
    // A fused view starts at the right row of the fused tensor.
    const WeightSet& fused = native_fused ? ws_native : ws_other;
    const ExpertWeights& x = fused.expert(1, 3);
    EXPECT_EQ(x.gate.row_offset, 3 * 2 * c.moe_intermediate_size);
    EXPECT_EQ(x.up.row_offset, 3 * 2 * c.moe_intermediate_size + c.moe_intermediate_size);
    EXPECT_EQ(x.down.row_offset, 3 * c.hidden_size);
  }
}

TEST(WeightsTest, MixedExpertLayoutInOneLayerIsRejected) {
  testing::TempDir dir;
  ModelConfig c = small_vocab(Arch::kQwen3Next);
  write_specs(dir.path(), expected_tensors(c), [&](std::vector<TensorSpec>& s) {
    s.push_back({"model.layers.0.mlp.experts.gate_up_proj", {c.n_experts, 2 * c.moe_intermediate_size, c.hidden_size}});
  });
  std::unique_ptr<Checkpoint> ck;
  WeightSet ws;
  Status s = bind_dir(dir.path(), c, &ck, &ws);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("model.layers.0.mlp.experts.gate_up_proj"), std::string::npos) << s.message();
}

TEST(WeightsTest, ConvertToF32ReadsEveryDtype) {
  const float vals[3] = {1.5f, -0.25f, 3.0f};
  uint16_t bf[3], hf[3];
  for (int i = 0; i < 3; ++i) {
    bf[i] = f32_to_bf16(vals[i]);
    hf[i] = f32_to_f16(vals[i]);
  }
  float out[3];
  convert_to_f32(DType::kBF16, bf, 3, out);
  EXPECT_EQ(std::vector<float>(out, out + 3), std::vector<float>(vals, vals + 3));
  convert_to_f32(DType::kF16, hf, 3, out);
  EXPECT_EQ(std::vector<float>(out, out + 3), std::vector<float>(vals, vals + 3));
  convert_to_f32(DType::kF32, vals, 3, out);
  EXPECT_EQ(std::vector<float>(out, out + 3), std::vector<float>(vals, vals + 3));
}

}  // namespace
}  // namespace sb
