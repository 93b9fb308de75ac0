// GGUF reader and writer: a round trip of every value type and tensor type,
// and each damaged file (bad magic, every truncation, offsets outside the
// file, unknown types, bad alignment, duplicates, absurd counts) giving one
// clear error.
#include "gguf/gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "tests/util/temp_dir.h"

namespace sb {
namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

GgufWriter sample_writer() {
  GgufWriter w;
  w.set("general.architecture", GgufValue::string("qwen3"));
  w.set("test.u32", GgufValue::u32(4000000000u));
  w.set("test.i32", GgufValue::i32(-7));
  w.set("test.u64", GgufValue::u64(1ull << 40));
  w.set("test.f32", GgufValue::f32(0.25f));
  w.set("test.bool", GgufValue::boolean(true));
  w.set("test.strings", GgufValue::string_array({"a", "", "Ġhello"}));
  w.set("test.i8s", GgufValue::int_array(GgufType::kI8, {-1, 2, 127}));
  w.set("test.bools", GgufValue::int_array(GgufType::kBool, {1, 0, 1}));
  w.set("test.floats", GgufValue::f32_array({1.5, -2}));
  w.add_tensor("t.f32", DType::kF32, {3, 2}, pattern(24, 1));
  w.add_tensor("t.bf16", DType::kBF16, {5}, pattern(10, 2));
  w.add_tensor("t.q8_0", DType::kQ8_0, {2, 64}, pattern(2 * 2 * 34, 3));
  w.add_tensor("t.q4_k", DType::kQ4_K, {2, 1, 256}, pattern(2 * 144, 4));
  return w;
}

std::string sample_bytes() {
  std::string b;
  EXPECT_TRUE(sample_writer().serialize(&b).is_ok());
  return b;
}

Status parse(const std::string& bytes, std::unique_ptr<GgufFile>* g) {
  return GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "x.gguf", g);
}

void expect_error(const std::string& bytes, const std::string& needle) {
  std::unique_ptr<GgufFile> g;
  Status s = parse(bytes, &g);
  ASSERT_FALSE(s.is_ok()) << "accepted; expected an error about " << needle;
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("x.gguf"), std::string::npos) << s.message();
}

// Offset of the tensor info of `name` (its length prefix) in a file's bytes.
size_t info_at(const std::string& bytes, const std::string& name) {
  std::string key(8, '\0');
  const uint64_t n = name.size();
  std::memcpy(key.data(), &n, 8);
  size_t at = bytes.find(key + name);
  EXPECT_NE(at, std::string::npos);
  return at;
}

template <typename T>
void poke(std::string* bytes, size_t at, T v) {
  std::memcpy(bytes->data() + at, &v, sizeof v);
}

TEST(GgufTest, RoundTripsEveryValueAndTensorType) {
  const std::string bytes = sample_bytes();
  std::unique_ptr<GgufFile> g;
  ASSERT_TRUE(parse(bytes, &g).is_ok());
  EXPECT_EQ(g->version(), 3u);
  int64_t i = 0;
  double f = 0;
  std::string s;
  bool b = false;
  ASSERT_TRUE(g->get_int("test.u32", &i).is_ok());
  EXPECT_EQ(i, 4000000000ll);
  ASSERT_TRUE(g->get_int("test.i32", &i).is_ok());
  EXPECT_EQ(i, -7);
  ASSERT_TRUE(g->get_int("test.u64", &i).is_ok());
  EXPECT_EQ(i, 1ll << 40);
  ASSERT_TRUE(g->get_float("test.f32", &f).is_ok());
  EXPECT_EQ(f, 0.25);
  ASSERT_TRUE(g->get_bool("test.bool", &b).is_ok());
  EXPECT_TRUE(b);
  ASSERT_TRUE(g->get_string("general.architecture", &s).is_ok());
  EXPECT_EQ(s, "qwen3");
  const GgufValue* a = nullptr;
  ASSERT_TRUE(g->get_array("test.strings", "string", &a).is_ok());
  EXPECT_EQ(a->strings, (std::vector<std::string>{"a", "", "Ġhello"}));
  ASSERT_TRUE(g->get_array("test.i8s", "integer", &a).is_ok());
  EXPECT_EQ(a->ints, (std::vector<int64_t>{-1, 2, 127}));
  ASSERT_TRUE(g->get_array("test.bools", "integer", &a).is_ok());
  EXPECT_EQ(a->ints, (std::vector<int64_t>{1, 0, 1}));
  ASSERT_TRUE(g->get_array("test.floats", "float", &a).is_ok());
  EXPECT_EQ(a->floats, (std::vector<double>{1.5, -2}));

  GgufWriter w = sample_writer();
  struct Want {
    const char* name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  const Want wants[] = {{"t.f32", DType::kF32, {3, 2}, pattern(24, 1)},
                        {"t.bf16", DType::kBF16, {5}, pattern(10, 2)},
                        {"t.q8_0", DType::kQ8_0, {2, 64}, pattern(136, 3)},
                        {"t.q4_k", DType::kQ4_K, {2, 1, 256}, pattern(288, 4)}};
  ASSERT_EQ(g->tensors().size(), 4u);
  for (const Want& want : wants) {
    const TensorView* t = g->find_tensor(want.name);
    ASSERT_NE(t, nullptr) << want.name;
    EXPECT_EQ(t->dtype, want.dtype) << want.name;
    EXPECT_EQ(t->shape, want.shape) << want.name;
    ASSERT_EQ(t->nbytes, want.bytes.size()) << want.name;
    EXPECT_EQ(std::memcmp(t->data, want.bytes.data(), t->nbytes), 0) << want.name;
    EXPECT_EQ((static_cast<const uint8_t*>(t->data) - reinterpret_cast<const uint8_t*>(bytes.data())) % 32, 0);
  }
}

TEST(GgufTest, OpensAFileAndDigestsItsBytes) {
  testing::TempDir dir;
  ASSERT_TRUE(sample_writer().write(dir.file("m.gguf")).is_ok());
  std::unique_ptr<GgufFile> g;
  ASSERT_TRUE(GgufFile::open(dir.file("m.gguf"), &g).is_ok());
  EXPECT_EQ(g->weights_digest().size(), 32u);
  EXPECT_EQ(g->tensors().size(), 4u);
  GgufWriter other = sample_writer();
  other.set("test.u32", GgufValue::u32(1));
  ASSERT_TRUE(other.write(dir.file("n.gguf")).is_ok());
  std::unique_ptr<GgufFile> h;
  ASSERT_TRUE(GgufFile::open(dir.file("n.gguf"), &h).is_ok());
  EXPECT_NE(g->weights_digest(), h->weights_digest());
  EXPECT_FALSE(GgufFile::open(dir.file("missing.gguf"), &h).is_ok());
  // Without the digest: the same metadata and tensors, no digest.
  ASSERT_TRUE(GgufFile::open(dir.file("m.gguf"), &h, GgufFile::Digest::kNo).is_ok());
  EXPECT_EQ(h->weights_digest(), "");
  EXPECT_EQ(h->tensors().size(), 4u);
  EXPECT_EQ(h->metadata().size(), g->metadata().size());
}

TEST(GgufTest, TypedReadsNameTheKeyAndItsType) {
  std::unique_ptr<GgufFile> g;
  ASSERT_TRUE(parse(sample_bytes(), &g).is_ok());
  int64_t i;
  std::string s;
  const GgufValue* a;
  Status st = g->get_int("general.architecture", &i);
  EXPECT_NE(st.message().find("general.architecture"), std::string::npos);
  EXPECT_NE(st.message().find("string"), std::string::npos);
  EXPECT_EQ(g->get_string("no.such.key", &s).code(), Code::kNotFound);
  EXPECT_FALSE(g->get_array("test.i8s", "string", &a).is_ok());
  EXPECT_FALSE(g->get_array("test.u32", "integer", &a).is_ok());
}

TEST(GgufTest, BadMagicAndVersion) {
  std::string b = sample_bytes();
  b[0] = 'X';
  expect_error(b, "not a GGUF file");
  b = sample_bytes();
  poke<uint32_t>(&b, 4, 1);
  expect_error(b, "version 1");
  expect_error("", "not a GGUF file");
}

TEST(GgufTest, EveryTruncationIsAnError) {
  const std::string b = sample_bytes();
  // The last tensor's bytes end before the padding that follows them.
  const size_t end = b.size() - (32 - 288 % 32) % 32;
  for (size_t n = 0; n < end; ++n) {
    std::unique_ptr<GgufFile> g;
    Status s = parse(b.substr(0, n), &g);
    ASSERT_FALSE(s.is_ok()) << "prefix of " << n << " bytes accepted";
    EXPECT_NE(s.message().find("x.gguf"), std::string::npos) << s.message();
  }
}

TEST(GgufTest, OffsetsOutsideTheFileOrOverlapping) {
  std::string b = sample_bytes();
  const size_t at = info_at(b, "t.q8_0") + 8 + 6 + 4 + 16 + 4;  // name, n_dims, 2 dims, type
  poke<uint64_t>(&b, at, uint64_t{1} << 62);
  expect_error(b, "t.q8_0");
  expect_error(b, "past the end");
  poke<uint64_t>(&b, at, 0);  // on top of t.f32
  expect_error(b, "overlap");
  poke<uint64_t>(&b, at, 7);
  expect_error(b, "not a multiple of the alignment");
}

TEST(GgufTest, UnknownTensorTypeNamesTensorAndType) {
  std::string b = sample_bytes();
  const size_t at = info_at(b, "t.bf16") + 8 + 6 + 4 + 8;  // name, n_dims, 1 dim
  poke<uint32_t>(&b, at, 17);
  expect_error(b, "tensor t.bf16");
  expect_error(b, "IQ2_XS");
  poke<uint32_t>(&b, at, 1000);
  expect_error(b, "unknown type 1000");
}

TEST(GgufTest, DamagedShapesAndCounts) {
  std::string b = sample_bytes();
  const size_t dims = info_at(b, "t.q8_0") + 8 + 6;
  poke<uint32_t>(&b, dims, 9);
  expect_error(b, "9 dimensions");
  b = sample_bytes();
  poke<uint64_t>(&b, dims + 4, 63);  // not whole Q8_0 blocks
  expect_error(b, "blocks");
  poke<uint64_t>(&b, dims + 4, 0);
  expect_error(b, "zero");
  b = sample_bytes();
  poke<uint64_t>(&b, 8, uint64_t{1} << 60);  // tensor count
  expect_error(b, "tensor count");
  b = sample_bytes();
  poke<uint64_t>(&b, 16, uint64_t{1} << 60);  // metadata count
  expect_error(b, "metadata count");
}

TEST(GgufTest, DamagedMetadata) {
  GgufWriter w = sample_writer();
  w.set("general.alignment", GgufValue::u32(48));
  std::string b;
  ASSERT_TRUE(w.serialize(&b).is_ok());
  expect_error(b, "general.alignment");
  // A huge array count, and a string longer than the file.
  b = sample_bytes();
  size_t at = b.find("test.strings") + 12 + 4 + 4;  // key, value type, element type
  poke<uint64_t>(&b, at, uint64_t{1} << 61);
  expect_error(b, "test.strings");
  b = sample_bytes();
  at = b.find("test.strings") + 12 + 4 + 4 + 8;  // first string's length
  poke<uint64_t>(&b, at, uint64_t{1} << 40);
  expect_error(b, "truncated");
  // Array of arrays, an unknown value type, a duplicate key.
  b = sample_bytes();
  poke<uint32_t>(&b, b.find("test.strings") + 12 + 4, 9);
  expect_error(b, "array of arrays");
  b = sample_bytes();
  poke<uint32_t>(&b, b.find("test.u32") + 8, 13);
  expect_error(b, "unknown value type 13");
  b = sample_bytes();
  std::memcpy(b.data() + b.find("test.i32"), "test.u32", 8);
  expect_error(b, "appears twice");
}

// The seed corpus was written by llama.cpp's gguf-py (fuzz/README.md): its
// valid files are read as that writer meant them, the rest are refused.
TEST(GgufTest, ReadsFilesLlamaCppsWriterWrote) {
  const char* src = std::getenv("SB_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "SB_SOURCE_DIR is not set (run through ctest)";
  const std::string dir = std::string(src) + "/fuzz/corpus-gguf/";
  std::unique_ptr<GgufFile> g;
  ASSERT_TRUE(GgufFile::open(dir + "valid_mixed.gguf", &g).is_ok());
  int64_t n = 0;
  ASSERT_TRUE(g->get_int("qwen3.block_count", &n).is_ok());
  EXPECT_EQ(n, 2);
  ASSERT_TRUE(g->get_int("test.i64", &n).is_ok());
  EXPECT_EQ(n, -1);
  const GgufValue* tokens = nullptr;
  ASSERT_TRUE(g->get_array("tokenizer.ggml.tokens", "string", &tokens).is_ok());
  EXPECT_EQ(tokens->strings, (std::vector<std::string>{"a", "b", "Ġc"}));
  const TensorView* embd = g->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->shape, (std::vector<int64_t>{6, 64}));
  float v[2];
  std::memcpy(v, static_cast<const uint8_t*>(embd->data) + 4 * 65, 8);
  EXPECT_EQ(v[0], 65.0f);
  EXPECT_EQ(v[1], 66.0f);
  EXPECT_EQ(g->find_tensor("blk.0.ffn_up.weight")->dtype, DType::kQ8_0);
  EXPECT_EQ(g->find_tensor("blk.0.ffn_up.weight")->shape, (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(g->find_tensor("blk.0.ffn_down.weight")->dtype, DType::kQ4_K);
  EXPECT_EQ(g->find_tensor("output_norm.weight")->dtype, DType::kF16);
  EXPECT_EQ(g->find_tensor("blk.0.attn_q.weight")->dtype, DType::kBF16);
  ASSERT_TRUE(GgufFile::open(dir + "valid_empty.gguf", &g).is_ok());
  ASSERT_TRUE(GgufFile::open(dir + "valid_one_tensor.gguf", &g).is_ok());
  // gguf-py's IQ4_XS tensor is read (the corpus file's name predates the
  // type's support); the same file with the tensor's type set to IQ2_XXS,
  // which statebank does not compute with, is refused naming both.
  ASSERT_TRUE(GgufFile::open(dir + "unsupported_iq4_xs.gguf", &g).is_ok());
  EXPECT_EQ(g->find_tensor("blk.0.attn_k.weight")->dtype, DType::kIQ4_XS);
  std::ifstream in(dir + "unsupported_iq4_xs.gguf", std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  const std::string name = "blk.0.attn_k.weight";
  const auto at = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  ASSERT_NE(at, bytes.end());
  const size_t info = static_cast<size_t>(at - bytes.begin()) + name.size();  // u32 n_dims, n_dims u64, u32 type
  uint32_t dims = 0, type = 0;
  std::memcpy(&dims, bytes.data() + info, 4);
  std::memcpy(&type, bytes.data() + info + 4 + 8 * dims, 4);
  ASSERT_EQ(type, 23u);  // IQ4_XS
  type = 16;             // IQ2_XXS
  std::memcpy(bytes.data() + info + 4 + 8 * dims, &type, 4);
  Status s = GgufFile::parse(bytes.data(), bytes.size(), "iq2_xxs.gguf", &g);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("blk.0.attn_k.weight"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("IQ2_XXS"), std::string::npos) << s.message();
  EXPECT_FALSE(GgufFile::open(dir + "truncated_mixed.gguf", &g).is_ok());
  EXPECT_FALSE(GgufFile::open(dir + "bad_magic.gguf", &g).is_ok());
}

TEST(GgufTest, WriterRefusesBytesThatDoNotFitTheShape) {
  GgufWriter w;
  w.add_tensor("bad", DType::kQ8_0, {2, 64}, pattern(10, 0));
  std::string b;
  Status s = w.serialize(&b);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("bad"), std::string::npos);
}

// Tensors made while the file is written give the same file as tensors
// handed over whole; a producer's error or a wrong byte count fails it.
TEST(GgufTest, ProducedTensorsWriteTheSameFile) {
  GgufWriter lazy;
  lazy.set("general.architecture", GgufValue::string("qwen3"));
  std::string eager_bytes, lazy_bytes;
  GgufWriter small;
  small.add_tensor("t.q8_0", DType::kQ8_0, {2, 64}, pattern(2 * 2 * 34, 3));
  lazy.add_tensor("t.q8_0", DType::kQ8_0, {2, 64}, [](std::vector<uint8_t>* out) {
    *out = pattern(2 * 2 * 34, 3);
    return Status::ok();
  });
  small.set("general.architecture", GgufValue::string("qwen3"));
  ASSERT_TRUE(small.serialize(&eager_bytes).is_ok());
  ASSERT_TRUE(lazy.serialize(&lazy_bytes).is_ok());
  EXPECT_EQ(lazy_bytes, eager_bytes);

  GgufWriter failing;
  failing.add_tensor("t.fails", DType::kF32, {4}, [](std::vector<uint8_t>*) { return Status::io_error("source gone"); });
  std::string b;
  EXPECT_NE(failing.serialize(&b).message().find("source gone"), std::string::npos);
  GgufWriter short_one;
  short_one.add_tensor("t.short", DType::kF32, {4}, [](std::vector<uint8_t>* out) {
    out->assign(12, 0);
    return Status::ok();
  });
  const Status s = short_one.serialize(&b);
  EXPECT_NE(s.message().find("t.short"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace sb
