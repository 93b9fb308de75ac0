// Runs the libFuzzer target fuzz/format_fuzz.cpp without libFuzzer: every
// file of the committed corpus (fuzz/corpus/), then a few thousand mutations
// of them with a fixed seed. The target aborts on any broken property, so a
// pass means no input crashed, over-read (in the sanitizer build) or
// decoded to something that does not round-trip.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "bank/format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace sb {
namespace {

std::vector<std::vector<uint8_t>> load_corpus() {
  const char* src = std::getenv("SB_SOURCE_DIR");
  EXPECT_NE(src, nullptr) << "SB_SOURCE_DIR is not set (run through ctest)";
  std::vector<std::vector<uint8_t>> out;
  if (!src) return out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(src) + "/fuzz/corpus")) {
    std::ifstream f(e.path(), std::ios::binary);
    out.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  return out;
}

TEST(SsdFuzzReplay, CorpusDecodesAsExpected) {
  auto corpus = load_corpus();
  ASSERT_GE(corpus.size(), 30u);
  int valid = 0;
  for (const auto& b : corpus) {
    EXPECT_EQ(LLVMFuzzerTestOneInput(b.data(), b.size()), 0);
    ObjectHeader h;
    Object o;
    if (decode_object(b, &h, &o).is_ok()) ++valid;
  }
  // Nine valid objects (one of them bf16); the rest of the corpus is damaged
  // on purpose (one damage, a part table that lies, passes the parser and
  // fails the shapes).
  EXPECT_EQ(valid, 10);
}

TEST(SsdFuzzReplay, FixedSeedMutationsNeverBreakTheParser) {
  auto corpus = load_corpus();
  ASSERT_FALSE(corpus.empty());
  std::mt19937_64 rng(20261202);
  int header_ok = 0, object_ok = 0;
  const int kMutations = 4000;
  for (int i = 0; i < kMutations; ++i) {
    std::vector<uint8_t> b = corpus[rng() % corpus.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 6) {
        case 0:
          if (!b.empty()) b[rng() % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
          break;
        case 1:
          if (!b.empty()) b[rng() % b.size()] = static_cast<uint8_t>(rng());
          break;
        case 2:
          b.resize(rng() % (b.size() + 1));
          break;
        case 3:
          b.insert(b.begin() + static_cast<long>(rng() % (b.size() + 1)), static_cast<uint8_t>(rng()));
          break;
        case 4: {  // an interesting value in a header field
          static const uint64_t values[] = {0, 1, 2, 0x7f, 0xff, 0xffffffffull, 0x80000000ull, ~0ull, 1ull << 40};
          static const size_t fields[] = {8, 12, 16, 88, 96, 100, 104, 112, 120, 160, 168};
          size_t at = fields[rng() % std::size(fields)];
          uint64_t v = values[rng() % std::size(values)];
          if (b.size() >= at + 8) std::memcpy(b.data() + at, &v, 8);
          break;
        }
        default:
          break;
      }
    }
    // Half the time, make the checksums right again, so that the mutation
    // reaches the checks behind them.
    if (rng() % 2 && b.size() >= kObjectHeaderBytes) {
      uint64_t c = XXH3_64bits(b.data() + kObjectHeaderBytes, b.size() - kObjectHeaderBytes);
      std::memcpy(b.data() + 120, &c, 8);
      c = XXH3_64bits(b.data(), 152);
      std::memcpy(b.data() + 152, &c, 8);
    }
    ASSERT_EQ(LLVMFuzzerTestOneInput(b.data(), b.size()), 0);
    ObjectHeader h;
    Object o;
    if (decode_header(b, &h).is_ok()) ++header_ok;
    if (decode_object(b, &h, &o).is_ok()) ++object_ok;
  }
  // The mutations exercised the deep paths, not only the first check.
  EXPECT_GT(header_ok, kMutations / 20);
  EXPECT_GT(object_ok, kMutations / 50);
  EXPECT_LT(object_ok, kMutations);
}

}  // namespace
}  // namespace sb
