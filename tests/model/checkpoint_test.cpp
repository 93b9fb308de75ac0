// Safetensors writer and reader: round trips in every dtype, sharded
// checkpoints, and each damaged file giving an error that names the tensor
// and the file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "model/checkpoint.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

using nlohmann::json;

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<uint8_t> u16_bytes(const std::vector<uint16_t>& v) {
  std::vector<uint8_t> b(v.size() * 2);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Builds a safetensors file by hand from a header object and a data blob.
std::string raw_file(const json& header, const std::string& data) {
  std::string h = header.dump();
  std::string out(8, '\0');
  uint64_t n = h.size();
  std::memcpy(out.data(), &n, 8);
  return out + h + data;
}

void expect_error_names(const Status& s, const std::string& tensor, const std::string& file) {
  ASSERT_FALSE(s.is_ok());
  if (!tensor.empty()) {
    EXPECT_NE(s.message().find(tensor), std::string::npos) << s.message();
  }
  EXPECT_NE(s.message().find(file), std::string::npos) << s.message();
}

TEST(CheckpointTest, RoundTripsEveryDtype) {
  testing::TempDir dir;
  SafetensorsWriter w;
  std::vector<float> f = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, 7.0f};
  std::vector<uint16_t> bf, hf;
  for (float v : f) {
    bf.push_back(f32_to_bf16(v));
    hf.push_back(f32_to_f16(v));
  }
  w.add("a.f32", DType::kF32, {2, 3}, f32_bytes(f));
  w.add("b.bf16", DType::kBF16, {6}, u16_bytes(bf));
  w.add("c.f16", DType::kF16, {3, 1, 2}, u16_bytes(hf));
  w.add("d.empty", DType::kF32, {0, 4}, {});
  ASSERT_TRUE(w.write(dir.file("model.safetensors")).is_ok());

  std::string raw = testing::read_file(dir.file("model.safetensors"));
  uint64_t hlen;
  std::memcpy(&hlen, raw.data(), 8);
  EXPECT_EQ(hlen % 8, 0u) << "data must start 8-byte aligned";
  json header = json::parse(raw.substr(8, hlen));
  EXPECT_EQ(header["__metadata__"]["format"], "pt");

  std::unique_ptr<Checkpoint> ck;
  Status s = Checkpoint::open(dir.path(), &ck);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  ASSERT_EQ(ck->tensors().size(), 4u);
  const TensorView* a = ck->find("a.f32");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::kF32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->numel(), 6);
  EXPECT_EQ(a->file, "model.safetensors");
  EXPECT_EQ(std::memcmp(a->data, f.data(), 24), 0);
  const TensorView* b = ck->find("b.bf16");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kBF16);
  EXPECT_EQ(b->nbytes, 12u);
  const TensorView* c = ck->find("c.f16");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->dtype, DType::kF16);
  EXPECT_EQ(c->shape, (std::vector<int64_t>{3, 1, 2}));
  for (size_t i = 0; i < f.size(); ++i) {
    uint16_t vb, vh;
    std::memcpy(&vb, static_cast<const uint8_t*>(b->data) + 2 * i, 2);
    std::memcpy(&vh, static_cast<const uint8_t*>(c->data) + 2 * i, 2);
    EXPECT_EQ(bf16_to_f32(vb), bf16_to_f32(f32_to_bf16(f[i])));
    EXPECT_EQ(f16_to_f32(vh), f16_to_f32(f32_to_f16(f[i])));
  }
  EXPECT_EQ(ck->find("d.empty")->numel(), 0);
  EXPECT_EQ(ck->find("missing"), nullptr);
  EXPECT_EQ(ck->weights_digest().size(), 32u);

  // The digest is the bytes' identity: same bytes, same digest; one byte more, another.
  std::unique_ptr<Checkpoint> again;
  ASSERT_TRUE(Checkpoint::open(dir.path(), &again).is_ok());
  EXPECT_EQ(again->weights_digest(), ck->weights_digest());
  raw[raw.size() - 1] ^= 1;
  testing::TempDir other;
  testing::write_file(other.file("model.safetensors"), raw);
  ASSERT_TRUE(Checkpoint::open(other.path(), &again).is_ok());
  EXPECT_NE(again->weights_digest(), ck->weights_digest());
}

TEST(CheckpointTest, WriterRejectsBytesThatDoNotMatchTheShape) {
  testing::TempDir dir;
  SafetensorsWriter w;
  w.add("x", DType::kF32, {3}, std::vector<uint8_t>(8));
  Status s = w.write(dir.file("model.safetensors"));
  expect_error_names(s, "x", "model.safetensors");
}

// Two shards and an index, the way Hugging Face splits big checkpoints.
void write_sharded(const testing::TempDir& dir) {
  SafetensorsWriter w1, w2;
  w1.add("t.one", DType::kF32, {2}, f32_bytes({1, 2}));
  w1.add("t.two", DType::kBF16, {2}, u16_bytes({f32_to_bf16(3), f32_to_bf16(4)}));
  w2.add("t.three", DType::kF32, {1}, f32_bytes({5}));
  ASSERT_TRUE(w1.write(dir.file("model-00001-of-00002.safetensors")).is_ok());
  ASSERT_TRUE(w2.write(dir.file("model-00002-of-00002.safetensors")).is_ok());
  json index = {{"metadata", {{"total_size", 16}}},
                {"weight_map",
                 {{"t.one", "model-00001-of-00002.safetensors"},
                  {"t.two", "model-00001-of-00002.safetensors"},
                  {"t.three", "model-00002-of-00002.safetensors"}}}};
  testing::write_file(dir.file("model.safetensors.index.json"), index.dump());
}

TEST(CheckpointTest, OpensShardedCheckpoint) {
  testing::TempDir dir;
  write_sharded(dir);
  std::unique_ptr<Checkpoint> ck;
  Status s = Checkpoint::open(dir.path(), &ck);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  ASSERT_EQ(ck->tensors().size(), 3u);
  EXPECT_EQ(ck->find("t.one")->file, "model-00001-of-00002.safetensors");
  EXPECT_EQ(ck->find("t.three")->file, "model-00002-of-00002.safetensors");
  float v;
  std::memcpy(&v, ck->find("t.three")->data, 4);
  EXPECT_EQ(v, 5.0f);
  EXPECT_EQ(ck->weights_digest().size(), 32u);
}

// Writes the sharded checkpoint, applies `edit` to its index, and expects
// the open to fail with an error naming `tensor` and `file`.
void expect_index_edit_refused(void (*edit)(json&), const std::string& tensor, const std::string& file) {
  testing::TempDir dir;
  write_sharded(dir);
  json index = json::parse(testing::read_file(dir.file("model.safetensors.index.json")));
  edit(index);
  testing::write_file(dir.file("model.safetensors.index.json"), index.dump());
  std::unique_ptr<Checkpoint> ck;
  expect_error_names(Checkpoint::open(dir.path(), &ck), tensor, file);
}

TEST(CheckpointTest, IndexNamingAMissingShard) {
  testing::TempDir dir;
  write_sharded(dir);
  std::remove(dir.file("model-00002-of-00002.safetensors").c_str());
  std::unique_ptr<Checkpoint> ck;
  expect_error_names(Checkpoint::open(dir.path(), &ck), "t.three", "model-00002-of-00002.safetensors");
}

TEST(CheckpointTest, IndexListingATensorTheShardLacks) {
  expect_index_edit_refused([](json& index) { index["weight_map"]["t.ghost"] = "model-00002-of-00002.safetensors"; },
                            "t.ghost", "model-00002-of-00002.safetensors");
}

TEST(CheckpointTest, ShardHoldingATensorTheIndexLacks) {
  expect_index_edit_refused([](json& index) { index["weight_map"].erase("t.two"); }, "t.two",
                            "model-00001-of-00002.safetensors");
}

TEST(CheckpointTest, IndexPlacingATensorInTheWrongShard) {
  expect_index_edit_refused([](json& index) { index["weight_map"]["t.two"] = "model-00002-of-00002.safetensors"; },
                            "t.two", "model-00001-of-00002.safetensors");
}

TEST(CheckpointTest, IndexThatIsNotJson) {
  testing::TempDir dir;
  write_sharded(dir);
  testing::write_file(dir.file("model.safetensors.index.json"), "{\"weight_map\": [");
  std::unique_ptr<Checkpoint> ck;
  expect_error_names(Checkpoint::open(dir.path(), &ck), "", "model.safetensors.index.json");
}

TEST(CheckpointTest, EmptyDirectoryIsNotFound) {
  testing::TempDir dir;
  std::unique_ptr<Checkpoint> ck;
  Status s = Checkpoint::open(dir.path(), &ck);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("model.safetensors"), std::string::npos);
}

// One good tensor "w" of 4 f32 values, then the damage under test.
std::string good_data() { return std::string(16, '\x01'); }
json good_header() {
  return {{"__metadata__", {{"format", "pt"}}},
          {"w", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}}};
}

Status open_raw(const testing::TempDir& dir, const std::string& bytes) {
  testing::write_file(dir.file("model.safetensors"), bytes);
  std::unique_ptr<Checkpoint> ck;
  return Checkpoint::open(dir.path(), &ck);
}

TEST(CheckpointTest, HandBuiltGoodFileOpens) {
  testing::TempDir dir;
  Status s = open_raw(dir, raw_file(good_header(), good_data()));
  EXPECT_TRUE(s.is_ok()) << s.to_string();
}

TEST(CheckpointTest, UnsupportedDtypeNamesTensorAndFile) {
  testing::TempDir dir;
  json h = good_header();
  h["idx"] = {{"dtype", "I32"}, {"shape", {2}}, {"data_offsets", {16, 24}}};
  Status s = open_raw(dir, raw_file(h, good_data() + std::string(8, '\0')));
  expect_error_names(s, "idx", "model.safetensors");
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("I32"), std::string::npos);
}

TEST(CheckpointTest, TruncatedFileNamesTensorAndFile) {
  testing::TempDir dir;
  std::string full = raw_file(good_header(), good_data());
  expect_error_names(open_raw(dir, full.substr(0, full.size() - 3)), "w", "model.safetensors");
  expect_error_names(open_raw(dir, full.substr(0, 5)), "", "model.safetensors");
  expect_error_names(open_raw(dir, full.substr(0, 20)), "", "model.safetensors");  // header cut
  expect_error_names(open_raw(dir, ""), "", "model.safetensors");
}

TEST(CheckpointTest, HeaderLyingAboutOffsetsNamesTensorAndFile) {
  testing::TempDir dir;
  json h = good_header();
  h["w"]["data_offsets"] = {0, 64};  // past the end
  expect_error_names(open_raw(dir, raw_file(h, good_data())), "w", "model.safetensors");
  h = good_header();
  h["w"]["data_offsets"] = {0, 12};  // span does not match the shape
  expect_error_names(open_raw(dir, raw_file(h, good_data())), "w", "model.safetensors");
  h = good_header();
  h["w"]["data_offsets"] = {16, 0};  // reversed
  expect_error_names(open_raw(dir, raw_file(h, good_data())), "w", "model.safetensors");
  h = good_header();
  h["v"] = {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {8, 16}}};  // overlaps w
  Status s = open_raw(dir, raw_file(h, good_data()));
  expect_error_names(s, "w", "model.safetensors");
  EXPECT_NE(s.message().find("overlap"), std::string::npos) << s.message();
  h = good_header();
  h["w"]["shape"] = {3};
  h["w"]["data_offsets"] = {4, 16};  // a hole before w
  s = open_raw(dir, raw_file(h, good_data()));
  expect_error_names(s, "w", "model.safetensors");
  EXPECT_NE(s.message().find("hole"), std::string::npos) << s.message();
  h["w"]["data_offsets"] = {0, 12};  // bytes after w that no tensor owns
  s = open_raw(dir, raw_file(h, good_data()));
  expect_error_names(s, "w", "model.safetensors");
  h = good_header();
  h["w"]["shape"] = {-4};
  expect_error_names(open_raw(dir, raw_file(h, good_data())), "w", "model.safetensors");
  h = good_header();
  h["w"].erase("data_offsets");
  expect_error_names(open_raw(dir, raw_file(h, good_data())), "w", "model.safetensors");
}

TEST(CheckpointTest, HeaderLengthPastEndOrNotJson) {
  testing::TempDir dir;
  std::string bytes = raw_file(good_header(), good_data());
  uint64_t huge = 1u << 30;
  std::memcpy(bytes.data(), &huge, 8);
  Status s = open_raw(dir, bytes);
  expect_error_names(s, "", "model.safetensors");
  EXPECT_NE(s.message().find("header length"), std::string::npos) << s.message();
  std::string garbage(8, '\0');
  uint64_t n = 10;
  std::memcpy(garbage.data(), &n, 8);
  garbage += "not json!!";
  s = open_raw(dir, garbage);
  expect_error_names(s, "", "model.safetensors");
  EXPECT_NE(s.message().find("JSON"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace sb
