#include "fs/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

namespace sb {
namespace {

// The live mappings by start address, so that release_mapped_pages never
// drops pages of anonymous memory (which would read back as zeros).
std::mutex live_mu;
std::map<uintptr_t, uint64_t>& live_mappings() {
  static auto* m = new std::map<uintptr_t, uint64_t>();
  return *m;
}

}  // namespace

MappedFile::~MappedFile() {
  if (!base_) return;
  {
    std::lock_guard<std::mutex> lock(live_mu);
    live_mappings().erase(reinterpret_cast<uintptr_t>(base_));
  }
  munmap(const_cast<uint8_t*>(base_), size_);
}

void release_mapped_pages(const void* p, uint64_t n) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p), end = begin + n;
  {
    std::lock_guard<std::mutex> lock(live_mu);
    auto it = live_mappings().upper_bound(begin);
    if (it == live_mappings().begin()) return;
    --it;
    if (end > it->first + it->second) return;
  }
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) & ~(page - 1), last = end & ~(page - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

Status MappedFile::open(const std::string& path, std::unique_ptr<MappedFile>* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::io_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Status s = Status::io_error(path + ": stat failed: " + std::strerror(errno));
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::invalid(path + " is not a regular file");
  }
  std::unique_ptr<MappedFile> m(new MappedFile());
  m->size_ = static_cast<uint64_t>(st.st_size);
  if (m->size_ > 0) {
    void* p = ::mmap(nullptr, m->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      Status s = Status::io_error(path + ": mmap failed: " + std::strerror(errno));
      ::close(fd);
      return s;
    }
    m->base_ = static_cast<const uint8_t*>(p);
    std::lock_guard<std::mutex> lock(live_mu);
    live_mappings()[reinterpret_cast<uintptr_t>(p)] = m->size_;
  }
  ::close(fd);
  *out = std::move(m);
  return Status::ok();
}

Status hash_file(const std::string& path, uint64_t size, XXH3_state_t* hs) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::io_error(path + ": cannot open: " + std::strerror(errno));
  std::vector<uint8_t> buf(4 << 20);
  uint64_t total = 0;
  while (true) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = Status::io_error(path + ": read failed: " + std::strerror(errno));
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    XXH3_128bits_update(hs, buf.data(), static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
  }
  ::close(fd);
  if (total != size) return Status::io_error(path + ": changed size while being opened");
  return Status::ok();
}

std::string xxh128_hex(XXH128_hash_t hash) {
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, hash);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : canon.digest) {
    out.push_back(hex[b >> 4]);
    out.push_back(hex[b & 15]);
  }
  return out;
}

}  // namespace sb
