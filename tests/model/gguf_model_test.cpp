// GGUF model files (model/gguf_model.h): a tiny checkpoint written as GGUF
// by statebank's own writer and loaded back computes the checkpoint's logits
// bit for bit (F32, and BF16 from a bf16 checkpoint) for every family llama.cpp
// has; quantized files load and stay near; the fingerprint tells them apart;
// damaged or foreign files are clear errors.
#include "model/gguf_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>
#include <tuple>

#include "model/model_arg.h"
#include "runtime/quant.h"
#include "tests/util/models.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

constexpr Arch kGgufArchs[] = {Arch::kQwen3, Arch::kQwen3Next, Arch::kQwen35, Arch::kQwen35Moe};

const std::vector<int32_t>& prompt() {
  static const std::vector<int32_t> ids = {9707, 11, 1879, 0, 151643, 42, 17, 100000, 5, 77, 3, 1000, 2, 64};
  return ids;
}

std::vector<float> all_logits(const Model& m) { return testing::prefill_and_step_logits(m, prompt(), 7); }

std::string write(const std::string& dir, GgufFileType type, const testing::TempDir& tmp, const std::string& name) {
  const std::string path = tmp.file(name);
  Status s = write_gguf_model(dir, type, path);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return path;
}

class GgufModelTest : public ::testing::TestWithParam<Arch> {};

TEST_P(GgufModelTest, F32FileGivesTheCheckpointsLogitsBitForBit) {
  testing::TempDir tmp;
  const std::string dir = testing::tiny_checkpoint(GetParam(), 3, DType::kF32);
  const std::string path = write(dir, GgufFileType::kF32, tmp, "m.gguf");
  auto a = testing::load_model(dir);
  auto b = testing::load_model(path);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->config().n_layers, b->config().n_layers);
  EXPECT_EQ(a->schema(), b->schema());
  const std::vector<float> la = all_logits(*a), lb = all_logits(*b);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * 4), 0) << "logits differ";
  EXPECT_NE(a->fingerprint(), b->fingerprint());
}

TEST_P(GgufModelTest, Bf16FileOfABf16CheckpointIsBitForBit) {
  testing::TempDir tmp;
  const std::string dir = testing::tiny_checkpoint(GetParam(), 3, DType::kBF16);
  const std::string path = write(dir, GgufFileType::kBF16, tmp, "m.gguf");
  auto a = testing::load_model(dir);
  auto b = testing::load_model(path);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->kernels_name(), b->kernels_name());
  const std::vector<float> la = all_logits(*a), lb = all_logits(*b);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * 4), 0) << "logits differ";
}

INSTANTIATE_TEST_SUITE_P(Families, GgufModelTest, ::testing::ValuesIn(kGgufArchs),
                         [](const auto& info) { return std::string(arch_name(info.param)); });

// One value head per key head (the 0.8b preset's shape): the file's tiled
// order is the heads' own, so the layer binds it flat and copies nothing
// (Transformer::bind_delta_net); the logits stay the checkpoint's.
TEST(GgufModelTest, Qwen35WithOneValueHeadPerKeyHeadIsBitForBit) {
  testing::TempDir tmp;
  const std::string dir = testing::tiny_checkpoint(Arch::kQwen35, 3, DType::kF32, "_one_value_head",
                                                   [](ModelConfig* c) { c->lin_n_value_heads = c->lin_n_key_heads; });
  const std::string path = write(dir, GgufFileType::kF32, tmp, "m.gguf");
  auto a = testing::load_model(dir);
  auto b = testing::load_model(path);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(b->config().value_heads_tiled);
  EXPECT_EQ(b->config().lin_n_value_heads, b->config().lin_n_key_heads);
  const std::vector<float> la = all_logits(*a), lb = all_logits(*b);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * 4), 0) << "logits differ";
}

// Quantized files: every tensor type of the file recorded in the
// fingerprint; the logits near the f32 model's: Q8_0 weights times int8
// activations (runtime/quant.h) move a tiny random model's logits by a few
// percent, where a tensor in the wrong layout would leave them uncorrelated.
TEST(GgufQuantizedTest, Q8FileLoadsNearTheF32ModelWithItsOwnFingerprint) {
  testing::TempDir tmp;
  const std::string dir = testing::tiny_checkpoint(Arch::kQwen35, 3, DType::kF32);
  auto f32 = testing::load_model(write(dir, GgufFileType::kF32, tmp, "f.gguf"));
  auto q8 = testing::load_model(write(dir, GgufFileType::kQ8_0, tmp, "q.gguf"));
  ASSERT_TRUE(f32 && q8);
  EXPECT_NE(f32->fingerprint(), q8->fingerprint());
  EXPECT_NE(q8->fingerprint_fields().tensor_dtypes.find(":q8_0;"), std::string::npos);
  const std::vector<float> a = all_logits(*f32), b = all_logits(*q8);
  ASSERT_EQ(a.size(), b.size());
  double err = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err += (a[i] - b[i]) * (a[i] - b[i]);
    norm += a[i] * a[i];
  }
  EXPECT_GT(err, 0.0);
  EXPECT_LT(std::sqrt(err / norm), 0.2);
}

// The mixes of a preset whose attention and linear-attention outputs are not
// whole 256-blocks: those tensors fall back to Q5_0 (q4_k_m) or Q5_1
// (q5_k_m) as llama-quantize's do, and each of their rows is the
// checkpoint's row within one 5-bit step (a row read from the wrong place, a
// wrong offset or min, would miss by the size of the weights).
TEST(GgufQuantizedTest, KMixesFallBackToQ5TypesHoldingTheCheckpointsRows) {
  const testing::CheckpointSpec spec{Arch::kQwen35, "tiny", 1, DType::kBF16, "_k256", testing::widen_to_k_blocks};
  std::unique_ptr<Checkpoint> source;
  ASSERT_TRUE(Checkpoint::open(testing::checkpoint(spec), &source).is_ok());
  for (auto [type, want] : {std::pair{GgufFileType::kQ4_K_M, DType::kQ5_0}, {GgufFileType::kQ5_K_M, DType::kQ5_1}}) {
    SCOPED_TRACE(dtype_name(want));
    GgufModel gguf;
    ASSERT_TRUE(open_gguf_model(testing::gguf_file(spec, type), &gguf).is_ok());
    int fallbacks = 0;
    for (const auto& [name, t] : gguf.checkpoint->tensors()) {
      if (t.dtype != want) continue;
      ++fallbacks;
      const TensorView* s = source->find(name);
      ASSERT_TRUE(s && s->shape == t.shape && s->dtype == DType::kBF16) << name;
      const int64_t cols = t.shape.back(), rows = t.numel() / cols, row_bytes = dtype_row_bytes(want, cols);
      // A Qwen3.5 out_proj keeps the file's column order: value heads tiled,
      // position p holding copy p / n_k of key head p % n_k.
      const ModelConfig& c = gguf.config;
      const bool tiled = c.value_heads_tiled && name.find("linear_attn.out_proj") != std::string::npos;
      const int64_t nk = c.lin_n_key_heads, dv = c.lin_value_head_dim;
      auto source_col = [&](int64_t i) {
        if (!tiled) return i;
        const int64_t p = i / dv;
        return ((p % nk) * (c.lin_n_value_heads / nk) + p / nk) * dv + i % dv;
      };
      std::vector<float> got(cols);
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_TRUE(
            dequantize_row(want, static_cast<const uint8_t*>(t.data) + r * row_bytes, cols, got.data()).is_ok());
        float amax = 0, err = 0;
        for (int64_t i = 0; i < cols; ++i) {
          uint16_t h;
          std::memcpy(&h, static_cast<const uint8_t*>(s->data) + 2 * (r * cols + source_col(i)), 2);
          amax = std::max(amax, std::fabs(bf16_to_f32(h)));
          err = std::max(err, std::fabs(got[i] - bf16_to_f32(h)));
        }
        ASSERT_LE(err, amax / 16) << name << " row " << r;
      }
    }
    EXPECT_GE(fallbacks, 1);
  }
}

// Expects every tensor the model binds to lie inside one of the file's tensors
// (a view, no rearranged copy beside the kernels' packed one).
void expect_views_into_the_file(const GgufModel& gguf) {
  for (const auto& [name, t] : gguf.checkpoint->tensors()) {
    // Named apart: Clang 14, the sanitizer builds' compiler, captures no structured binding.
    const auto* p = static_cast<const uint8_t*>(t.data);
    const auto nbytes = t.nbytes;
    const bool inside = std::any_of(gguf.file->tensors().begin(), gguf.file->tensors().end(), [&](const auto& f) {
      const auto* b = static_cast<const uint8_t*>(f.second.data);
      return p >= b && p + nbytes <= b + f.second.nbytes;
    });
    EXPECT_TRUE(inside) << name << " is not a view into the file";
  }
}

// *logits: all_logits of the checkpoint of `spec` written as an F32 file, the
// reference a quantized file of it is held near.
void f32_file_logits(const testing::CheckpointSpec& spec, std::vector<float>* logits) {
  testing::TempDir tmp;
  auto f32 = testing::load_model(write(testing::checkpoint(spec), GgufFileType::kF32, tmp, "f.gguf"));
  ASSERT_TRUE(f32);
  *logits = all_logits(*f32);
}

// The distance of a quantized file's logits to the f32 file's, relative to
// their norm, below `limit`. Uncorrelated logits of equal norm are sqrt(2)
// apart; 4-bit weights of a tiny random model move its logits by about half
// their norm.
void expect_logits_near(const Model& q, const std::vector<float>& want, GgufFileType type, double limit) {
  const std::vector<float> got = all_logits(q);
  ASSERT_EQ(got.size(), want.size());
  double err = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  EXPECT_LT(std::sqrt(err / norm), limit);
  std::printf("%s: relative distance of the logits to the f32 file's %.4f\n", gguf_file_type_name(type),
              std::sqrt(err / norm));
}

// The low-bit files (statebank quantize --type q2_k|q3_k_m|iq4_nl|iq4_xs):
// each MLP up projection holds, byte for byte, the reference quantizer's
// blocks of the checkpoint's rows (runtime_quant_test holds those equal to
// llama-quantize's), the tensors llama-quantize gives more bits get them,
// the model served from the file is a view into it, and its logits stay
// near the f32 file's (uncorrelated ones are sqrt(2) apart).
TEST(GgufQuantizedTest, LowBitFilesHoldTheReferenceBlocksAndServe) {
  const testing::CheckpointSpec spec{Arch::kQwen35, "tiny", 1, DType::kBF16, "_k256", testing::widen_to_k_blocks};
  std::unique_ptr<Checkpoint> source;
  ASSERT_TRUE(Checkpoint::open(testing::checkpoint(spec), &source).is_ok());
  std::vector<float> want;
  ASSERT_NO_FATAL_FAILURE(f32_file_logits(spec, &want));
  ModelConfig config;
  ASSERT_TRUE(parse_config(testing::checkpoint(spec), &config).is_ok());
  // llama-quantize's ffn_down of layer 0: Q3_K in Q2_K, Q5_K in the first
  // sixteenth of the layers in Q3_K_M (else Q4_K), Q5_K in the first eighth
  // in the IQ4 types (else their own).
  const bool first_16th = 0 < config.n_layers / 16, first_8th = 0 < config.n_layers / 8;
  struct Case {
    GgufFileType type;
    DType base, down;
    double limit;
  };
  for (const Case& c :
       {Case{GgufFileType::kQ2_K, DType::kQ2_K, DType::kQ3_K, 1.1},
        Case{GgufFileType::kQ3_K_M, DType::kQ3_K, first_16th ? DType::kQ5_K : DType::kQ4_K, 0.85},
        Case{GgufFileType::kIQ4_NL, DType::kIQ4_NL, first_8th ? DType::kQ5_K : DType::kIQ4_NL, 0.75},
        Case{GgufFileType::kIQ4_XS, DType::kIQ4_XS, first_8th ? DType::kQ5_K : DType::kIQ4_XS, 0.75}}) {
    SCOPED_TRACE(gguf_file_type_name(c.type));
    const std::string path = testing::gguf_file(spec, c.type);
    GgufModel gguf;
    ASSERT_TRUE(open_gguf_model(path, &gguf).is_ok());
    expect_views_into_the_file(gguf);
    int checked = 0;
    for (const auto& [name, t] : gguf.checkpoint->tensors()) {
      if (name.find("mlp.up_proj.weight") == std::string::npos) continue;
      ASSERT_EQ(t.dtype, c.base) << name;
      const TensorView* s = source->find(name);
      ASSERT_TRUE(s && s->shape == t.shape && s->dtype == DType::kBF16) << name;
      const int64_t cols = t.shape.back(), rows = t.numel() / cols, row_bytes = dtype_row_bytes(c.base, cols);
      std::vector<float> row(static_cast<size_t>(cols));
      std::vector<uint8_t> blocks(static_cast<size_t>(row_bytes));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < cols; ++i) {
          uint16_t h;
          std::memcpy(&h, static_cast<const uint8_t*>(s->data) + 2 * (r * cols + i), 2);
          row[static_cast<size_t>(i)] = bf16_to_f32(h);
        }
        ASSERT_TRUE(quantize_row(c.base, row.data(), cols, blocks.data()).is_ok());
        ASSERT_EQ(0, std::memcmp(blocks.data(), static_cast<const uint8_t*>(t.data) + r * row_bytes, row_bytes))
            << name << " row " << r;
      }
      ++checked;
    }
    EXPECT_GT(checked, 0);
    std::unique_ptr<GgufFile> g;
    ASSERT_TRUE(GgufFile::open(path, &g).is_ok());
    const auto* down = g->find_tensor("blk.0.ffn_down.weight");
    const auto* out = g->find_tensor(config.tie_word_embeddings ? "token_embd.weight" : "output.weight");
    ASSERT_TRUE(down && out);
    EXPECT_EQ(down->dtype, c.down);
    EXPECT_EQ(out->dtype, DType::kQ6_K);
    auto q = testing::load_model(path);
    ASSERT_TRUE(q);
    expect_logits_near(*q, want, c.type, c.limit);
  }
}

// The frame of the two tests below, for the Q8_0 and the Q4_K_M file of
// `spec`: every tensor the model binds is a view into the file, `check`
// holds the family's own tensors, the loaded model's fingerprint records
// `config_field`, and its logits stay within `q8_limit` (Q8_0) or
// `q4_limit` (Q4_K_M) of the F32 file's.
void expect_quantized_files_served_from_their_bytes(const testing::CheckpointSpec& spec,
                                                    const std::string& config_field, double q8_limit, double q4_limit,
                                                    const std::function<void(const GgufModel&, GgufFileType)>& check) {
  std::vector<float> want;
  ASSERT_NO_FATAL_FAILURE(f32_file_logits(spec, &want));
  for (GgufFileType type : {GgufFileType::kQ8_0, GgufFileType::kQ4_K_M}) {
    SCOPED_TRACE(gguf_file_type_name(type));
    const std::string path = testing::gguf_file(spec, type);
    GgufModel gguf;
    ASSERT_TRUE(open_gguf_model(path, &gguf).is_ok());
    expect_views_into_the_file(gguf);
    ASSERT_NO_FATAL_FAILURE(check(gguf, type));
    auto q = testing::load_model(path);
    ASSERT_TRUE(q);
    EXPECT_NE(q->fingerprint_fields().config.find(config_field), std::string::npos);
    expect_logits_near(*q, want, type, type == GgufFileType::kQ8_0 ? q8_limit : q4_limit);
  }
}

// A quantized Qwen3.5 file is served from its own bytes: every tensor the
// model binds is a view into the file, out_proj keeps its block type (its
// value heads are not whole Q8_0 or Q5_0 blocks in this preset, so its input
// is tiled), and the logits stay near the f32 file's (heads in the wrong
// order would leave them uncorrelated).
TEST(GgufQuantizedTest, Qwen35TensorsAreViewsIntoTheFileAndOutProjStaysQuantized) {
  const testing::CheckpointSpec spec{Arch::kQwen35, "tiny", 1, DType::kBF16, "_k256", testing::widen_to_k_blocks};
  expect_quantized_files_served_from_their_bytes(
      spec, "value_heads_tiled=1", 0.2, 0.9, [](const GgufModel& gguf, GgufFileType) {
        EXPECT_TRUE(gguf.config.value_heads_tiled);
        int out_projs = 0;
        for (const auto& [name, t] : gguf.checkpoint->tensors()) {
          if (name.find("linear_attn.out_proj") == std::string::npos) continue;
          ++out_projs;
          EXPECT_TRUE(dtype_is_quantized(t.dtype)) << name << " is " << dtype_name(t.dtype);
        }
        EXPECT_GE(out_projs, 1);
      });
}

// A quantized Qwen3-Next file likewise: attn_qkv and attn_gate are bound as
// they lie, each in the file's type for it (Q4_K_M's mix gives some layers'
// attn_qkv Q6_K beside attn_gate Q4_K: neither is dequantized to join the
// other), and the logits stay near the f32 file's (q, k, v or z read from
// the wrong rows would leave them uncorrelated).
TEST(GgufQuantizedTest, Qwen3NextTensorsAreViewsIntoTheFileInTheFilesTypes) {
  const testing::CheckpointSpec spec{Arch::kQwen3Next, "tiny", 1, DType::kBF16, "_k256", testing::widen_to_k_blocks};
  // Its MoE router picks other experts for some tokens once the weights are
  // rounded (0.32 on Q8_0, 0.83 on Q4_K_M): still well short of sqrt(2).
  expect_quantized_files_served_from_their_bytes(
      spec, "qkvz_split=1", 0.5, 1.0, [](const GgufModel& gguf, GgufFileType type) {
        EXPECT_TRUE(gguf.config.qkvz_split);
        int halves = 0, mixed_layers = 0;
        for (int64_t l = 0; l < gguf.config.n_layers; ++l) {
          if (gguf.config.layer_types[l] != LayerType::kLinearAttention) continue;
          const std::string A = gguf.config.tensor_prefix + "layers." + std::to_string(l) + ".linear_attn.";
          const TensorView* qkv = gguf.checkpoint->find(A + "in_proj_qkv.weight");
          const TensorView* z = gguf.checkpoint->find(A + "in_proj_z.weight");
          ASSERT_TRUE(qkv && z) << A;
          EXPECT_EQ(gguf.checkpoint->find(A + "in_proj_qkvz.weight"), nullptr) << A;
          const std::string blk = "blk." + std::to_string(l) + ".";
          EXPECT_EQ(qkv->dtype, gguf.file->find_tensor(blk + "attn_qkv.weight")->dtype) << A;
          EXPECT_EQ(z->dtype, gguf.file->find_tensor(blk + "attn_gate.weight")->dtype) << A;
          EXPECT_TRUE(dtype_is_quantized(qkv->dtype) && dtype_is_quantized(z->dtype)) << A;
          halves += 2;
          mixed_layers += qkv->dtype != z->dtype;
        }
        EXPECT_GE(halves, 2);
        if (type == GgufFileType::kQ4_K_M) {
          EXPECT_GE(mixed_layers, 1) << "no layer of two types: the case is not tested";
        }
      });
}

// llama.cpp's converter counts multi-token-prediction blocks in block_count
// (blk.<n_layers>..., with nextn_predict_layers); where statebank has no
// head to import them as (qwen3 here) they are skipped, as mtp.* tensors of
// a checkpoint are.
TEST(GgufMtpTest, MtpBlocksAfterTheTrunkAreSkipped) {
  testing::TempDir tmp;
  const std::string path =
      write(testing::tiny_checkpoint(Arch::kQwen3, 3, DType::kF32), GgufFileType::kF32, tmp, "a.gguf");
  std::unique_ptr<GgufFile> g;
  ASSERT_TRUE(GgufFile::open(path, &g).is_ok());
  GgufWriter w;
  for (const auto& [k, v] : g->metadata()) w.set(k, v);
  int64_t layers = 0;
  ASSERT_TRUE(g->get_int("qwen3.block_count", &layers).is_ok());
  w.set("qwen3.block_count", GgufValue::u32(static_cast<uint32_t>(layers + 1)));
  w.set("qwen3.nextn_predict_layers", GgufValue::u32(1));
  for (const auto& [name, t] : g->tensors()) {
    const auto* p = static_cast<const uint8_t*>(t.data);
    w.add_tensor(name, t.dtype, t.shape, std::vector<uint8_t>(p, p + t.nbytes));
  }
  w.add_tensor("blk." + std::to_string(layers) + ".nextn.eh_proj.weight", DType::kF32, {64, 128},
               std::vector<uint8_t>(64 * 128 * 4, 0));
  ASSERT_TRUE(w.write(tmp.file("mtp.gguf")).is_ok());
  auto a = testing::load_model(path);
  auto b = testing::load_model(tmp.file("mtp.gguf"));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(b->config().n_layers, layers);
  EXPECT_EQ(all_logits(*a), all_logits(*b));
}

// ---- damaged and foreign files ------------------------------------------------------------------------------------

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

Status open_bytes(const testing::TempDir& tmp, const std::string& bytes) {
  write_all(tmp.file("d.gguf"), bytes);
  GgufModel m;
  return open_gguf_model(tmp.file("d.gguf"), &m);
}

void expect_error(const Status& s, const std::string& needle) {
  ASSERT_FALSE(s.is_ok()) << "accepted; expected an error about " << needle;
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}

class GgufDamageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    good_ = new std::string(read_all(
        write(testing::tiny_checkpoint(Arch::kQwen3Next, 3, DType::kF32), GgufFileType::kQ8_0, *dir_, "good.gguf")));
  }
  static void TearDownTestSuite() {
    delete good_;
    delete dir_;
  }
  // The bytes with the first `from` replaced by `to` (same length).
  static std::string edited(const std::string& from, const std::string& to) {
    std::string b = *good_;
    const size_t at = b.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    b.replace(at, from.size(), to);
    return b;
  }
  static testing::TempDir* dir_;
  static std::string* good_;
};
testing::TempDir* GgufDamageTest::dir_ = nullptr;
std::string* GgufDamageTest::good_ = nullptr;

TEST_F(GgufDamageTest, TheUndamagedFileLoads) { EXPECT_TRUE(open_bytes(*dir_, *good_).is_ok()); }

TEST_F(GgufDamageTest, BadMagicAndTruncation) {
  std::string b = *good_;
  b[1] = 'X';
  expect_error(open_bytes(*dir_, b), "not a GGUF file");
  expect_error(open_bytes(*dir_, good_->substr(0, good_->size() / 2)), "past the end");
  expect_error(open_bytes(*dir_, good_->substr(0, 100)), "truncated");
}

TEST_F(GgufDamageTest, ShapesThatDisagreeWithTheMetadata) {
  // ssm.state_size 16 -> 17: every Gated DeltaNet tensor's shape is now wrong.
  std::string key = "qwen3next.ssm.state_size";
  std::string b = *good_;
  const size_t at = b.find(key) + key.size() + 4;  // the u32 value after the type
  b[at] = 17;
  expect_error(open_bytes(*dir_, b), "the metadata makes it");
  // An absurd layer count is refused before any list is built from it.
  key = "qwen3next.block_count";
  b = *good_;
  const uint32_t huge = 0x7fffffff;
  std::memcpy(b.data() + b.find(key) + key.size() + 4, &huge, 4);
  expect_error(open_bytes(*dir_, b), "outside");
}

TEST_F(GgufDamageTest, UnknownArchitectureMissingAndUnexpectedTensors) {
  expect_error(open_bytes(*dir_, edited("qwen3next.block_count", "qwen3nexx.block_count")), "qwen3next.block_count");
  expect_error(open_bytes(*dir_, edited("blk.1.ssm_a", "blk.1.ssm_b")), "blk.1.ssm_a");
  std::string arch = *good_;
  const std::string tag = std::string("\x09\0\0\0\0\0\0\0qwen3next", 17);
  arch.replace(arch.find(tag), tag.size(), std::string("\x09\0\0\0\0\0\0\0llamallama", 17));
  expect_error(open_bytes(*dir_, arch), "llamallam");
}

TEST_F(GgufDamageTest, AnUnsupportedTypeNamesTensorAndType) {
  // blk.0.ffn_up_exps.weight: name, n_dims, 3 dims, then its type (Q8_0 = 8) -> IQ2_XS (17).
  const std::string name = "blk.0.ffn_up_exps.weight";
  std::string b = *good_;
  const size_t at = b.find(name) + name.size() + 4 + 3 * 8;
  uint32_t type = 0;
  std::memcpy(&type, b.data() + at, 4);
  ASSERT_EQ(type, 8u);
  type = 17;
  std::memcpy(b.data() + at, &type, 4);
  const Status s = open_bytes(*dir_, b);
  expect_error(s, name);
  expect_error(s, "IQ2_XS");
}

void unnormalised_topk(ModelConfig* c) { c->norm_topk_prob = false; }

TEST(GgufWriteTest, ConfigsWithoutALlamaCppCounterpartAreRefused) {
  testing::TempDir tmp;
  const Status s = write_gguf_model(testing::tiny_checkpoint(Arch::kQwen3Next, 3, DType::kF32, "_unnormalised_topk",
                                                             unnormalised_topk),
                                    GgufFileType::kF32, tmp.file("x.gguf"));
  expect_error(s, "norm_topk_prob false");
  GgufFileType t;
  expect_error(parse_gguf_file_type("q3_k", &t), "q4_k_m");
}

// ---- the MTP head as llama.cpp's nextn block --------------------------------------------------------------------

void with_head(ModelConfig* c) { c->mtp_layers = 1; }
void widened_with_head(ModelConfig* c) {
  testing::widen_to_k_blocks(c);
  c->mtp_layers = 1;
}

// The head's logits and hidden row for pairs (hidden of token i, token i + 1)
// of a short prompt, the trunk's hidden rows computed by the same model.
MtpOutput head_output(const Model& m) {
  const std::vector<int32_t> tokens = {11, 2000, 37, 512, 9, 77};
  State s = m.new_state();
  PrefillOptions o;
  o.all_logits = true;
  PrefillOutput out;
  EXPECT_TRUE(m.prefill(s, tokens, o, &out).is_ok());
  const int64_t H = m.config().hidden_size, n = static_cast<int64_t>(tokens.size()) - 1;
  State kv = m.new_mtp_state();
  MtpOutput head;
  const Status st = m.mtp_forward(
      MtpStep{&kv, 0, 1, std::span<const float>(out.hidden.data(), n * H), std::span(tokens).subspan(1)}, &head);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return head;
}

// mtp.* written as blk.<n_layers>.* and nextn.* (block_count + 1,
// nextn_predict_layers 1) and imported back: the head computes the
// checkpoint's bits, for a dense FFN (qwen3_5), per-expert MoE (qwen3_next)
// and fused MoE (qwen3_5_moe).
TEST(GgufMtpTest, F32FileGivesTheHeadsLogitsBitForBit) {
  for (Arch arch : {Arch::kQwen3Next, Arch::kQwen35, Arch::kQwen35Moe}) {
    SCOPED_TRACE(arch_name(arch));
    testing::TempDir tmp;
    const std::string dir = testing::tiny_checkpoint(arch, 1, DType::kF32, "_mtp", with_head);
    const std::string path = write(dir, GgufFileType::kF32, tmp, "m.gguf");
    std::unique_ptr<GgufFile> g;
    ASSERT_TRUE(GgufFile::open(path, &g).is_ok());
    const std::string arch_key = arch == Arch::kQwen3Next ? "qwen3next"
                                 : arch == Arch::kQwen35  ? "qwen35"
                                                          : "qwen35moe";
    int64_t blocks = 0, nextn = 0;
    ASSERT_TRUE(g->get_int(arch_key + ".block_count", &blocks).is_ok());
    ASSERT_TRUE(g->get_int(arch_key + ".nextn_predict_layers", &nextn).is_ok());
    EXPECT_EQ(nextn, 1);
    const std::string N = "blk." + std::to_string(blocks - 1) + ".";
    for (const char* t : {"nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight",
                          "nextn.shared_head_norm.weight", "attn_q.weight", "post_attention_norm.weight"})
      EXPECT_NE(g->find_tensor(N + t), nullptr) << N + t;
    auto a = testing::load_model(dir);
    auto b = testing::load_model(path);
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(a->has_mtp() && b->has_mtp());
    EXPECT_EQ(b->config().n_layers, blocks - 1);
    EXPECT_EQ(all_logits(*a), all_logits(*b));
    const MtpOutput ha = head_output(*a), hb = head_output(*b);
    ASSERT_FALSE(ha.logits.empty());  // the draft vocabulary's rows of the LM head
    ASSERT_EQ(ha.logits.size(), hb.logits.size());
    EXPECT_EQ(std::memcmp(ha.logits.data(), hb.logits.data(), ha.logits.size() * 4), 0) << "head logits differ";
    EXPECT_EQ(ha.hidden, hb.hidden);
  }
}

// Quantized files carry the head in the types llama-quantize gives a
// block's tensors (eh_proj as any matrix; the nextn block counted in the
// layers whose ffn_down gets more bits), load with it, and draft near the
// F32 head: within the distance quantizing the whole tiny random model
// moves logits (Q4_K_M's is of order 0.5, docs/xcheck.md), where a tensor
// in the wrong layout would leave them uncorrelated (about 1.4).
TEST(GgufMtpTest, QuantizedFilesLoadAndDraft) {
  const testing::CheckpointSpec spec{Arch::kQwen35, "tiny", 1, DType::kF32, "_k256_mtp", widened_with_head};
  auto f32 = testing::load_model(testing::checkpoint(spec));  // an F32 file's bits (the test above)
  ASSERT_TRUE(f32 && f32->has_mtp());
  const MtpOutput ref = head_output(*f32);
  const int64_t N = f32->config().n_layers;
  for (auto [type, eh, down, bound] : {std::tuple{GgufFileType::kQ8_0, DType::kQ8_0, DType::kQ8_0, 0.3},
                                       {GgufFileType::kQ4_K_M, DType::kQ4_K, DType::kQ6_K, 0.8}}) {
    SCOPED_TRACE(gguf_file_type_name(type));
    const std::string path = testing::gguf_file(spec, type);
    std::unique_ptr<GgufFile> g;
    ASSERT_TRUE(GgufFile::open(path, &g).is_ok());
    const std::string B = "blk." + std::to_string(N) + ".";
    ASSERT_NE(g->find_tensor(B + "nextn.eh_proj.weight"), nullptr);
    EXPECT_EQ(g->find_tensor(B + "nextn.eh_proj.weight")->dtype, eh);
    EXPECT_EQ(g->find_tensor(B + "ffn_down.weight")->dtype, down);
    EXPECT_EQ(g->find_tensor(B + "nextn.enorm.weight")->dtype, DType::kF32);
    auto q = testing::load_model(path);
    ASSERT_TRUE(q && q->has_mtp());
    const MtpOutput out = head_output(*q);
    ASSERT_EQ(out.logits.size(), ref.logits.size());
    double err = 0, norm = 0;
    for (size_t i = 0; i < out.logits.size(); ++i) {
      err += (out.logits[i] - ref.logits[i]) * (out.logits[i] - ref.logits[i]);
      norm += ref.logits[i] * ref.logits[i];
    }
    EXPECT_GT(err, 0.0);
    EXPECT_LT(std::sqrt(err / norm), bound);
    EXPECT_GE(out.stats.argmax, 0);
  }
}

// A nextn block with a tensor missing or of the wrong shape: an error naming
// the tensor, never a crash or a model without its head.
TEST(GgufMtpTest, ADamagedNextnBlockNamesTheTensor) {
  testing::TempDir tmp;
  const std::string path = write(testing::tiny_checkpoint(Arch::kQwen35, 1, DType::kF32, "_mtp", with_head),
                                 GgufFileType::kF32, tmp, "m.gguf");
  std::unique_ptr<GgufFile> g;
  ASSERT_TRUE(GgufFile::open(path, &g).is_ok());
  int64_t blocks = 0;
  ASSERT_TRUE(g->get_int("qwen35.block_count", &blocks).is_ok());
  const std::string B = "blk." + std::to_string(blocks - 1) + ".";
  auto rewrite = [&](const std::string& name, bool drop, std::vector<int64_t> shape) {
    GgufWriter w;
    for (const auto& [k, v] : g->metadata()) w.set(k, v);
    for (const auto& [n, t] : g->tensors()) {
      if (n == name && drop) continue;
      const auto* p = static_cast<const uint8_t*>(t.data);
      w.add_tensor(n, t.dtype, n == name ? shape : t.shape, std::vector<uint8_t>(p, p + t.nbytes));
    }
    EXPECT_TRUE(w.write(tmp.file("d.gguf")).is_ok());
    GgufModel m;
    return open_gguf_model(tmp.file("d.gguf"), &m);
  };
  for (const char* part : {"nextn.hnorm.weight", "nextn.eh_proj.weight", "attn_k.weight", "ffn_up.weight"}) {
    const Status s = rewrite(B + part, true, {});
    expect_error(s, B + part);
    expect_error(s, "missing");
  }
  const int64_t H = g->find_tensor(B + "nextn.eh_proj.weight")->shape[0];
  const Status s = rewrite(B + "nextn.eh_proj.weight", false, {2 * H, H});
  expect_error(s, B + "nextn.eh_proj.weight");
  expect_error(s, "shape");
}

// --model takes a GGUF file whatever its name (a download's blob, .GGUF) and
// a checkpoint directory; a missing path is an error naming what it takes.
TEST(GgufModelArgTest, AFileOfAnyNameIsGgufAndAMissingPathSaysWhatIsExpected) {
  testing::TempDir tmp;
  const std::string dir = testing::tiny_checkpoint(Arch::kQwen3, 3, DType::kF32);
  const std::string path = write(dir, GgufFileType::kF32, tmp, "m.gguf");
  const std::vector<float> expected = all_logits(*testing::load_model(path));
  std::string resolved;
  for (const std::string name : {"M.GGUF", "blob-3f9a"}) {
    std::filesystem::create_hard_link(path, tmp.file(name));
    ASSERT_TRUE(resolve_model_dir(tmp.file(name), &resolved).is_ok()) << name;
    EXPECT_EQ(resolved, tmp.file(name));
    EXPECT_TRUE(is_gguf_path(resolved)) << name;
  }
  auto m = testing::load_model(resolved);  // the blob's name does not say GGUF: the loader reads it as one
  ASSERT_TRUE(m);
  const std::vector<float> got = all_logits(*m);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * 4), 0) << "logits differ";
  EXPECT_TRUE(resolve_model_dir(dir, &resolved).is_ok());
  for (const std::string& missing : {tmp.file("none.gguf"), tmp.file("none")}) {
    const Status s = resolve_model_dir(missing, &resolved);
    EXPECT_EQ(s.code(), Code::kNotFound) << missing;
    EXPECT_NE(s.message().find("--model takes a checkpoint directory, a GGUF file, or demo"), std::string::npos)
        << s.message();
    EXPECT_EQ(s.message().find("model directory"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace sb
