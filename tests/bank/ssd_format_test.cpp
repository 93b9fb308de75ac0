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
void reseal(std::vector<uint8_t>& b) { set_u64(b, 120, XXH3_64bits(b.data(), 120)); }

TEST(SsdFormat, LayoutIsTheDocumentedOne) {
  auto chain = make_chain(1, 2);
  const Object& o = *chain.blocks[1];
  auto b = encode_object(o, Retention::kBlock, 77);
  ASSERT_EQ(b.size(), encoded_size(o));
  EXPECT_EQ(std::string(b.begin(), b.begin() + 8), "STBANKOB");
  EXPECT_EQ(u32_at(b, 8), 1u);
  EXPECT_EQ(u32_at(b, 12), 0u);
  EXPECT_EQ(b[16], 1);  // block
  EXPECT_EQ(b[17], 0);  // retention
  EXPECT_EQ(b[18], 1);  // f32
  EXPECT_EQ(u64_at(b, 24), o.key.hi);
  EXPECT_EQ(u64_at(b, 32), o.key.lo);
  EXPECT_EQ(u64_at(b, 40), o.parent.hi);
  EXPECT_EQ(u64_at(b, 48), o.parent.lo);
  EXPECT_EQ(static_cast<int64_t>(u64_at(b, 56)), o.position);
  EXPECT_EQ(u32_at(b, 64), o.tokens.size());
  EXPECT_EQ(u32_at(b, 68), o.parts.size());
  const uint64_t payload = b.size() - 128;
  EXPECT_EQ(u64_at(b, 72), payload);
  EXPECT_EQ(u64_at(b, 80), 77u);
  EXPECT_EQ(u64_at(b, 88), XXH3_64bits(b.data() + 128, payload));
  EXPECT_EQ(u64_at(b, 120), XXH3_64bits(b.data(), 120));
  for (size_t i = 96; i < 120; ++i) EXPECT_EQ(b[i], 0) << i;
  // Payload: part table, tokens, then the parts' floats.
  EXPECT_EQ(u64_at(b, 128), o.parts[0].size() / 4);  // values, not bytes
  EXPECT_EQ(u64_at(b, 136), o.parts[1].size() / 4);
  int32_t t0;
  std::memcpy(&t0, b.data() + 128 + 16, 4);
  EXPECT_EQ(t0, o.tokens[0]);
  float f0;
  std::memcpy(&f0, b.data() + 128 + 16 + 4 * o.tokens.size(), 4);
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
      {"future version", [](auto& b) { set_u32(b, 8, kObjectFormatVersion + 1); reseal(b); }, Code::kUnsupported},
      {"future version, garbage after", [](auto& b) { set_u32(b, 8, 9); b[100] = 1; }, Code::kUnsupported},
      {"unknown incompatible flag", [](auto& b) { set_u32(b, 12, 4); reseal(b); }, Code::kUnsupported},
      {"kind 0", [](auto& b) { b[16] = 0; reseal(b); }, Code::kCorruption},
      {"kind 3", [](auto& b) { b[16] = 3; reseal(b); }, Code::kCorruption},
      {"retention 9", [](auto& b) { b[17] = 9; reseal(b); }, Code::kCorruption},
      {"dtype 2 (bf16) in a version 1 file", [](auto& b) { b[18] = 2; reseal(b); }, Code::kCorruption},
      {"dtype 3", [](auto& b) { set_u32(b, 8, 2); b[18] = 3; reseal(b); }, Code::kCorruption},
      {"f32 values labelled bf16", [](auto& b) { set_u32(b, 8, 2); b[18] = 2; reseal(b); }, Code::kCorruption},
      {"reserved byte", [](auto& b) { b[19] = 1; reseal(b); }, Code::kCorruption},
      {"negative position", [](auto& b) { set_u64(b, 56, ~0ull); reseal(b); }, Code::kCorruption},
      {"huge token count", [](auto& b) { set_u32(b, 64, 0xffffffffu); reseal(b); }, Code::kCorruption},
      {"huge part count", [](auto& b) { set_u32(b, 68, 0xffffffffu); reseal(b); }, Code::kCorruption},
      {"token count off by one", [](auto& b) { set_u32(b, 64, u32_at(b, 64) + 1); reseal(b); }, Code::kCorruption},
      {"part count off by one", [](auto& b) { set_u32(b, 68, u32_at(b, 68) + 1); reseal(b); }, Code::kCorruption},
      {"payload size +4", [](auto& b) { set_u64(b, 72, u64_at(b, 72) + 4); reseal(b); }, Code::kCorruption},
      {"payload size -4", [](auto& b) { set_u64(b, 72, u64_at(b, 72) - 4); reseal(b); }, Code::kCorruption},
      {"payload size odd", [](auto& b) { set_u64(b, 72, u64_at(b, 72) + 1); reseal(b); }, Code::kCorruption},
      {"payload size huge", [](auto& b) { set_u64(b, 72, ~0ull); reseal(b); }, Code::kCorruption},
      {"payload checksum", [](auto& b) { set_u64(b, 88, u64_at(b, 88) ^ 1); reseal(b); }, Code::kCorruption},
      {"zeroed payload checksum", [](auto& b) { set_u64(b, 88, 0); reseal(b); }, Code::kCorruption},
      {"zeroed header checksum", [](auto& b) { set_u64(b, 120, 0); }, Code::kCorruption},
      {"header field without reseal", [](auto& b) { b[60] ^= 0x10; }, Code::kCorruption},
      {"zeroed payload", [](auto& b) { std::fill(b.begin() + 128, b.end(), 0); }, Code::kCorruption},
      {"truncated header", [](auto& b) { b.resize(100); }, Code::kCorruption},
      {"header only", [](auto& b) { b.resize(128); }, Code::kCorruption},
      {"truncated last byte", [](auto& b) { b.pop_back(); }, Code::kCorruption},
      {"trailing byte", [](auto& b) { b.push_back(0); }, Code::kCorruption},
      {"empty", [](auto& b) { b.clear(); }, Code::kCorruption},
      {"part table lies, checksum redone",
       [](auto& b) {
         // Move 4 bytes' worth of elements from part 0 to part 1: sizes still
         // add up, so only a schema shape check can catch it.
         set_u64(b, 128, u64_at(b, 128) - 1);
         set_u64(b, 136, u64_at(b, 136) + 1);
         set_u64(b, 88, XXH3_64bits(b.data() + 128, b.size() - 128));
         reseal(b);
       },
       Code::kOk},
      {"part table overflows, checksum redone",
       [](auto& b) {
         set_u64(b, 128, ~0ull / 2);
         set_u64(b, 88, XXH3_64bits(b.data() + 128, b.size() - 128));
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
// file says so (version 2, dtype 2), and only a bf16 schema accepts it.
TEST(SsdFormat, Bf16BlocksAreVersionTwoFilesOfTwoByteValues) {
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
  EXPECT_EQ(u32_at(b, 8), 2u);
  EXPECT_EQ(b[18], 2);
  EXPECT_EQ(u64_at(b, 128), narrow.parts[0].size() / 2);
  const uint64_t fixed = 8 * wide.parts.size() + 4 * wide.tokens.size();
  EXPECT_EQ(encoded_size(narrow) - 128 - fixed, (encoded_size(wide) - 128 - fixed) / 2);
  ObjectHeader h;
  Object back;
  ASSERT_TRUE(decode_object(b, &h, &back).is_ok());
  EXPECT_TRUE(same_object(narrow, back));
  EXPECT_TRUE(check_shapes(back, bf16_schema).is_ok());
  EXPECT_EQ(check_shapes(back, f32_schema).code(), Code::kCorruption);
  EXPECT_EQ(check_shapes(wide, bf16_schema).code(), Code::kCorruption);
  // An f32 object is still written as version 1, readable by older readers.
  EXPECT_EQ(u32_at(encode_object(wide, Retention::kBlock, 0), 8), 1u);
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
  p.parent = Key{1, 2};
  b = encode_object(p, Retention::kThinFirst, 0);
  EXPECT_EQ(decode_object(b, &h, &o).code(), Code::kCorruption);
}

TEST(SsdFormat, FileNamesAreHexKeysWithAKindSuffix) {
  Key k{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(object_file_name(ObjectKind::kBlock, k), "0123456789abcdeffedcba9876543210.blk");
  EXPECT_EQ(object_file_name(ObjectKind::kSnapshot, k), "0123456789abcdeffedcba9876543210.snp");
  ObjectKind kind;
  Key back;
  EXPECT_EQ(parse_object_file_name("0123456789abcdeffedcba9876543210.snp", &kind, &back), NameType::kObject);
  EXPECT_EQ(kind, ObjectKind::kSnapshot);
  EXPECT_EQ(back, k);
  EXPECT_EQ(parse_object_file_name("0123456789abcdeffedcba9876543210.blk.tmp-12-3", &kind, &back), NameType::kTemporary);
  EXPECT_EQ(parse_object_file_name("0123456789ABCDEFfedcba9876543210.blk", &kind, &back), NameType::kForeign);
  EXPECT_EQ(parse_object_file_name("0123456789abcdeffedcba9876543210.txt", &kind, &back), NameType::kForeign);
  EXPECT_EQ(parse_object_file_name("0123456789abcdeffedcba9876543210.blkx", &kind, &back), NameType::kForeign);
  EXPECT_EQ(parse_object_file_name("../../etc/passwd", &kind, &back), NameType::kForeign);
  EXPECT_EQ(parse_object_file_name("", &kind, &back), NameType::kForeign);
}

}  // namespace
}  // namespace sb
