// The object file format (docs/bank-format.md): the documented byte layout,
// a round trip, and every malformed field rejected with the right code.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>

#include "bank/format.h"
#include "tests/bank/ssd_test_util.h"

namespace sb {
namespace {

using testing::make_chain;
using testing::same_object;
using testing::ssd_test_schema;

uint64_t u64_at(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}
uint32_t u32_at(const std::vector<uint8_t>& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}
void set_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
void set_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }
// Recomputes the header checksum so that a test reaches the field check
// behind it.
void reseal(std::vector<uint8_t>& b) { set_u64(b, 152, XXH3_64bits(b.data(), 152)); }
Key key_at(const std::vector<uint8_t>& b, size_t at) {
  Key k;
  std::memcpy(k.bytes.data(), b.data() + at, 32);
  return k;
}

TEST(SsdFormat, LayoutIsTheDocumentedOne) {
  auto chain = make_chain(1, 2);
  const Object& o = *chain.blocks[1];
  auto b = encode_object(o, Retention::kBlock, 77);
  ASSERT_EQ(b.size(), encoded_size(o));
  EXPECT_EQ(std::string(b.begin(), b.begin() + 8), "STBANKOB");
  EXPECT_EQ(u32_at(b, 8), 2u);
  EXPECT_EQ(u32_at(b, 12), 0u);
  EXPECT_EQ(b[16], 1);  // block
  EXPECT_EQ(b[17], 0);  // retention
  EXPECT_EQ(b[18], 1);  // f32
  EXPECT_EQ(key_at(b, 24), o.key);
  EXPECT_EQ(key_at(b, 56), o.parent);
  EXPECT_EQ(static_cast<int64_t>(u64_at(b, 88)), o.position);
  EXPECT_EQ(u32_at(b, 96), o.tokens.size());
  EXPECT_EQ(u32_at(b, 100), o.parts.size());
  const uint64_t payload = b.size() - 160;
  EXPECT_EQ(u64_at(b, 104), payload);
  EXPECT_EQ(u64_at(b, 112), 77u);
  EXPECT_EQ(u64_at(b, 120), XXH3_64bits(b.data() + 160, payload));
  EXPECT_EQ(u64_at(b, 152), XXH3_64bits(b.data(), 152));
  for (size_t i = 128; i < 152; ++i) EXPECT_EQ(b[i], 0) << i;
  // Payload: part table, tokens, then the parts' floats.
  EXPECT_EQ(u64_at(b, 160), o.parts[0].size() / 4);  // values, not bytes
  EXPECT_EQ(u64_at(b, 168), o.parts[1].size() / 4);
  int32_t t0;
  std::memcpy(&t0, b.data() + 160 + 16, 4);
  EXPECT_EQ(t0, o.tokens[0]);
  float f0;
  std::memcpy(&f0, b.data() + 160 + 16 + 4 * o.tokens.size(), 4);
  EXPECT_EQ(std::memcmp(&f0, &o.parts[0][0], 4), 0);
}

TEST(SsdFormat, RoundTripsBlocksAndSnapshots) {
  auto chain = make_chain(2, 3);
  for (const auto& o : chain.all()) {
    auto b = encode_object(*o, Retention::kKeep, schema_digest(ssd_test_schema()));
    ObjectHeader h;
    Object back;
    ASSERT_TRUE(decode_object(b, &h, &back).is_ok());
    EXPECT_TRUE(same_object(*o, back));
    EXPECT_EQ(h.retention, Retention::kKeep);
    EXPECT_EQ(h.schema_digest, schema_digest(ssd_test_schema()));
    EXPECT_TRUE(check_shapes(back, ssd_test_schema()).is_ok());
  }
}

TEST(SsdFormat, ShapesAreCheckedAgainstTheSchema) {
  auto chain = make_chain(3, 1);
  Object block = *chain.blocks[0];
  block.parts[1].pop_back();
  EXPECT_EQ(check_shapes(block, ssd_test_schema()).code(), Code::kCorruption);
  Object snap = *chain.snapshots[0];
  snap.parts.pop_back();
  EXPECT_EQ(check_shapes(snap, ssd_test_schema()).code(), Code::kCorruption);
  Object extra = *chain.snapshots[0];
  extra.parts.push_back(f32_part(std::vector<float>{1.0f}));
  EXPECT_EQ(check_shapes(extra, ssd_test_schema()).code(), Code::kCorruption);
}

struct Malformed {
  const char* what;
  void (*edit)(std::vector<uint8_t>&);
  Code code;
};

TEST(SsdFormat, EveryMalformedFieldIsRejected) {
  const Malformed cases[] = {
      {"magic", [](auto& b) { b[0] = 'X'; reseal(b); }, Code::kCorruption},
      {"version 0", [](auto& b) { set_u32(b, 8, 0); reseal(b); }, Code::kCorruption},
      {"version 1 where version 2 lives", [](auto& b) { set_u32(b, 8, 1); reseal(b); }, Code::kCorruption},
      {"future version", [](auto& b) { set_u32(b, 8, 3); reseal(b); }, Code::kUnsupported},
      {"future version, garbage after", [](auto& b) { set_u32(b, 8, 9); b[100] = 1; }, Code::kUnsupported},
      {"unknown incompatible flag", [](auto& b) { set_u32(b, 12, 4); reseal(b); }, Code::kUnsupported},
      {"kind 0", [](auto& b) { b[16] = 0; reseal(b); }, Code::kCorruption},
      {"kind 3", [](auto& b) { b[16] = 3; reseal(b); }, Code::kCorruption},
      {"retention 9", [](auto& b) { b[17] = 9; reseal(b); }, Code::kCorruption},
      {"f32 values labelled bf16", [](auto& b) { b[18] = 2; reseal(b); }, Code::kCorruption},
      {"dtype 3", [](auto& b) { b[18] = 3; reseal(b); }, Code::kCorruption},
      {"reserved byte", [](auto& b) { b[19] = 1; reseal(b); }, Code::kCorruption},
      {"negative position", [](auto& b) { set_u64(b, 88, ~0ull); reseal(b); }, Code::kCorruption},
      {"huge token count", [](auto& b) { set_u32(b, 96, 0xffffffffu); reseal(b); }, Code::kCorruption},
      {"huge part count", [](auto& b) { set_u32(b, 100, 0xffffffffu); reseal(b); }, Code::kCorruption},
      {"token count off by one", [](auto& b) { set_u32(b, 96, u32_at(b, 96) + 1); reseal(b); }, Code::kCorruption},
      {"part count off by one", [](auto& b) { set_u32(b, 100, u32_at(b, 100) + 1); reseal(b); }, Code::kCorruption},
      {"payload size +4", [](auto& b) { set_u64(b, 104, u64_at(b, 104) + 4); reseal(b); }, Code::kCorruption},
      {"payload size -4", [](auto& b) { set_u64(b, 104, u64_at(b, 104) - 4); reseal(b); }, Code::kCorruption},
      {"payload size odd", [](auto& b) { set_u64(b, 104, u64_at(b, 104) + 1); reseal(b); }, Code::kCorruption},
      {"payload size huge", [](auto& b) { set_u64(b, 104, ~0ull); reseal(b); }, Code::kCorruption},
      {"payload checksum", [](auto& b) { set_u64(b, 120, u64_at(b, 120) ^ 1); reseal(b); }, Code::kCorruption},
      {"zeroed payload checksum", [](auto& b) { set_u64(b, 120, 0); reseal(b); }, Code::kCorruption},
      {"zeroed header checksum", [](auto& b) { set_u64(b, 152, 0); }, Code::kCorruption},
      {"header field without reseal", [](auto& b) { b[90] ^= 0x10; }, Code::kCorruption},
      {"zeroed payload", [](auto& b) { std::fill(b.begin() + 160, b.end(), 0); }, Code::kCorruption},
      {"truncated header", [](auto& b) { b.resize(130); }, Code::kCorruption},
      {"header only", [](auto& b) { b.resize(160); }, Code::kCorruption},
      {"truncated last byte", [](auto& b) { b.pop_back(); }, Code::kCorruption},
      {"trailing byte", [](auto& b) { b.push_back(0); }, Code::kCorruption},
      {"empty", [](auto& b) { b.clear(); }, Code::kCorruption},
      {"part table lies, checksum redone",
       [](auto& b) {
         // Move 4 bytes' worth of elements from part 0 to part 1: sizes still
         // add up, so only a schema shape check can catch it.
         set_u64(b, 160, u64_at(b, 160) - 1);
         set_u64(b, 168, u64_at(b, 168) + 1);
         set_u64(b, 120, XXH3_64bits(b.data() + 160, b.size() - 160));
         reseal(b);
       },
       Code::kOk},
      {"part table overflows, checksum redone",
       [](auto& b) {
         set_u64(b, 160, ~0ull / 2);
         set_u64(b, 120, XXH3_64bits(b.data() + 160, b.size() - 160));
         reseal(b);
       },
       Code::kCorruption},
  };
  auto chain = make_chain(4, 1);
  for (const auto& c : cases) {
    auto b = encode_object(*chain.blocks[0], Retention::kBlock, 5);
    c.edit(b);
    ObjectHeader h;
    Object o;
    Status s = decode_object(b, &h, &o);
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s.to_string();
    if (c.code == Code::kOk) {
      // Decodes, but the schema check refuses it: the tier never serves it.
      EXPECT_EQ(check_shapes(o, ssd_test_schema()).code(), Code::kCorruption) << c.what;
    }
  }
}

// A block of the bf16 precision: its parts are bf16 values (2 bytes each), the
// file says so (dtype 2), and only a bf16 schema accepts it.
TEST(SsdFormat, Bf16BlocksAreFilesOfTwoByteValues) {
  StateSchema f32_schema;
  f32_schema.components.push_back({"k", ComponentKind::kSequence, 1, DType::kF32, 8});
  f32_schema.components.push_back({"p", ComponentKind::kPooled, 4, DType::kF32, 3});
  StateSchema bf16_schema = f32_schema;
  for (auto& c : bf16_schema.components) c.dtype = DType::kBF16;
  EXPECT_NE(schema_digest(f32_schema), schema_digest(bf16_schema));
  const auto chain = make_chain(7, 1, f32_schema);
  const Object& wide = *chain.blocks[0];
  Object narrow = wide;
  narrow.dtype = DType::kBF16;
  for (auto& part : narrow.parts) {
    std::vector<uint8_t> half;
    for (size_t i = 0; i < part.size(); i += 4) {
      float v;
      std::memcpy(&v, part.data() + i, 4);
      const uint16_t h = f32_to_bf16(v);
      half.push_back(static_cast<uint8_t>(h));
      half.push_back(static_cast<uint8_t>(h >> 8));
    }
    part = half;
  }
  auto b = encode_object(narrow, Retention::kBlock, schema_digest(bf16_schema));
  EXPECT_EQ(b[18], 2);
  EXPECT_EQ(u64_at(b, kObjectHeaderBytes), narrow.parts[0].size() / 2);
  const uint64_t fixed = kObjectHeaderBytes + 8 * wide.parts.size() + 4 * wide.tokens.size();
  EXPECT_EQ(encoded_size(narrow) - fixed, (encoded_size(wide) - fixed) / 2);
  ObjectHeader h;
  Object back;
  ASSERT_TRUE(decode_object(b, &h, &back).is_ok());
  EXPECT_TRUE(same_object(narrow, back));
  EXPECT_TRUE(check_shapes(back, bf16_schema).is_ok());
  EXPECT_EQ(check_shapes(back, f32_schema).code(), Code::kCorruption);
  EXPECT_EQ(check_shapes(wide, bf16_schema).code(), Code::kCorruption);
}

TEST(SsdFormat, SnapshotMayNotCarryTokensOrParent) {
  auto chain = make_chain(5, 1);
  Object s = *chain.snapshots[0];
  s.tokens = {1};
  auto b = encode_object(s, Retention::kThinFirst, 0);
  ObjectHeader h;
  Object o;
  EXPECT_EQ(decode_object(b, &h, &o).code(), Code::kCorruption);
  Object p = *chain.snapshots[0];
  p.parent = testing::numbered_key(2, 1);
  b = encode_object(p, Retention::kThinFirst, 0);
  EXPECT_EQ(decode_object(b, &h, &o).code(), Code::kCorruption);
}

TEST(SsdFormat, FileNamesAreHexKeysWithAKindSuffix) {
  Key k;
  for (size_t i = 0; i < 32; ++i) k.bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  const std::string hex = k.hex();
  ASSERT_EQ(hex.size(), 64u);
  EXPECT_EQ(object_file_name(ObjectKind::kBlock, k), hex + ".blk");
  EXPECT_EQ(object_file_name(ObjectKind::kSnapshot, k), hex + ".snp");
  ObjectKind kind;
  Key back;
  EXPECT_EQ(parse_object_file_name(hex + ".snp", &kind, &back), NameType::kObject);
  EXPECT_EQ(kind, ObjectKind::kSnapshot);
  EXPECT_EQ(back, k);
  EXPECT_EQ(parse_object_file_name(hex + ".blk.tmp-12-3", &kind, &back), NameType::kTemporary);
  std::string upper = hex;
  upper[3] = 'A';
  upper[2] = 'B';
  EXPECT_EQ(parse_object_file_name(upper + ".blk", &kind, &back), NameType::kForeign);
  EXPECT_EQ(parse_object_file_name(hex + ".txt", &kind, &back), NameType::kForeign);
  EXPECT_EQ(parse_object_file_name(hex + ".blkx", &kind, &back), NameType::kForeign);
  // A version-1 name (128-bit key) is not a version-2 object.
  EXPECT_EQ(parse_object_file_name(hex.substr(0, 32) + ".blk", &kind, &back), NameType::kForeign);
  EXPECT_EQ(parse_object_file_name("../../etc/passwd", &kind, &back), NameType::kForeign);
  EXPECT_EQ(parse_object_file_name("", &kind, &back), NameType::kForeign);
}

}  // namespace
}  // namespace sb
