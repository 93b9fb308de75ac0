#include "bank/format.h"

#include <xxhash.h>

#include <bit>
#include <cstring>

namespace sb {

static_assert(std::endian::native == std::endian::little, "the object format is written with little-endian memcpy");

namespace {

constexpr size_t kHeaderChecksumAt = 152;

void put_u8(uint8_t* p, size_t at, uint8_t v) { p[at] = v; }
void put_u32(uint8_t* p, size_t at, uint32_t v) { std::memcpy(p + at, &v, 4); }
void put_u64(uint8_t* p, size_t at, uint64_t v) { std::memcpy(p + at, &v, 8); }
void put_key(uint8_t* p, size_t at, const Key& k) { std::memcpy(p + at, k.bytes.data(), k.bytes.size()); }
Key get_key(const uint8_t* p, size_t at) {
  Key k;
  std::memcpy(k.bytes.data(), p + at, k.bytes.size());
  return k;
}
uint32_t get_u32(const uint8_t* p, size_t at) {
  uint32_t v;
  std::memcpy(&v, p + at, 4);
  return v;
}
uint64_t get_u64(const uint8_t* p, size_t at) {
  uint64_t v;
  std::memcpy(&v, p + at, 8);
  return v;
}

uint64_t payload_size(const Object& o) {
  uint64_t n = 8ull * o.parts.size() + 4ull * o.tokens.size();
  for (const auto& p : o.parts) n += p.size();
  return n;
}

// Bytes of one value of a part, by the header's dtype byte: 1 f32, 2 bf16;
// 0 for any other byte.
uint64_t value_bytes(uint8_t dtype) {
  if (dtype == static_cast<uint8_t>(DType::kF32)) return 4;
  if (dtype == static_cast<uint8_t>(DType::kBF16)) return 2;
  return 0;
}

// Copies n 4-byte values out of a file image in one pass when the bytes are
// aligned for T (the tier's read buffers are); otherwise through memcpy.
template <typename T>
void copy_values(const uint8_t* src, uint64_t n, std::vector<T>* out) {
  static_assert(sizeof(T) == 4);
  if (reinterpret_cast<uintptr_t>(src) % alignof(T) == 0) {
    const T* first = reinterpret_cast<const T*>(src);
    out->assign(first, first + n);
  } else {
    out->resize(n);
    if (n) std::memcpy(out->data(), src, 4 * n);
  }
}

}  // namespace

uint64_t schema_digest(const StateSchema& schema) {
  std::string d = schema.describe();
  uint64_t h = XXH3_64bits(d.data(), d.size());
  return h == 0 ? 1 : h;  // 0 means "no schema"
}

uint64_t encoded_size(const Object& object) { return kObjectHeaderBytes + payload_size(object); }

std::vector<uint8_t> encode_object(const Object& o, Retention retention, uint64_t digest) {
  const uint64_t payload = payload_size(o);
  std::vector<uint8_t> out(kObjectHeaderBytes + payload, 0);
  uint8_t* h = out.data();
  uint8_t* p = h + kObjectHeaderBytes;
  size_t at = 0;
  const size_t value = dtype_size(o.dtype);
  for (const auto& part : o.parts) {
    put_u64(p, at, part.size() / value);  // values, not bytes
    at += 8;
  }
  if (!o.tokens.empty()) std::memcpy(p + at, o.tokens.data(), 4 * o.tokens.size());
  at += 4 * o.tokens.size();
  for (const auto& part : o.parts) {
    if (!part.empty()) std::memcpy(p + at, part.data(), part.size());
    at += part.size();
  }
  std::memcpy(h, kObjectMagic, 8);
  put_u32(h, 8, kObjectFormatVersion);
  put_u32(h, 12, 0);  // incompatible flags
  put_u8(h, 16, static_cast<uint8_t>(o.kind));
  put_u8(h, 17, static_cast<uint8_t>(retention));
  put_u8(h, 18, static_cast<uint8_t>(o.dtype));
  put_u8(h, 19, 0);
  put_u32(h, 20, 0);  // compatible flags
  put_key(h, 24, o.key);
  put_key(h, 56, o.parent);
  put_u64(h, 88, static_cast<uint64_t>(o.position));
  put_u32(h, 96, static_cast<uint32_t>(o.tokens.size()));
  put_u32(h, 100, static_cast<uint32_t>(o.parts.size()));
  put_u64(h, 104, payload);
  put_u64(h, 112, digest);
  put_u64(h, 120, XXH3_64bits(p, payload));
  put_u64(h, kHeaderChecksumAt, XXH3_64bits(h, kHeaderChecksumAt));
  return out;
}

Status decode_header(std::span<const uint8_t> bytes, ObjectHeader* out) {
  if (bytes.size() < kObjectHeaderBytes)
    return Status::corruption("object header truncated: " + std::to_string(bytes.size()) + " bytes");
  const uint8_t* h = bytes.data();
  if (std::memcmp(h, kObjectMagic, 8) != 0) return Status::corruption("bad magic: not a statebank object");
  ObjectHeader r;
  r.version = get_u32(h, 8);
  r.incompat_flags = get_u32(h, 12);
  // A newer writer may have changed everything after the version, the
  // header checksum included: judge nothing else.
  if (r.version > kObjectFormatVersion)
    return Status::unsupported("object format version " + std::to_string(r.version) + " is newer than this reader (" +
                               std::to_string(kObjectFormatVersion) + ")");
  if (r.version < kObjectFormatVersion)
    return Status::corruption("object format version " + std::to_string(r.version) + " where version " +
                              std::to_string(kObjectFormatVersion) + " files live");
  if (XXH3_64bits(h, kHeaderChecksumAt) != get_u64(h, kHeaderChecksumAt))
    return Status::corruption("header checksum mismatch");
  if (r.incompat_flags != 0)
    return Status::unsupported("unknown incompatible flags " + std::to_string(r.incompat_flags));
  uint8_t kind = h[16], retention = h[17];
  r.dtype = h[18];
  r.compat_flags = get_u32(h, 20);
  if (kind != static_cast<uint8_t>(ObjectKind::kBlock) && kind != static_cast<uint8_t>(ObjectKind::kSnapshot))
    return Status::corruption("bad object kind " + std::to_string(kind));
  if (retention > static_cast<uint8_t>(Retention::kAnchor)) return Status::corruption("bad retention " + std::to_string(retention));
  const uint64_t value = value_bytes(r.dtype);
  if (value == 0) return Status::corruption("bad dtype " + std::to_string(r.dtype));
  if (h[19] != 0) return Status::corruption("reserved byte 19 is not zero");
  r.kind = static_cast<ObjectKind>(kind);
  r.retention = static_cast<Retention>(retention);
  r.key = get_key(h, 24);
  r.parent = get_key(h, 56);
  r.position = static_cast<int64_t>(get_u64(h, 88));
  r.n_tokens = get_u32(h, 96);
  r.n_parts = get_u32(h, 100);
  r.payload_bytes = get_u64(h, 104);
  r.schema_digest = get_u64(h, 112);
  r.payload_checksum = get_u64(h, 120);
  if (r.position < 0) return Status::corruption("negative position");
  if (r.n_parts > kMaxParts) return Status::corruption("too many parts: " + std::to_string(r.n_parts));
  if (r.n_tokens > kMaxTokens) return Status::corruption("too many tokens: " + std::to_string(r.n_tokens));
  if (r.payload_bytes > kMaxPayloadBytes) return Status::corruption("payload too large");
  const uint64_t fixed = 8ull * r.n_parts + 4ull * r.n_tokens;
  if (r.payload_bytes < fixed || (r.payload_bytes - fixed) % value != 0)
    return Status::corruption("payload size " + std::to_string(r.payload_bytes) + " does not fit the part and token counts");
  if (r.kind == ObjectKind::kSnapshot && (r.n_tokens != 0 || r.parent != Key{}))
    return Status::corruption("snapshot with tokens or a parent");
  if (r.kind == ObjectKind::kBlock && r.n_tokens == 0) return Status::corruption("block without tokens");
  *out = r;
  return Status::ok();
}

Status decode_object(std::span<const uint8_t> bytes, ObjectHeader* header, Object* out) {
  ObjectHeader h;
  SB_RETURN_IF_ERROR(decode_header(bytes, &h));
  if (bytes.size() != h.file_bytes())
    return Status::corruption("file is " + std::to_string(bytes.size()) + " bytes, header says " +
                              std::to_string(h.file_bytes()));
  const uint8_t* p = bytes.data() + kObjectHeaderBytes;
  if (XXH3_64bits(p, h.payload_bytes) != h.payload_checksum) return Status::corruption("payload checksum mismatch");
  // The checksum matched, but a writer bug could still have produced a table
  // that disagrees with the size: check before trusting it.
  const uint64_t value = value_bytes(h.dtype);  // not 0: decode_header checked
  uint64_t elems = 0;
  std::vector<uint64_t> counts(h.n_parts);
  for (uint32_t i = 0; i < h.n_parts; ++i) {
    counts[i] = get_u64(p, 8ull * i);
    if (counts[i] > h.payload_bytes / value) return Status::corruption("part " + std::to_string(i) + " too large");
    elems += counts[i];
  }
  const uint64_t fixed = 8ull * h.n_parts + 4ull * h.n_tokens;
  if (fixed + value * elems != h.payload_bytes)
    return Status::corruption("part table does not add up to the payload size");
  Object o;
  o.kind = h.kind;
  o.dtype = static_cast<DType>(h.dtype);
  o.key = h.key;
  o.parent = h.parent;
  o.position = h.position;
  size_t at = 8ull * h.n_parts;
  copy_values(p + at, h.n_tokens, &o.tokens);
  at += 4ull * h.n_tokens;
  o.parts.resize(h.n_parts);
  for (uint32_t i = 0; i < h.n_parts; ++i) {
    o.parts[i].assign(p + at, p + at + value * counts[i]);
    at += value * counts[i];
  }
  *header = h;
  *out = std::move(o);
  return Status::ok();
}

Status check_shapes(const Object& o, const StateSchema& schema) {
  std::vector<uint64_t> want;  // bytes per part
  const int64_t end = o.position + static_cast<int64_t>(o.tokens.size());
  for (const auto& c : schema.components) {
    const bool mine = o.kind == ObjectKind::kBlock ? c.kind != ComponentKind::kRecurrent
                                                   : c.kind == ComponentKind::kRecurrent;
    if (!mine) continue;
    if (c.dtype != o.dtype)
      return Status::corruption(std::string("object holds ") + dtype_name(o.dtype) + " values, the schema stores " +
                                c.name + " in " + dtype_name(c.dtype));
    want.push_back(o.kind == ObjectKind::kBlock ? (c.rows_at(end) - c.rows_at(o.position)) * c.row_bytes()
                                                : c.row_bytes());
  }
  if (want.size() != o.parts.size())
    return Status::corruption("object has " + std::to_string(o.parts.size()) + " parts, the schema wants " +
                              std::to_string(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    if (o.parts[i].size() != want[i])
      return Status::corruption("part " + std::to_string(i) + " holds " + std::to_string(o.parts[i].size()) +
                                " bytes, the schema wants " + std::to_string(want[i]));
  return Status::ok();
}

const char* kind_tag(ObjectKind kind) { return kind == ObjectKind::kBlock ? "block" : "snapshot"; }

static const char* kind_ext(ObjectKind kind) { return kind == ObjectKind::kBlock ? ".blk" : ".snp"; }

std::string object_file_name(ObjectKind kind, const Key& key) { return key.hex() + kind_ext(kind); }

NameType parse_object_file_name(std::string_view name, ObjectKind* kind, Key* key) {
  if (name.size() < 68 || !Key::from_hex(name.substr(0, 64), key)) return NameType::kForeign;
  std::string_view ext = name.substr(64, 4);
  if (ext == ".blk")
    *kind = ObjectKind::kBlock;
  else if (ext == ".snp")
    *kind = ObjectKind::kSnapshot;
  else
    return NameType::kForeign;
  if (name.size() == 68) return NameType::kObject;
  if (name.substr(68, 5) == ".tmp-") return NameType::kTemporary;
  return NameType::kForeign;
}

}  // namespace sb
