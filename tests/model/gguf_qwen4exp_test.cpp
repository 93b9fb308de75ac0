// qwen4exp as a GGUF file in llama.cpp's layout (model/gguf_model.h,
// docs/model-spec.md 7.7): a tiny checkpoint written by statebank's writer
// and loaded back computes the checkpoint's logits bit for bit (F32, and BF16
// from a bf16 checkpoint) over a prompt past the indexer's budget, so the
// top-k selection drops blocks; the n-gram hash is the file's metadata and
// the table a view into the file; quantized files serve; bad or missing
// qwen4exp metadata is an error naming the key and the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "model/gen_model.h"
#include "model/gguf_model.h"
#include "runtime/cpu/backend.h"
#include "runtime/dtype.h"
#include "runtime/quant.h"
#include "tests/util/models.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

// 40 tokens: past the tiny preset's budget of 16 (4 blocks of 4), with an
// eos inside so the n-gram hash cuts there.
std::vector<int32_t> prompt() {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 40; ++i) ids.push_back((i * 7919 + 13) % 150000);
  ids[21] = 151645;
  return ids;
}

std::vector<float> all_logits(const Model& m) { return testing::prefill_and_step_logits(m, prompt(), 7); }

const testing::CheckpointSpec kF32Spec{Arch::kQwen4Exp, "tiny", 3, DType::kF32, "", nullptr};

// statebank quantize's F32 file of the f32 tiny checkpoint, once per process.
std::string f32_file() { return testing::gguf_file(kF32Spec, GgufFileType::kF32); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(GgufQwen4ExpTest, F32FileGivesTheCheckpointsLogitsBitForBit) {
  const std::string dir = testing::checkpoint(kF32Spec), path = f32_file();
  GgufModel g;
  ASSERT_TRUE(open_gguf_model(path, &g).is_ok());
  EXPECT_EQ(g.config.arch, Arch::kQwen4Exp);
  EXPECT_TRUE(g.config.index_qk_split);
  auto a = testing::load_model(dir);
  auto b = testing::load_model(path);
  ASSERT_TRUE(a && b);
  ASSERT_GT(static_cast<int64_t>(prompt().size()), a->config().index_topk_blocks * a->config().index_compress_ratio);
  EXPECT_EQ(a->schema(), b->schema());
  EXPECT_TRUE(same_bits(all_logits(*a), all_logits(*b))) << "logits differ";
  EXPECT_NE(a->fingerprint(), b->fingerprint());
}

TEST(GgufQwen4ExpTest, Bf16FileOfABf16CheckpointIsBitForBit) {
  const testing::CheckpointSpec spec{Arch::kQwen4Exp, "tiny", 3, DType::kBF16, "", nullptr};
  const std::string dir = testing::checkpoint(spec), path = testing::gguf_file(spec, GgufFileType::kBF16);
  auto a = testing::load_model(dir);
  auto b = testing::load_model(path);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(same_bits(all_logits(*a), all_logits(*b))) << "logits differ";
}

// The n-gram hash comes from the file's metadata: a file whose first
// multiplier is changed (same length, so the file stays valid) hashes other
// rows and gives other logits, and another fingerprint; the comparison above
// would notice a PLE layer that read the wrong rows.
TEST(GgufQwen4ExpTest, TheHashConstantsAreTheFilesAndChangeTheLogits) {
  testing::TempDir tmp;
  const std::string path = f32_file();
  GgufModel g;
  ASSERT_TRUE(open_gguf_model(path, &g).is_ok());
  ASSERT_FALSE(g.config.ngram_multipliers.empty());
  std::string bytes = read_all(path);
  const std::string key = "qwen4exp.ple.layer_multipliers";
  const size_t at = bytes.find(key) + key.size() + 4 + 4 + 8;  // type, element type, count, then entry 0
  uint64_t m0;
  std::memcpy(&m0, bytes.data() + at, 8);
  ASSERT_EQ(static_cast<int64_t>(m0), g.config.ngram_multipliers[0]);
  m0 += 2;  // still odd
  std::memcpy(bytes.data() + at, &m0, 8);
  write_all(tmp.file("edited.gguf"), bytes);
  auto a = testing::load_model(path);
  auto b = testing::load_model(tmp.file("edited.gguf"));
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(same_bits(all_logits(*a), all_logits(*b)));
  EXPECT_NE(a->fingerprint(), b->fingerprint());
}

// The table is a view into the file's mapping, not a copy.
TEST(GgufQwen4ExpTest, TheNgramTableIsAViewIntoTheFile) {
  GgufModel g;
  ASSERT_TRUE(open_gguf_model(f32_file(), &g).is_ok());
  const TensorView* file = g.file->find_tensor("per_layer_token_embd.weight");
  const TensorView* shard = g.checkpoint->find(g.config.tensor_prefix + "layers." +
                                               std::to_string(g.config.ple_layers[0]) +
                                               ".ple.ple_embedding.ngram_embedding.shard_0.weight");
  ASSERT_TRUE(file && shard);
  EXPECT_EQ(shard->data, file->data);
  EXPECT_EQ(shard->nbytes, file->nbytes);
}

// Every row of an IQ4_NL table within a 4-bit step of the checkpoint's row
// (its shards in order): a row taken from the wrong place would miss by the
// size of the values.
void expect_rows_near_the_checkpoints(const TensorView& table, const Checkpoint& source, const ModelConfig& c) {
  const int64_t rows = table.shape[0], cols = table.shape[1], row_bytes = dtype_row_bytes(table.dtype, cols);
  std::vector<float> want;
  const std::string shard = "model.language_model.layers." + std::to_string(c.ple_layers[0]) +
                            ".ple.ple_embedding.ngram_embedding.shard_";
  for (int64_t p = 0; const TensorView* v = source.find(shard + std::to_string(p) + ".weight"); ++p) {
    ASSERT_EQ(v->dtype, DType::kF32);
    const float* f = static_cast<const float*>(v->data);
    want.insert(want.end(), f, f + v->numel());
  }
  ASSERT_EQ(static_cast<int64_t>(want.size()), rows * cols);
  std::vector<float> got(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = static_cast<const uint8_t*>(table.data) + r * row_bytes;
    ASSERT_TRUE(dequantize_row(table.dtype, row, cols, got.data()).is_ok());
    float top = 0, miss = 0;
    for (int64_t i = 0; i < cols; ++i) {
      top = std::max(top, std::fabs(want[r * cols + i]));
      miss = std::max(miss, std::fabs(got[i] - want[r * cols + i]));
    }
    ASSERT_LE(miss, 0.2f * top) << "row " << r;
  }
}

void rows_of_32(ModelConfig* c) { c->heads_per_ngram = 1; }  // 64 / 2 heads: table rows of 32, whole IQ4_NL blocks

// Quantized files (statebank quantize's q8_0 and q4_k_m): they load and
// serve, near the checkpoint's logits, the n-gram table in IQ4_NL as the
// published files hold it, each row within a 4-bit step of the
// checkpoint's. The 4-bit table moves a tiny random model's logits by about
// a fifth (Q8_0 elsewhere; 2% with an F32 table) to a third (Q4_K_M); a
// tensor read in the wrong layout leaves them uncorrelated (sqrt(2) away).
TEST(GgufQwen4ExpTest, QuantizedFilesServeWithTheTableInIq4Nl) {
  const testing::CheckpointSpec spec{Arch::kQwen4Exp, "tiny", 3, DType::kF32, "_rows32", rows_of_32};
  std::unique_ptr<Checkpoint> source;
  ASSERT_TRUE(Checkpoint::open(testing::checkpoint(spec), &source).is_ok());
  auto f32 = testing::load_model(testing::checkpoint(spec));
  ASSERT_TRUE(f32);
  const std::vector<float> ref = all_logits(*f32);
  for (auto [type, bound] : {std::pair{GgufFileType::kQ8_0, 0.5}, {GgufFileType::kQ4_K_M, 0.7}}) {
    SCOPED_TRACE(gguf_file_type_name(type));
    const std::string path = testing::gguf_file(spec, type);
    GgufModel g;
    ASSERT_TRUE(open_gguf_model(path, &g).is_ok());
    const TensorView& table = *g.file->find_tensor("per_layer_token_embd.weight");
    ASSERT_EQ(table.dtype, DType::kIQ4_NL);
    expect_rows_near_the_checkpoints(table, *source, g.config);
    auto q = testing::load_model(path);
    ASSERT_TRUE(q);
    const std::vector<float> got = all_logits(*q);
    ASSERT_EQ(got.size(), ref.size());
    double err = 0, norm = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      err += (got[i] - ref[i]) * (got[i] - ref[i]);
      norm += ref[i] * ref[i];
    }
    EXPECT_GT(err, 0.0);
    EXPECT_LT(std::sqrt(err / norm), bound);
  }
}

// gen-model --gguf-type (model/gen_model.h): the file written straight from
// the generator, one layer in memory at a time, is byte for byte what
// statebank quantize writes from the checkpoint directory of the same
// config and seed (the Q4_K_M mix: K-quants, the IQ4_NL table, F32 indexer
// projections), quantize's file made by the test above.
TEST(GgufQwen4ExpTest, GenModelsDirectFileIsQuantizesFileByteForByte) {
  const testing::CheckpointSpec spec{Arch::kQwen4Exp, "tiny", 3, DType::kF32, "_rows32", rows_of_32};
  const std::string quantized = read_all(testing::gguf_file(spec, GgufFileType::kQ4_K_M));
  ModelConfig c;
  ASSERT_TRUE(preset_config(Arch::kQwen4Exp, "tiny", &c).is_ok());
  rows_of_32(&c);
  std::string tok;
  ASSERT_TRUE(find_tokenizer_dir("", &tok).is_ok());
  testing::TempDir dir;
  Status s = write_random_gguf(c, spec.seed, spec.dtype, tok, GgufFileType::kQ4_K_M, dir.file("direct.gguf"));
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  const std::string direct = read_all(dir.file("direct.gguf"));
  ASSERT_EQ(direct.size(), quantized.size());
  EXPECT_TRUE(direct == quantized) << "the direct file differs from quantize's";
}

// ---- bad metadata ---------------------------------------------------------------------------------------------

// The file's bytes edited in memory and parsed as a file named bad.gguf.
class GgufQwen4ExpDamageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { good_ = new std::string(read_all(f32_file())); }
  static void TearDownTestSuite() { delete good_; }
  static Status open(const std::string& bytes) {
    std::unique_ptr<GgufFile> file;
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    SB_RETURN_IF_ERROR(GgufFile::parse(data, bytes.size(), "bad.gguf", &file));
    GgufModel m;
    return gguf_model_from_file(std::move(file), &m);
  }
  static Status open_edited(const std::string& from, const std::string& to) {
    std::string b = *good_;
    const size_t at = b.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    b.replace(at, from.size(), to);
    return open(b);
  }
  static void expect_error(const Status& s, const std::string& needle) {
    ASSERT_FALSE(s.is_ok()) << "accepted; expected an error about " << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("bad.gguf"), std::string::npos) << s.message();
  }
  static std::string* good_;
};
std::string* GgufQwen4ExpDamageTest::good_ = nullptr;

TEST_F(GgufQwen4ExpDamageTest, TheUndamagedFileLoads) { EXPECT_TRUE(open(*good_).is_ok()); }

TEST_F(GgufQwen4ExpDamageTest, AMissingKeyIsNamed) {
  for (const std::string key : {"qwen4exp.hyper_connection.count", "qwen4exp.hyper_connection.low_rank",
                                "qwen4exp.attention.indexer.top_k", "qwen4exp.attention.compress_ratios",
                                "qwen4exp.ple.head_offsets", "qwen4exp.ple.eos_token_id",
                                "qwen4exp.embedding_length_per_layer_input"}) {
    SCOPED_TRACE(key);
    std::string renamed = key;
    renamed.back() = renamed.back() == 'X' ? 'Y' : 'X';
    expect_error(open_edited(key, renamed), key);
  }
}

TEST_F(GgufQwen4ExpDamageTest, BadValuesAreNamed) {
  // A u32 value right after its key and type.
  auto set_u32 = [](const std::string& key, uint32_t v) {
    std::string b = *good_;
    const size_t at = b.find(key) + key.size() + 4;
    std::memcpy(b.data() + at, &v, 4);
    return b;
  };
  expect_error(open(set_u32("qwen4exp.hyper_connection.count", 1)), "qwen4exp.hyper_connection.count");
  expect_error(open(set_u32("qwen4exp.attention.indexer.top_k", 18)), "qwen4exp.attention.indexer.top_k");
  expect_error(open(set_u32("qwen4exp.embedding_length_per_layer_input", 8)),
               "qwen4exp.embedding_length_per_layer_input");
  // The table's shape must hold every head's rows.
  expect_error(open_edited("per_layer_token_embd.weight", "per_layer_token_embd.weighX"),
               "per_layer_token_embd.weight");
}

// llama-quantize's type for table rows that are not whole 32-blocks (the
// tiny preset's 16-wide rows) is F16, and so is statebank quantize's. Such a
// table is read widened, exactly: the logits, bit for bit, of the F32 file
// whose table holds the same values; and those values differ from the
// unrounded ones enough to move the logits, so a table read as the wrong
// type or from the unrounded bytes would be noticed.
TEST_F(GgufQwen4ExpDamageTest, AnF16TableIsReadAsItsValuesWidened) {
  const std::string name = "per_layer_token_embd.weight";
  std::string f16 = *good_, rounded = *good_;
  const size_t type_at = f16.find(name) + name.size() + 4 + 2 * 8;  // n_dims, two dims, then the type (F32 = 0)
  uint32_t type = 0;
  std::memcpy(&type, f16.data() + type_at, 4);
  ASSERT_EQ(type, 0u);
  type = 1;  // F16: half the bytes, in the F32 table's place
  std::memcpy(f16.data() + type_at, &type, 4);
  std::unique_ptr<GgufFile> file;
  ASSERT_TRUE(GgufFile::parse(reinterpret_cast<const uint8_t*>(good_->data()), good_->size(), "good.gguf", &file)
                  .is_ok());
  const TensorView* table = file->find_tensor(name);
  ASSERT_TRUE(table && table->dtype == DType::kF32);
  const size_t at = static_cast<size_t>(static_cast<const char*>(table->data) - good_->data());
  for (int64_t i = 0; i < table->numel(); ++i) {
    float v;
    std::memcpy(&v, good_->data() + at + 4 * i, 4);
    const uint16_t h = f32_to_f16(v);
    const float w = f16_to_f32(h);
    std::memcpy(f16.data() + at + 2 * i, &h, 2);
    std::memcpy(rounded.data() + at + 4 * i, &w, 4);
  }
  testing::TempDir tmp;
  write_all(tmp.file("f16.gguf"), f16);
  write_all(tmp.file("rounded.gguf"), rounded);
  auto a = testing::load_model(tmp.file("f16.gguf"));
  auto b = testing::load_model(tmp.file("rounded.gguf"));
  auto c = testing::load_model(f32_file());
  ASSERT_TRUE(a && b && c);
  const std::vector<float> rounded_logits = all_logits(*b);
  EXPECT_TRUE(same_bits(all_logits(*a), rounded_logits));
  EXPECT_FALSE(same_bits(all_logits(*c), rounded_logits));
}

}  // namespace
}  // namespace sb
