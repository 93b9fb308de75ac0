// Split GGUF models (gguf/gguf.h): the shards llama.cpp's gguf-split wrote
// open from the first as the file they were cut from, and shards that are
// missing, misnamed or disagree are one clear error each.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>

#include "gguf/gguf.h"
#include "model/gguf_model.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

std::string source_path(const std::string& rel) {
  const char* src = std::getenv("SB_SOURCE_DIR");
  EXPECT_NE(src, nullptr) << "SB_SOURCE_DIR is not set (run through ctest)";
  return std::string(src ? src : ".") + "/" + rel;
}

// The shards in tests/model/data/gguf-split/ were cut from the corpus model
// by llama.cpp's own tool (de3ff81):
//   llama-gguf-split --split --split-max-tensors 16 model_qwen35.gguf qwen35
//   llama-gguf-split --split --split-max-tensors 24 --no-tensor-first-split model_qwen35.gguf qwen35-meta-first
// (two shards; three, the first with the metadata alone).
const char* const kFirstShards[] = {"qwen35-00001-of-00002.gguf", "qwen35-meta-first-00001-of-00003.gguf"};

void expect_same_value(const std::string& key, const GgufValue& a, const GgufValue& b) {
  EXPECT_EQ(a.type, b.type) << key;
  EXPECT_EQ(a.i, b.i) << key;
  EXPECT_EQ(a.f, b.f) << key;
  EXPECT_EQ(a.s, b.s) << key;
  EXPECT_EQ(a.strings, b.strings) << key;
  EXPECT_EQ(a.ints, b.ints) << key;
  EXPECT_EQ(a.floats, b.floats) << key;
}

TEST(GgufSplitTest, LlamaCppsShardsOpenAsTheFileTheyWereCutFrom) {
  std::unique_ptr<GgufFile> whole;
  ASSERT_TRUE(GgufFile::open(source_path("fuzz/corpus-gguf/model_qwen35.gguf"), &whole).is_ok());
  GgufModel whole_model;
  ASSERT_TRUE(open_gguf_model(source_path("fuzz/corpus-gguf/model_qwen35.gguf"), &whole_model).is_ok());
  for (const char* first : kFirstShards) {
    SCOPED_TRACE(first);
    std::unique_ptr<GgufFile> split;
    Status s = GgufFile::open(source_path(std::string("tests/model/data/gguf-split/") + first), &split);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    size_t split_keys = 0;
    for (const auto& [key, value] : split->metadata()) {
      if (key.rfind("split.", 0) == 0) continue;
      ++split_keys;
      const GgufValue* w = whole->find(key);
      ASSERT_NE(w, nullptr) << key;
      expect_same_value(key, *w, value);
    }
    EXPECT_EQ(split_keys, whole->metadata().size());
    ASSERT_EQ(split->tensors().size(), whole->tensors().size());
    for (const auto& [name, view] : whole->tensors()) {
      const TensorView* t = split->find_tensor(name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(t->dtype, view.dtype) << name;
      EXPECT_EQ(t->shape, view.shape) << name;
      ASSERT_EQ(t->nbytes, view.nbytes) << name;
      EXPECT_EQ(std::memcmp(t->data, view.data, view.nbytes), 0) << name;
    }
    // Every shard's bytes are in the digest, so a bank never mixes the two.
    EXPECT_EQ(split->weights_digest().size(), 32u);
    EXPECT_NE(split->weights_digest(), whole->weights_digest());
    std::unique_ptr<GgufFile> undigested;
    s = GgufFile::open(source_path(std::string("tests/model/data/gguf-split/") + first), &undigested,
                       GgufFile::Digest::kNo);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(undigested->tensors().size(), whole->tensors().size());
    EXPECT_EQ(undigested->weights_digest(), "");
    GgufModel model;
    s = open_gguf_model(source_path(std::string("tests/model/data/gguf-split/") + first), &model);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(model.config.describe(), whole_model.config.describe());
    EXPECT_EQ(model.checkpoint->tensors().size(), whole_model.checkpoint->tensors().size());
  }
}

TEST(GgufSplitTest, AnyOtherShardNamesTheFirst) {
  std::unique_ptr<GgufFile> g;
  Status s = GgufFile::open(source_path("tests/model/data/gguf-split/qwen35-meta-first-00002-of-00003.gguf"), &g);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("shard 2 of 3"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("qwen35-meta-first-00001-of-00003.gguf"), std::string::npos) << s.message();
}

TEST(GgufSplitTest, AMissingShardNamesItsPath) {
  testing::TempDir dir;
  for (const char* shard : {"qwen35-meta-first-00001-of-00003.gguf", "qwen35-meta-first-00002-of-00003.gguf"})
    testing::write_file(dir.file(shard),
                        testing::read_file(source_path(std::string("tests/model/data/gguf-split/") + shard)));
  std::unique_ptr<GgufFile> g;
  Status s = GgufFile::open(dir.file("qwen35-meta-first-00001-of-00003.gguf"), &g);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("qwen35-meta-first-00003-of-00003.gguf"), std::string::npos) << s.message();
}

// Two shards written here, one tensor each; `edit` damages them first.
Status open_written_shards(const std::string& first_name,
                           const std::function<void(GgufWriter&, GgufWriter&)>& edit = nullptr) {
  testing::TempDir dir;
  GgufWriter a, b;
  a.set("general.architecture", GgufValue::string("qwen3"));
  for (GgufWriter* w : {&a, &b}) {
    w->set(kGgufSplitNo, GgufValue::u32(w == &a ? 0 : 1));
    w->set(kGgufSplitCount, GgufValue::u32(2));
    w->set(kGgufSplitTensorsCount, GgufValue::i32(2));
  }
  a.add_tensor("t.a", DType::kF32, {2}, std::vector<uint8_t>(8, 1));
  b.add_tensor("t.b", DType::kF32, {3}, std::vector<uint8_t>(12, 2));
  if (edit) edit(a, b);
  EXPECT_TRUE(a.write(dir.file(first_name)).is_ok());
  EXPECT_TRUE(b.write(dir.file("m-00002-of-00002.gguf")).is_ok());
  std::unique_ptr<GgufFile> g;
  Status s = GgufFile::open(dir.file(first_name), &g);
  if (s) {
    EXPECT_EQ(g->tensors().size(), 2u);
  }
  return s;
}

void expect_error(const Status& s, const std::string& needle) {
  ASSERT_FALSE(s.is_ok()) << "accepted; expected an error about " << needle;
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}

TEST(GgufSplitTest, ShardsThatDisagreeAreErrors) {
  Status s = open_written_shards("m-00001-of-00002.gguf");
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  expect_error(open_written_shards("m.gguf"), "must end in -00001-of-00002.gguf");
  expect_error(open_written_shards("m-00001-of-00002.gguf",
                                   [](GgufWriter&, GgufWriter& b) { b.set(kGgufSplitNo, GgufValue::u32(0)); }),
               "says it is shard 1 of 2, its name shard 2 of 2");
  expect_error(open_written_shards("m-00001-of-00002.gguf",
                                   [](GgufWriter&, GgufWriter& b) { b.set(kGgufSplitCount, GgufValue::u32(3)); }),
               "says it is shard 2 of 3");
  expect_error(open_written_shards("m-00001-of-00002.gguf",
                                   [](GgufWriter&, GgufWriter& b) {
                                     b.add_tensor("t.a", DType::kF32, {2}, std::vector<uint8_t>(8, 3));
                                   }),
               "tensor t.a is in both");
  expect_error(
      open_written_shards("m-00001-of-00002.gguf",
                          [](GgufWriter& a, GgufWriter&) { a.set(kGgufSplitTensorsCount, GgufValue::i32(3)); }),
      "split.tensors.count says 3");
  expect_error(open_written_shards("m-00001-of-00002.gguf",
                                   [](GgufWriter& a, GgufWriter&) { a.set(kGgufSplitCount, GgufValue::u32(0)); }),
               "split.count 0");
}

}  // namespace
}  // namespace sb
