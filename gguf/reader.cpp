#include "gguf/gguf.h"

#include <algorithm>
#include <cstring>

namespace sb {

namespace {

// Elements above this are refused whatever the file size: no model tensor
// comes near it, and it keeps every byte count far from overflow.
constexpr uint64_t kMaxElements = uint64_t{1} << 50;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

struct GgmlTypeName {
  uint32_t id;
  const char* name;
};
// Every GGML type number with its name, for messages about the ones refused.
constexpr GgmlTypeName kGgmlTypes[] = {
    {0, "F32"},      {1, "F16"},     {2, "Q4_0"},     {3, "Q4_1"},   {6, "Q5_0"},    {7, "Q5_1"},   {8, "Q8_0"},
    {9, "Q8_1"},     {10, "Q2_K"},   {11, "Q3_K"},    {12, "Q4_K"},  {13, "Q5_K"},   {14, "Q6_K"},  {15, "Q8_K"},
    {16, "IQ2_XXS"}, {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"}, {20, "IQ4_NL"}, {21, "IQ3_S"}, {22, "IQ2_S"},
    {23, "IQ4_XS"},  {24, "I8"},     {25, "I16"},     {26, "I32"},   {27, "I64"},    {28, "F64"},   {29, "IQ1_M"},
    {30, "BF16"},    {34, "TQ1_0"},  {35, "TQ2_0"},   {39, "MXFP4"},
};

std::string ggml_type_text(uint32_t id) {
  for (const auto& t : kGgmlTypes)
    if (t.id == id) return t.name;
  return "unknown type " + std::to_string(id);
}

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    default:
      return 0;
  }
}

}  // namespace

const char* gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::kU8:
      return "u8";
    case GgufType::kI8:
      return "i8";
    case GgufType::kU16:
      return "u16";
    case GgufType::kI16:
      return "i16";
    case GgufType::kU32:
      return "u32";
    case GgufType::kI32:
      return "i32";
    case GgufType::kF32:
      return "f32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kU64:
      return "u64";
    case GgufType::kI64:
      return "i64";
    case GgufType::kF64:
      return "f64";
  }
  return "?";
}

GgufValue GgufValue::u32(uint32_t v) {
  GgufValue x;
  x.type = GgufType::kU32;
  x.i = v;
  return x;
}
GgufValue GgufValue::i32(int32_t v) {
  GgufValue x;
  x.type = GgufType::kI32;
  x.i = v;
  return x;
}
GgufValue GgufValue::u64(uint64_t v) {
  GgufValue x;
  x.type = GgufType::kU64;
  x.i = static_cast<int64_t>(v);
  return x;
}
GgufValue GgufValue::f32(float v) {
  GgufValue x;
  x.type = GgufType::kF32;
  x.f = v;
  return x;
}
GgufValue GgufValue::boolean(bool v) {
  GgufValue x;
  x.type = GgufType::kBool;
  x.i = v;
  return x;
}
GgufValue GgufValue::string(std::string v) {
  GgufValue x;
  x.type = GgufType::kString;
  x.s = std::move(v);
  return x;
}

GgufValue GgufValue::string_array(std::vector<std::string> v) {
  GgufValue x;
  x.type = GgufType::kArray;
  x.elem = GgufType::kString;
  x.strings = std::move(v);
  return x;
}

GgufValue GgufValue::int_array(GgufType elem, std::vector<int64_t> v) {
  GgufValue x;
  x.type = GgufType::kArray;
  x.elem = elem;
  x.ints = std::move(v);
  return x;
}

GgufValue GgufValue::f32_array(std::vector<double> v) {
  GgufValue x;
  x.type = GgufType::kArray;
  x.elem = GgufType::kF32;
  x.floats = std::move(v);
  return x;
}

bool GgufValue::is_integer() const {
  return type != GgufType::kF32 && type != GgufType::kF64 && type != GgufType::kString && type != GgufType::kArray;
}
bool GgufValue::is_float() const { return type == GgufType::kF32 || type == GgufType::kF64; }

uint32_t ggml_type_of(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 0;
    case DType::kF16:
      return 1;
    case DType::kQ4_0:
      return 2;
    case DType::kQ5_0:
      return 6;
    case DType::kQ5_1:
      return 7;
    case DType::kQ8_0:
      return 8;
    case DType::kQ4_K:
      return 12;
    case DType::kQ5_K:
      return 13;
    case DType::kQ6_K:
      return 14;
    case DType::kQ2_K:
      return 10;
    case DType::kQ3_K:
      return 11;
    case DType::kIQ4_NL:
      return 20;
    case DType::kIQ4_XS:
      return 23;
    case DType::kBF16:
      return 30;
    case DType::kI64:
      return 27;  // GGML_TYPE_I64
  }
  return 0;
}

Status gguf_tensor_dtype(uint32_t ggml_type, const std::string& tensor, const std::string& file, DType* out) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ5_0, DType::kQ5_1,
                  DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL,
                  DType::kIQ4_XS}) {
    if (ggml_type_of(d) == ggml_type) {
      *out = d;
      return Status::ok();
    }
  }
  return Status::unsupported("tensor " + tensor + " in file " + file + " has type " + ggml_type_text(ggml_type) +
                             ", which statebank does not read (F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, Q2_K, "
                             "Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS are)");
}

// Reads the file front to back; every read is checked against the bytes left.
class GgufParser {
 public:
  GgufParser(const uint8_t* data, uint64_t size, GgufFile* out) : p_(data), size_(size), out_(out) {}

  Status run() {
    SB_RETURN_IF_ERROR(header());
    for (uint64_t k = 0; k < n_kv_; ++k) SB_RETURN_IF_ERROR(key_value(k));
    SB_RETURN_IF_ERROR(alignment());
    for (uint64_t t = 0; t < n_tensors_; ++t) SB_RETURN_IF_ERROR(tensor_info(t));
    return place_tensors();
  }

 private:
  const std::string& file() const { return out_->file_; }
  uint64_t left() const { return size_ - pos_; }

  Status truncated(const std::string& what) const {
    return Status::corruption("file " + file() + " is truncated or damaged: " + what + " at byte " +
                              std::to_string(pos_) + " runs past the end of the file (" + std::to_string(size_) +
                              " bytes)");
  }
  Status bytes(void* dst, uint64_t n, const std::string& what) {
    if (n > left()) return truncated(what);
    if (n) std::memcpy(dst, p_ + pos_, n);
    pos_ += n;
    return Status::ok();
  }
  template <typename T>
  Status num(T* v, const std::string& what) {
    return bytes(v, sizeof(T), what);  // the format is little-endian, as is every machine we build for
  }
  Status str(std::string* s, const std::string& what) {
    uint64_t n = 0;
    SB_RETURN_IF_ERROR(num(&n, what + " length"));
    if (n > left()) return truncated(what + " of " + std::to_string(n) + " bytes");
    s->assign(reinterpret_cast<const char*>(p_ + pos_), n);
    pos_ += n;
    return Status::ok();
  }

  Status header() {
    uint32_t magic = 0;
    if (size_ < 4 || std::memcmp(p_, "GGUF", 4) != 0)
      return Status::corruption("file " + file() + " is not a GGUF file (its first bytes are not \"GGUF\")");
    SB_RETURN_IF_ERROR(num(&magic, "magic"));
    SB_RETURN_IF_ERROR(num(&out_->version_, "version"));
    if (out_->version_ != 2 && out_->version_ != 3)
      return Status::unsupported("file " + file() + " is GGUF version " + std::to_string(out_->version_) +
                                 "; versions 2 and 3 are read");
    SB_RETURN_IF_ERROR(num(&n_tensors_, "tensor count"));
    SB_RETURN_IF_ERROR(num(&n_kv_, "metadata count"));
    // A key-value takes at least 12 bytes and a tensor info 32: larger counts cannot fit.
    if (n_kv_ > left() / 12) return truncated("metadata count " + std::to_string(n_kv_));
    if (n_tensors_ > left() / 32) return truncated("tensor count " + std::to_string(n_tensors_));
    return Status::ok();
  }

  Status scalar(GgufType t, GgufValue* v, const std::string& what) {
    v->type = t;
    switch (t) {
      case GgufType::kU8: {
        uint8_t x;
        SB_RETURN_IF_ERROR(num(&x, what));
        v->i = x;
        break;
      }
      case GgufType::kI8: {
        int8_t x;
        SB_RETURN_IF_ERROR(num(&x, what));
        v->i = x;
        break;
      }
      case GgufType::kBool: {
        uint8_t x;
        SB_RETURN_IF_ERROR(num(&x, what));
        if (x > 1) return Status::corruption(what + " in file " + file() + ": bool byte " + std::to_string(x));
        v->i = x;
        break;
      }
      case GgufType::kU16: {
        uint16_t x;
        SB_RETURN_IF_ERROR(num(&x, what));
        v->i = x;
        break;
      }
      case GgufType::kI16: {
        int16_t x;
        SB_RETURN_IF_ERROR(num(&x, what));
        v->i = x;
        break;
      }
      case GgufType::kU32: {
        uint32_t x;
        SB_RETURN_IF_ERROR(num(&x, what));
        v->i = x;
        break;
      }
      case GgufType::kI32: {
        int32_t x;
        SB_RETURN_IF_ERROR(num(&x, what));
        v->i = x;
        break;
      }
      case GgufType::kU64: {
        uint64_t x;
        SB_RETURN_IF_ERROR(num(&x, what));
        v->i = static_cast<int64_t>(x);
        break;
      }
      case GgufType::kI64: {
        int64_t x;
        SB_RETURN_IF_ERROR(num(&x, what));
        v->i = x;
        break;
      }
      case GgufType::kF32: {
        float x;
        SB_RETURN_IF_ERROR(num(&x, what));
        v->f = x;
        break;
      }
      case GgufType::kF64: {
        double x;
        SB_RETURN_IF_ERROR(num(&x, what));
        v->f = x;
        break;
      }
      case GgufType::kString:
        return str(&v->s, what);
      default:
        return Status::internal("scalar of type array");
    }
    return Status::ok();
  }

  Status array(GgufValue* v, const std::string& what) {
    uint32_t elem = 0;
    uint64_t n = 0;
    SB_RETURN_IF_ERROR(num(&elem, what + " element type"));
    if (elem > static_cast<uint32_t>(GgufType::kF64))
      return Status::corruption(what + " in file " + file() + " has unknown element type " + std::to_string(elem));
    v->type = GgufType::kArray;
    v->elem = static_cast<GgufType>(elem);
    if (v->elem == GgufType::kArray)
      return Status::unsupported(what + " in file " + file() + " is an array of arrays, which no model key uses");
    SB_RETURN_IF_ERROR(num(&n, what + " count"));
    const uint64_t min_size = v->elem == GgufType::kString ? 8 : scalar_size(v->elem);
    if (n > left() / min_size) return truncated(what + " of " + std::to_string(n) + " elements");
    GgufValue x;
    if (v->elem == GgufType::kString)
      v->strings.reserve(n);
    else if (v->elem == GgufType::kF32 || v->elem == GgufType::kF64)
      v->floats.reserve(n);
    else
      v->ints.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      SB_RETURN_IF_ERROR(scalar(v->elem, &x, what));
      if (v->elem == GgufType::kString)
        v->strings.push_back(std::move(x.s));
      else if (x.is_float())
        v->floats.push_back(x.f);
      else
        v->ints.push_back(x.i);
    }
    return Status::ok();
  }

  Status key_value(uint64_t k) {
    std::string key;
    SB_RETURN_IF_ERROR(str(&key, "metadata key " + std::to_string(k)));
    uint32_t type = 0;
    const std::string what = "metadata key " + key;
    SB_RETURN_IF_ERROR(num(&type, what + " type"));
    if (type > static_cast<uint32_t>(GgufType::kF64))
      return Status::corruption(what + " in file " + file() + " has unknown value type " + std::to_string(type));
    GgufValue v;
    if (static_cast<GgufType>(type) == GgufType::kArray)
      SB_RETURN_IF_ERROR(array(&v, what));
    else
      SB_RETURN_IF_ERROR(scalar(static_cast<GgufType>(type), &v, what));
    if (!out_->metadata_.emplace(key, std::move(v)).second)
      return Status::corruption(what + " appears twice in file " + file());
    return Status::ok();
  }

  Status alignment() {
    const GgufValue* a = out_->find("general.alignment");
    if (!a) return Status::ok();
    if (a->type != GgufType::kU32 || a->i == 0 || (a->i & (a->i - 1)) != 0)
      return Status::corruption("metadata key general.alignment in file " + file() +
                                " must be a u32 power of two, not a " + gguf_type_name(a->type) + " " +
                                std::to_string(a->i));
    out_->alignment_ = static_cast<uint32_t>(a->i);
    return Status::ok();
  }

  Status tensor_info(uint64_t t) {
    TensorView v;
    v.file = file();
    SB_RETURN_IF_ERROR(str(&v.name, "tensor info " + std::to_string(t) + " name"));
    const std::string where = "tensor " + v.name + " in file " + file();
    uint32_t n_dims = 0;
    SB_RETURN_IF_ERROR(num(&n_dims, where + ": dimension count"));
    if (n_dims < 1 || n_dims > kMaxDims)
      return Status::corruption(where + " has " + std::to_string(n_dims) + " dimensions (1 to 4 are valid)");
    std::vector<uint64_t> ne(n_dims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      SB_RETURN_IF_ERROR(num(&ne[d], where + ": dimension"));
      if (ne[d] == 0 || ne[d] > kMaxElements / numel)
        return Status::corruption(where + ": dimension " + std::to_string(d) + " of size " + std::to_string(ne[d]) +
                                  " is zero or makes the tensor too large");
      numel *= ne[d];
    }
    uint32_t type = 0;
    uint64_t offset = 0;
    SB_RETURN_IF_ERROR(num(&type, where + ": type"));
    SB_RETURN_IF_ERROR(gguf_tensor_dtype(type, v.name, file(), &v.dtype));
    SB_RETURN_IF_ERROR(num(&offset, where + ": offset"));
    const DTypeBlock block = dtype_block(v.dtype);
    if (ne[0] % static_cast<uint64_t>(block.elems) != 0)
      return Status::corruption(where + ": rows of " + std::to_string(ne[0]) + " values are not whole " +
                                dtype_name(v.dtype) + " blocks of " + std::to_string(block.elems));
    v.nbytes = numel / static_cast<uint64_t>(block.elems) * static_cast<uint64_t>(block.bytes);
    for (uint32_t d = n_dims; d-- > 0;) v.shape.push_back(static_cast<int64_t>(ne[d]));
    if (out_->tensors_.count(v.name)) return Status::corruption(where + " appears twice");
    offsets_[v.name] = offset;
    out_->tensors_.emplace(v.name, std::move(v));
    return Status::ok();
  }

  // The data section starts at the next multiple of the alignment; each
  // tensor's bytes must lie inside it, aligned, and overlap no other's.
  Status place_tensors() {
    const uint64_t align = out_->alignment_;
    const uint64_t pad = (align - pos_ % align) % align;
    if (out_->tensors_.empty()) return Status::ok();
    if (pad > left()) return truncated("the padding before the tensor data");
    const uint64_t data_begin = pos_ + pad, data_size = size_ - data_begin;
    std::vector<std::pair<uint64_t, const TensorView*>> ranges;
    for (auto& [name, v] : out_->tensors_) {
      const uint64_t off = offsets_.at(name);
      const std::string where = "tensor " + name + " in file " + file();
      if (off % align != 0)
        return Status::corruption(where + ": data offset " + std::to_string(off) +
                                  " is not a multiple of the alignment " + std::to_string(align));
      if (off > data_size || v.nbytes > data_size - off)
        return Status::corruption(where + ": its " + std::to_string(v.nbytes) + " bytes at data offset " +
                                  std::to_string(off) + " run past the end of the file (data section of " +
                                  std::to_string(data_size) + " bytes; truncated?)");
      v.data = p_ + data_begin + off;
      ranges.emplace_back(off, &v);
    }
    std::sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 1; i < ranges.size(); ++i) {
      if (ranges[i].first < ranges[i - 1].first + ranges[i - 1].second->nbytes)
        return Status::corruption("tensor " + ranges[i].second->name + " in file " + file() +
                                  ": its bytes overlap those of tensor " + ranges[i - 1].second->name);
    }
    return Status::ok();
  }

  const uint8_t* p_;
  uint64_t size_;
  uint64_t pos_ = 0;
  GgufFile* out_;
  uint64_t n_tensors_ = 0, n_kv_ = 0;
  std::map<std::string, uint64_t> offsets_;
};

Status GgufFile::parse(const uint8_t* data, uint64_t size, const std::string& file, std::unique_ptr<GgufFile>* out) {
  std::unique_ptr<GgufFile> g(new GgufFile());
  g->file_ = file;
  GgufParser parser(data, size, g.get());
  SB_RETURN_IF_ERROR(parser.run());
  *out = std::move(g);
  return Status::ok();
}

Status GgufFile::open_one(const std::string& path, std::unique_ptr<GgufFile>* out) {
  std::unique_ptr<MappedFile> m;
  SB_RETURN_IF_ERROR(MappedFile::open(path, &m));
  SB_RETURN_IF_ERROR(parse(m->data(), m->size(), path, out));
  (*out)->mappings_.push_back(std::move(m));
  return Status::ok();
}

Status GgufFile::open(const std::string& path, std::unique_ptr<GgufFile>* out, Digest digest) {
  std::unique_ptr<GgufFile> g;
  SB_RETURN_IF_ERROR(open_one(path, &g));
  int64_t count = 1;
  if (g->find(kGgufSplitCount)) SB_RETURN_IF_ERROR(g->get_int(kGgufSplitCount, &count));
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> hs(nullptr, &XXH3_freeState);
  if (digest == Digest::kYes) {
    hs.reset(XXH3_createState());
    XXH3_128bits_reset(hs.get());
    SB_RETURN_IF_ERROR(hash_file(path, g->mappings_[0]->size(), hs.get()));
  }
  if (count != 1) SB_RETURN_IF_ERROR(g->join_shards(count, hs.get()));
  if (hs) g->digest_ = xxh128_hex(XXH3_128bits_digest(hs.get()));
  *out = std::move(g);
  return Status::ok();
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const TensorView* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

namespace {

Status lookup(const GgufFile& g, const std::string& key, const GgufValue** v) {
  *v = g.find(key);
  if (!*v) return Status::not_found("metadata key " + key + " is missing from file " + g.file());
  return Status::ok();
}

// The format's strings are UTF-8; one that is not marks a damaged file, and
// a tokenizer or template built from it would fail later without naming it.
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    int len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b < 0x80) len = 1;
    else if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b == 0xE0) len = 3, lo = 0xA0;
    else if (b == 0xED) len = 3, hi = 0x9F;
    else if (b >= 0xE1 && b <= 0xEF) len = 3;
    else if (b == 0xF0) len = 4, lo = 0x90;
    else if (b >= 0xF1 && b <= 0xF3) len = 4;
    else if (b == 0xF4) len = 4, hi = 0x8F;
    else return false;
    if (s.size() - i < static_cast<size_t>(len)) return false;
    for (int k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return false;
    }
    i += static_cast<size_t>(len);
  }
  return true;
}

Status not_utf8(const GgufFile& g, const std::string& key) {
  return Status::corruption("metadata key " + key + " in file " + g.file() + " is not valid UTF-8");
}

Status wrong_type(const GgufFile& g, const std::string& key, const GgufValue& v, const char* want) {
  return Status::corruption("metadata key " + key + " in file " + g.file() + " is a " + gguf_type_name(v.type) +
                            ", expected " + want);
}

}  // namespace

Status GgufFile::get_int(const std::string& key, int64_t* out) const {
  const GgufValue* v;
  SB_RETURN_IF_ERROR(lookup(*this, key, &v));
  if (!v->is_integer() || v->type == GgufType::kBool) return wrong_type(*this, key, *v, "an integer");
  *out = v->i;
  return Status::ok();
}

Status GgufFile::get_float(const std::string& key, double* out) const {
  const GgufValue* v;
  SB_RETURN_IF_ERROR(lookup(*this, key, &v));
  if (v->is_float())
    *out = v->f;
  else if (v->is_integer() && v->type != GgufType::kBool)
    *out = static_cast<double>(v->i);
  else
    return wrong_type(*this, key, *v, "a number");
  return Status::ok();
}

Status GgufFile::get_string(const std::string& key, std::string* out) const {
  const GgufValue* v;
  SB_RETURN_IF_ERROR(lookup(*this, key, &v));
  if (v->type != GgufType::kString) return wrong_type(*this, key, *v, "a string");
  if (!valid_utf8(v->s)) return not_utf8(*this, key);
  *out = v->s;
  return Status::ok();
}

Status GgufFile::get_bool(const std::string& key, bool* out) const {
  const GgufValue* v;
  SB_RETURN_IF_ERROR(lookup(*this, key, &v));
  if (v->type != GgufType::kBool) return wrong_type(*this, key, *v, "a bool");
  *out = v->i != 0;
  return Status::ok();
}

Status GgufFile::get_array(const std::string& key, const char* elem_kind, const GgufValue** out) const {
  SB_RETURN_IF_ERROR(lookup(*this, key, out));
  const GgufValue& v = **out;
  const std::string kind = elem_kind;
  GgufValue probe;
  probe.type = v.elem;
  const bool fits = v.type == GgufType::kArray && (kind == "string"  ? v.elem == GgufType::kString
                                                   : kind == "float" ? probe.is_float()
                                                                     : probe.is_integer());
  if (fits && kind == "string")
    for (size_t i = 0; i < v.strings.size(); ++i)
      if (!valid_utf8(v.strings[i])) return not_utf8(*this, key + "[" + std::to_string(i) + "]");
  if (!fits) {
    const std::string has =
        v.type == GgufType::kArray ? std::string("array of ") + gguf_type_name(v.elem) : gguf_type_name(v.type);
    return Status::corruption("metadata key " + key + " in file " + file_ + " is a " + has + ", expected an array of " +
                              kind + "s");
  }
  return Status::ok();
}

}  // namespace sb
