// MappedFile: a whole file mapped read-only, and the digest of a file's
// bytes; what the checkpoint (safetensors) and GGUF readers share.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace sb {

class MappedFile {
 public:
  // An empty file maps to data() == nullptr, size() == 0.
  static Status open(const std::string& path, std::unique_ptr<MappedFile>* out);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return base_; }
  uint64_t size() const { return size_; }

 private:
  MappedFile() = default;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
};

// Drops from the process the whole pages of [p, p + n) where that range lies
// inside one live MappedFile; a no-op for any other memory. For weights whose
// kernels keep their own (repacked) copy: the mapping is read-only and
// private, so a page touched again is read back from the file, never lost.
void release_mapped_pages(const void* p, uint64_t n);

// Feeds the file's bytes to `state` with read() rather than through a
// mapping: the same bytes, about three times faster than faulting every page
// in. Fails when the file's size is not `size` (changed while being opened).
Status hash_file(const std::string& path, uint64_t size, XXH3_state_t* state);
// 32 lowercase hex digits of an XXH3-128 digest.
std::string xxh128_hex(XXH128_hash_t hash);

}  // namespace sb
