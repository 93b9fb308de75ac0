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

// Feeds the file's bytes to `state` with read() rather than through a
// mapping: the same bytes, about three times faster than faulting every page
// in. Fails when the file's size is not `size` (changed while being opened).
Status hash_file(const std::string& path, uint64_t size, XXH3_state_t* state);
// 32 lowercase hex digits of an XXH3-128 digest.
std::string xxh128_hex(XXH128_hash_t hash);

}  // namespace sb
