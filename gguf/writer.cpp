// GgufWriter (gguf/gguf.h).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <tuple>

#include "gguf/gguf.h"

namespace sb {

namespace {

// Appends little-endian encodings to a byte string (the header is built in
// memory; tensor data is streamed after it).
class Encoder {
 public:
  explicit Encoder(std::string* out) : out_(out) {}
  template <typename T>
  void num(T v) {
    out_->append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void str(const std::string& s) {
    num<uint64_t>(s.size());
    out_->append(s);
  }
  void element(GgufType t, int64_t i, double f) {
    switch (t) {
      case GgufType::kU8:
      case GgufType::kBool:
        num(static_cast<uint8_t>(i));
        break;
      case GgufType::kI8:
        num(static_cast<int8_t>(i));
        break;
      case GgufType::kU16:
        num(static_cast<uint16_t>(i));
        break;
      case GgufType::kI16:
        num(static_cast<int16_t>(i));
        break;
      case GgufType::kU32:
        num(static_cast<uint32_t>(i));
        break;
      case GgufType::kI32:
        num(static_cast<int32_t>(i));
        break;
      case GgufType::kU64:
        num(static_cast<uint64_t>(i));
        break;
      case GgufType::kI64:
        num(i);
        break;
      case GgufType::kF32:
        num(static_cast<float>(f));
        break;
      case GgufType::kF64:
        num(f);
        break;
      default:
        break;
    }
  }
  void value(const GgufValue& v) {
    num(static_cast<uint32_t>(v.type));
    if (v.type == GgufType::kString) return str(v.s);
    if (v.type != GgufType::kArray) return element(v.type, v.i, v.f);
    num(static_cast<uint32_t>(v.elem));
    if (v.elem == GgufType::kString) {
      num<uint64_t>(v.strings.size());
      for (const auto& s : v.strings) str(s);
    } else if (v.elem == GgufType::kF32 || v.elem == GgufType::kF64) {
      num<uint64_t>(v.floats.size());
      for (double f : v.floats) element(v.elem, 0, f);
    } else {
      num<uint64_t>(v.ints.size());
      for (int64_t i : v.ints) element(v.elem, i, 0);
    }
  }
  void pad_to(uint64_t align) {
    while (out_->size() % align) out_->push_back('\0');
  }

 private:
  std::string* out_;
};

uint64_t tensor_bytes(DType dtype, const std::vector<int64_t>& shape) {
  if (shape.empty()) return 0;
  uint64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= static_cast<uint64_t>(shape[d]);
  return rows * static_cast<uint64_t>(dtype_row_bytes(dtype, shape.back()));
}

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : metadata_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            std::vector<uint8_t> bytes) {
  const uint64_t n = bytes.size();
  tensors_.push_back({name, dtype, std::move(shape), std::move(bytes), nullptr, n});
}

void GgufWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, Producer produce) {
  const uint64_t n = tensor_bytes(dtype, shape);
  tensors_.push_back({name, dtype, std::move(shape), {}, std::move(produce), n});
}

namespace {

// The header (everything before the tensor data, padded) and each tensor's
// data offset; checks every tensor's byte count.
Status header_bytes(const std::vector<std::pair<std::string, GgufValue>>& metadata,
                    const std::vector<std::tuple<std::string, DType, std::vector<int64_t>, uint64_t>>& tensors,
                    std::string* out) {
  Encoder e(out);
  uint64_t align = kGgufDefaultAlignment;
  for (const auto& [k, v] : metadata)
    if (k == "general.alignment" && v.type == GgufType::kU32 && v.i > 0) align = static_cast<uint64_t>(v.i);
  e.num<uint32_t>(0x46554747);  // "GGUF"
  e.num<uint32_t>(3);
  e.num<uint64_t>(tensors.size());
  e.num<uint64_t>(metadata.size());
  for (const auto& [k, v] : metadata) {
    e.str(k);
    e.value(v);
  }
  uint64_t offset = 0;
  for (const auto& [name, dtype, shape, nbytes] : tensors) {
    const DTypeBlock block = dtype_block(dtype);
    if (shape.empty() || shape.size() > 4 || shape.back() % block.elems != 0 || tensor_bytes(dtype, shape) != nbytes)
      return Status::invalid("tensor " + name + ": " + std::to_string(nbytes) + " bytes of " + dtype_name(dtype) +
                             " do not fit shape " + shape_text(shape));
    e.str(name);
    e.num<uint32_t>(shape.size());
    for (size_t d = shape.size(); d-- > 0;) e.num<uint64_t>(shape[d]);
    e.num<uint32_t>(ggml_type_of(dtype));
    e.num<uint64_t>(offset);
    offset = align_up(offset + nbytes, align);
  }
  e.pad_to(align);
  return Status::ok();
}

}  // namespace

Status GgufWriter::emit(const std::function<bool(const void*, size_t)>& sink) const {
  std::vector<std::tuple<std::string, DType, std::vector<int64_t>, uint64_t>> infos;
  for (const auto& t : tensors_) infos.emplace_back(t.name, t.dtype, t.shape, t.nbytes);
  std::string header;
  SB_RETURN_IF_ERROR(header_bytes(metadata_, infos, &header));
  uint64_t align = kGgufDefaultAlignment;
  for (const auto& [k, v] : metadata_)
    if (k == "general.alignment" && v.type == GgufType::kU32 && v.i > 0) align = static_cast<uint64_t>(v.i);
  bool ok = sink(header.data(), header.size());
  const std::vector<char> zeros(align, 0);
  for (const auto& t : tensors_) {
    std::vector<uint8_t> made;
    if (ok && t.produce) {
      SB_RETURN_IF_ERROR(t.produce(&made));
      if (made.size() != t.nbytes)
        return Status::invalid("tensor " + t.name + ": produced " + std::to_string(made.size()) + " bytes, its shape " +
                               shape_text(t.shape) + " of " + dtype_name(t.dtype) + " takes " +
                               std::to_string(t.nbytes));
    }
    const std::vector<uint8_t>& bytes = t.produce ? made : t.bytes;
    if (ok && !bytes.empty()) ok = sink(bytes.data(), bytes.size());
    const uint64_t pad = (align - bytes.size() % align) % align;
    if (ok && pad) ok = sink(zeros.data(), pad);
  }
  return ok ? Status::ok() : Status::io_error("write failed");
}

Status GgufWriter::serialize(std::string* out) const {
  out->clear();
  return emit([out](const void* p, size_t n) {
    out->append(static_cast<const char*>(p), n);
    return true;
  });
}

Status GgufWriter::write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status::io_error(tmp + ": cannot create: " + std::strerror(errno));
  Status s = emit([f](const void* p, size_t n) { return std::fwrite(p, 1, n, f) == n; });
  if (std::fclose(f) != 0 && s.is_ok()) s = Status::io_error("close failed");
  if (s.is_ok() && std::rename(tmp.c_str(), path.c_str()) != 0) s = Status::io_error("rename failed");
  if (!s.is_ok()) {
    s = Status::io_error(path + ": " + s.message() + ": " + std::strerror(errno));
    std::remove(tmp.c_str());
  }
  return s;
}

}  // namespace sb
