// Writes the seed corpus of fuzz/format_fuzz.cpp into a directory: valid
// objects of both kinds and sizes, and damaged variants of each. Run once
// and commit the output (fuzz/README.md); the files are small.
#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bank/format.h"

namespace {

void save(const std::string& dir, const std::string& name, const std::vector<uint8_t>& b) {
  std::ofstream f(dir + "/" + name, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Header layout of version 2 (docs/bank-format.md).
constexpr size_t kH = sb::kObjectHeaderBytes;  // 160
constexpr size_t kPayloadChecksumAt = 120, kHeaderChecksumAt = 152;

void reseal(std::vector<uint8_t>& b) {
  uint64_t c = XXH3_64bits(b.data(), kHeaderChecksumAt);
  std::memcpy(b.data() + kHeaderChecksumAt, &c, 8);
}

sb::Key key_of(uint64_t a, uint64_t b) {
  const uint64_t w[4] = {a, b, a ^ 0x0f0f0f0f0f0f0f0fULL, b ^ 0xf0f0f0f0f0f0f0f0ULL};
  sb::Key k;
  std::memcpy(k.bytes.data(), w, sizeof w);
  return k;
}

sb::Object block(int tokens, int seq_elems, int pooled_elems, int64_t position) {
  sb::Object o;
  o.kind = sb::ObjectKind::kBlock;
  o.key = key_of(0x1111222233334444ULL + static_cast<uint64_t>(tokens), 0x5555666677778888ULL);
  o.parent = key_of(0x0123456789abcdefULL, 0xfedcba9876543210ULL);
  o.position = position;
  for (int t = 0; t < tokens; ++t) o.tokens.push_back(1000 + 37 * t);
  o.parts.push_back(sb::f32_part(std::vector<float>(static_cast<size_t>(tokens * seq_elems), 0.5f)));
  o.parts.push_back(sb::f32_part(std::vector<float>(static_cast<size_t>(pooled_elems), -1.25f)));
  return o;
}

// A block of the bf16 precision: two-byte values.
sb::Object bf16_block(int tokens, int seq_elems, int64_t position) {
  sb::Object o = block(tokens, 0, 0, position);
  o.dtype = sb::DType::kBF16;
  o.parts.clear();
  std::vector<uint8_t> part;
  for (int i = 0; i < tokens * seq_elems; ++i) {
    const uint16_t v = sb::f32_to_bf16(0.25f * static_cast<float>(i % 7) - 0.5f);
    part.push_back(static_cast<uint8_t>(v));
    part.push_back(static_cast<uint8_t>(v >> 8));
  }
  o.parts.push_back(part);
  return o;
}

sb::Object snapshot(int a, int b, int64_t position) {
  sb::Object o;
  o.kind = sb::ObjectKind::kSnapshot;
  o.key = key_of(0xaaaabbbbccccddddULL, static_cast<uint64_t>(a + b));
  o.position = position;
  o.parts.push_back(sb::f32_part(std::vector<float>(static_cast<size_t>(a), 3.0f)));
  o.parts.push_back(sb::f32_part(std::vector<float>(static_cast<size_t>(b), 7.0f)));
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_corpus OUT_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<std::pair<std::string, std::vector<uint8_t>>> valid = {
      {"block_1tok", sb::encode_object(block(1, 1, 0, 0), sb::Retention::kBlock, 0)},
      {"block_4tok", sb::encode_object(block(4, 8, 3, 16), sb::Retention::kBlock, 99)},
      {"block_16tok", sb::encode_object(block(16, 8, 12, 32), sb::Retention::kBlock, 12345)},
      {"block_noparts", sb::encode_object(sb::Object{sb::ObjectKind::kBlock, key_of(1, 2), key_of(3, 4), 0, {5, 6}, sb::DType::kF32, {}},
                                          sb::Retention::kBlock, 0)},
      {"block_bf16", sb::encode_object(bf16_block(4, 6, 8), sb::Retention::kBlock, 42)},
      {"snapshot_small", sb::encode_object(snapshot(40, 6, 16), sb::Retention::kThinFirst, 7)},
      {"snapshot_prompt_end", sb::encode_object(snapshot(3, 1, 256), sb::Retention::kKeep, 0)},
      {"snapshot_message", sb::encode_object(snapshot(0, 2, 512), sb::Retention::kAnchor, 1)},
      {"snapshot_empty_parts", sb::encode_object(snapshot(0, 0, 0), sb::Retention::kThinFirst, 0)},
  };
  int n = 0;
  for (auto& [name, b] : valid) {
    save(dir, "valid_" + name, b);
    ++n;
  }
  auto base = valid[1].second;
  auto variant = [&](const std::string& name, auto edit) {
    auto b = base;
    edit(b);
    save(dir, "bad_" + name, b);
    ++n;
  };
  variant("magic", [](auto& b) { b[0] = 'X'; });
  variant("version0", [](auto& b) { b[8] = 0; reseal(b); });
  variant("version1", [](auto& b) { b[8] = 1; reseal(b); });
  variant("version3", [](auto& b) { b[8] = 3; reseal(b); });
  variant("incompat_flag", [](auto& b) { b[12] = 1; reseal(b); });
  variant("kind3", [](auto& b) { b[16] = 3; reseal(b); });
  variant("role9", [](auto& b) { b[17] = 9; reseal(b); });
  variant("dtype2", [](auto& b) { b[18] = 2; reseal(b); });  // f32 values labelled bf16
  variant("dtype3", [](auto& b) { b[18] = 3; reseal(b); });
  variant("ntokens_huge", [](auto& b) { std::memset(b.data() + 96, 0xff, 4); reseal(b); });
  variant("nparts_huge", [](auto& b) { std::memset(b.data() + 100, 0xff, 4); reseal(b); });
  variant("payload_huge", [](auto& b) { std::memset(b.data() + 104, 0xff, 8); reseal(b); });
  variant("payload_checksum", [](auto& b) { b[kPayloadChecksumAt] ^= 1; reseal(b); });
  variant("header_checksum", [](auto& b) { b[kHeaderChecksumAt] ^= 1; });
  variant("truncated_header", [](auto& b) { b.resize(kH / 2); });
  variant("truncated_payload", [](auto& b) { b.resize(b.size() - 3); });
  variant("trailing", [](auto& b) { b.push_back(0); });
  variant("zero_payload", [](auto& b) { std::fill(b.begin() + kH, b.end(), 0); });
  variant("part_table_overflow", [](auto& b) {
    std::memset(b.data() + kH, 0xff, 8);
    uint64_t c = XXH3_64bits(b.data() + kH, b.size() - kH);
    std::memcpy(b.data() + kPayloadChecksumAt, &c, 8);
    reseal(b);
  });
  variant("part_table_shifted", [](auto& b) {
    b[kH] -= 1;
    b[kH + 8] += 1;
    uint64_t c = XXH3_64bits(b.data() + kH, b.size() - kH);
    std::memcpy(b.data() + kPayloadChecksumAt, &c, 8);
    reseal(b);
  });
  variant("negative_position", [](auto& b) { b[95] = 0x80; reseal(b); });
  variant("bitflip_middle", [](auto& b) { b[b.size() / 2] ^= 0x10; });
  save(dir, "empty", {});
  save(dir, "one_byte", {0x53});
  save(dir, "magic_only", {'S', 'T', 'B', 'A', 'N', 'K', 'O', 'B'});
  n += 3;
  std::printf("wrote %d files to %s\n", n, dir.c_str());
  return 0;
}
