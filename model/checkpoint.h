// Checkpoint: read-only, mmapped access to the tensors of a Hugging Face
// checkpoint directory (one model.safetensors, or several shards listed by
// model.safetensors.index.json).
//
// Every inconsistency is an error naming the tensor and the file: a header
// that is not JSON or lies about offsets (overlap, hole, past the end of the
// file, span not matching shape x dtype), a truncated file, an unsupported
// dtype (only F32, BF16, F16, and I64 for integer constants), an index naming a missing shard or a tensor its
// shard lacks, a shard holding a tensor the index does not list there.
// A directory with model.safetensors uses it; otherwise the index. Views are
// read-only mmaps; a tensor's data may be unaligned for its dtype (the data
// section starts 8-byte aligned, but nothing aligns the tensors in it), so
// read through memcpy or check alignment. Thread-safe after open(); views stay
// valid while it lives.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "fs/mapped_file.h"
#include "runtime/dtype.h"
#include "runtime/state.h"
#include "runtime/tensor_view.h"

namespace sb {

class Checkpoint {
 public:
  static Status open(const std::string& dir, std::unique_ptr<Checkpoint>* out);
  ~Checkpoint();

  // A checkpoint of views into bytes other objects hold (a GGUF file's
  // mapping, rearranged copies: model/gguf_model.h); `owners` keep them
  // alive as long as the checkpoint.
  static std::unique_ptr<Checkpoint> adopt(std::map<std::string, TensorView> tensors, std::string digest,
                                           std::vector<std::shared_ptr<const void>> owners);

  const TensorView* find(const std::string& name) const;
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  // Hash of every shard's bytes (identity of the weights; part of the
  // model fingerprint): XXH3-128 over the shards' bytes in sorted file-name
  // order, 32 hex digits. Computed once at open.
  const std::string& weights_digest() const { return digest_; }

 private:
  Checkpoint() = default;
  std::vector<std::unique_ptr<MappedFile>> mappings_;
  std::vector<std::shared_ptr<const void>> owners_;
  std::map<std::string, TensorView> tensors_;
  std::string digest_;
};

// Writes one safetensors file. Tensors are written in the order given.
class SafetensorsWriter {
 public:
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes);
  Status write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Entry> entries_;
};

}  // namespace sb
