// GGUF: the file format of llama.cpp (one file: header, metadata, tensor
// infos, aligned tensor data), read and written here; a model gguf-split cut
// into shards opens from its first shard as one GgufFile.
// Contract of GgufFile::parse / open (what each check refuses, in full:
// docs/models.md, "Reading a GGUF file"):
//  - one clear error naming the key, tensor or file, or a whole file: every
//    count, length, shape, offset and size is checked against the bytes that
//    remain, overflow-safe, before anything is allocated for it;
//  - a tensor type statebank does not compute with is refused while the
//    tensor infos are read;
//  - tensors are TensorViews into the mapping, shape row-major outermost
//    first (GGUF's ne = [cols, rows, ...] becomes [..., rows, cols]), data
//    possibly unaligned for its type; views live as long as the GgufFile.
// Immutable after open.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "fs/mapped_file.h"
#include "runtime/tensor_view.h"

namespace sb {

// GGUF's value types, numbered as in the file.
enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
const char* gguf_type_name(GgufType type);  // "u32", "string", "array", ...

// One metadata value. Scalars: integers (and bool) in `i` (a u64 above
// INT64_MAX keeps its bits), floats in `f`, strings in `s`. Arrays: `elem`
// is the element type and the elements are in `strings`, `ints` or `floats`.
struct GgufValue {
  GgufType type = GgufType::kU32;
  GgufType elem = GgufType::kU32;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<std::string> strings;
  std::vector<int64_t> ints;
  std::vector<double> floats;

  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue string_array(std::vector<std::string> v);
  // Integer (or bool) arrays of element type `elem`.
  static GgufValue int_array(GgufType elem, std::vector<int64_t> v);
  static GgufValue f32_array(std::vector<double> v);
  bool is_integer() const;  // any integer type or bool
  bool is_float() const;    // f32 or f64
};

// GGML's tensor type number of a DType, and back. gguf_tensor_dtype fails
// for every other type with a message naming it ("IQ2_XS", "type 77").
uint32_t ggml_type_of(DType dtype);
Status gguf_tensor_dtype(uint32_t ggml_type, const std::string& tensor, const std::string& file, DType* out);

constexpr uint32_t kGgufDefaultAlignment = 32;
// gguf-split's metadata keys, in every shard of a split model.
inline constexpr const char* kGgufSplitNo = "split.no";                       // 0 for the first shard
inline constexpr const char* kGgufSplitCount = "split.count";                 // how many shards
inline constexpr const char* kGgufSplitTensorsCount = "split.tensors.count";  // tensors in all of them

class GgufFile {
 public:
  // Maps and parses the file at `path` and, with Digest::kYes, digests its
  // bytes (weights_digest()): that reads the whole file, which a model's
  // fingerprint needs and its tokenizer or chat template does not.
  enum class Digest { kYes, kNo };
  static Status open(const std::string& path, std::unique_ptr<GgufFile>* out, Digest digest = Digest::kYes);
  // Parses bytes the caller keeps alive at least as long as *out (the fuzz
  // target's entry). `file` names them in messages. No digest.
  static Status parse(const uint8_t* data, uint64_t size, const std::string& file, std::unique_ptr<GgufFile>* out);

  const std::string& file() const { return file_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const GgufValue* find(const std::string& key) const;
  const TensorView* find_tensor(const std::string& name) const;
  // XXH3-128 of the file's bytes, 32 hex digits (empty after parse() and open(..., Digest::kNo)).
  const std::string& weights_digest() const { return digest_; }

  // Typed reads of one key: not_found when absent, corruption naming the key,
  // its type and the file when the type does not fit (get_int takes any
  // integer type, get_float f32, f64 or an integer).
  Status get_int(const std::string& key, int64_t* out) const;
  Status get_float(const std::string& key, double* out) const;
  Status get_string(const std::string& key, std::string* out) const;
  Status get_bool(const std::string& key, bool* out) const;
  // An array of `elem_kind` elements ("string", "integer" or "float").
  Status get_array(const std::string& key, const char* elem_kind, const GgufValue** out) const;

 private:
  friend class GgufParser;
  GgufFile() = default;
  // Maps and parses one file, its mapping kept in *out.
  static Status open_one(const std::string& path, std::unique_ptr<GgufFile>* out);
  // The shards after the first (this file, split into `count`): their
  // tensors joined to this file's, their bytes added to `hash` when given.
  Status join_shards(int64_t count, XXH3_state_t* hash);
  std::string file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  std::map<std::string, GgufValue> metadata_;
  std::map<std::string, TensorView> tensors_;
  std::vector<std::unique_ptr<MappedFile>> mappings_;  // one per shard
  std::string digest_;
};

// Writes a GGUF v3 file: metadata in the order set (a key set twice keeps
// its first place and takes the new value), tensors in the order added, each
// at the next multiple of the alignment. Writes PATH.tmp and renames it.
class GgufWriter {
 public:
  void set(const std::string& key, GgufValue value);
  // shape row-major, outermost first (as TensorView); bytes must be exactly
  // what shape and dtype need.
  void add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes);
  // A tensor whose bytes `produce` makes only while the file is written,
  // one tensor at a time, so a file larger than memory can be written. An
  // error of `produce`, or bytes that do not fit the shape, fails the write.
  using Producer = std::function<Status(std::vector<uint8_t>*)>;
  void add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, Producer produce);
  Status write(const std::string& path) const;
  // The whole file in memory (tests and the fuzz corpus).
  Status serialize(std::string* out) const;

 private:
  // Hands the file's bytes to `sink` in order; stops at the first false.
  Status emit(const std::function<bool(const void*, size_t)>& sink) const;
  struct Tensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
    Producer produce;    // set: bytes stay empty until emit()
    uint64_t nbytes = 0;  // bytes.size(), or what produce must give
  };
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace sb
