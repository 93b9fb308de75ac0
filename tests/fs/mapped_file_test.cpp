// release_mapped_pages (fs/mapped_file.h): the pages of a file mapping it
// drops leave the process (its resident file pages fall) and read back with
// the file's bytes; memory that is not a live mapping is left alone.
#include "fs/mapped_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tests/util/temp_dir.h"

namespace sb {
namespace {

// RssFile of /proc/self/status, in kB.
int64_t resident_file_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("RssFile:", 0) == 0) return std::stoll(line.substr(8));
  return -1;
}

uint64_t sum_bytes(const uint8_t* p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; i += 512) s += p[i];  // one read per 512 bytes touches every page
  return s;
}

TEST(MappedFileTest, ReleasedPagesLeaveTheProcessAndReadBackFromTheFile) {
  testing::TempDir tmp;
  constexpr size_t kBytes = 32 << 20;
  std::string bytes(kBytes, '\0');
  for (size_t i = 0; i < kBytes; ++i) bytes[i] = static_cast<char>(i * 2654435761u >> 24);
  testing::write_file(tmp.file("w.bin"), bytes);
  std::unique_ptr<MappedFile> m;
  ASSERT_TRUE(MappedFile::open(tmp.file("w.bin"), &m).is_ok());
  const uint64_t want = sum_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), kBytes);
  ASSERT_EQ(sum_bytes(m->data(), kBytes), want);
  const int64_t touched = resident_file_kb();
  release_mapped_pages(m->data() + 100, kBytes - 200);  // the whole pages inside
  const int64_t released = resident_file_kb();
  EXPECT_LT(released, touched - static_cast<int64_t>(kBytes / 1024) * 3 / 4) << touched << " kB -> " << released;
  EXPECT_EQ(sum_bytes(m->data(), kBytes), want);
  EXPECT_EQ(0, std::memcmp(m->data(), bytes.data(), kBytes));
}

TEST(MappedFileTest, MemoryOutsideALiveMappingIsLeftAlone) {
  std::vector<uint8_t> heap(8 << 20, 7);
  release_mapped_pages(heap.data(), heap.size());
  EXPECT_EQ(sum_bytes(heap.data(), heap.size()), 7u * (heap.size() / 512));
  testing::TempDir tmp;
  testing::write_file(tmp.file("small.bin"), std::string(1 << 16, 'x'));
  std::unique_ptr<MappedFile> m;
  ASSERT_TRUE(MappedFile::open(tmp.file("small.bin"), &m).is_ok());
  // A range running past the mapping's end is not the mapping's: untouched.
  release_mapped_pages(m->data(), (1 << 16) + (1 << 20));
  EXPECT_EQ(m->data()[4096], 'x');
}

}  // namespace
}  // namespace sb
