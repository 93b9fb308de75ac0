#include "bank/key.h"

#include <xxhash.h>

#include <cstring>
#include <vector>

namespace sb {
namespace {

// Every field is written as: one tag byte, a little-endian u64 byte length,
// then the bytes. A field list therefore has exactly one encoding, and two
// different lists (or the same values under other tags) never produce the
// same byte string.
class FieldWriter {
 public:
  explicit FieldWriter(const char* domain) { add_bytes('D', domain, std::strlen(domain)); }

  void add_bytes(char tag, const void* data, size_t n) {
    bytes_.push_back(static_cast<uint8_t>(tag));
    put_u64(n);
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  void add_u32(char tag, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
    add_bytes(tag, b, 4);
  }
  void add_key(char tag, const Key& k) {
    uint8_t b[16];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(k.hi >> (8 * i));
    for (int i = 0; i < 8; ++i) b[8 + i] = static_cast<uint8_t>(k.lo >> (8 * i));
    add_bytes(tag, b, 16);
  }
  void add_tokens(char tag, std::span<const int32_t> tokens) {
    bytes_.push_back(static_cast<uint8_t>(tag));
    put_u64(tokens.size() * 4);
    for (int32_t t : tokens) {
      const auto u = static_cast<uint32_t>(t);
      for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<uint8_t>(u >> (8 * i)));
    }
  }
  Key digest() const {
    const XXH128_hash_t h = XXH3_128bits(bytes_.data(), bytes_.size());
    return Key{h.high64, h.low64};
  }

 private:
  void put_u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> bytes_;
};

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string Key::hex() const {
  static const char* digits = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) out[i] = digits[(hi >> (60 - 4 * i)) & 0xf];
  for (int i = 0; i < 16; ++i) out[16 + i] = digits[(lo >> (60 - 4 * i)) & 0xf];
  return out;
}

bool Key::from_hex(const std::string& text, Key* out) {
  if (text.size() != 32) return false;
  uint64_t words[2] = {0, 0};
  for (int i = 0; i < 32; ++i) {
    const int v = hex_value(text[i]);
    if (v < 0) return false;
    words[i / 16] = (words[i / 16] << 4) | static_cast<uint64_t>(v);
  }
  out->hi = words[0];
  out->lo = words[1];
  return true;
}

Key root_key(uint32_t format_version, const std::string& model_fingerprint, const std::string& name_space,
             uint32_t block_tokens) {
  FieldWriter w("statebank.root");
  w.add_u32('V', format_version);
  w.add_bytes('F', model_fingerprint.data(), model_fingerprint.size());
  w.add_bytes('N', name_space.data(), name_space.size());
  w.add_u32('B', block_tokens);
  return w.digest();
}

Key chain_key(const Key& parent, std::span<const int32_t> block_tokens) {
  FieldWriter w("statebank.chain");
  w.add_key('P', parent);
  w.add_tokens('T', block_tokens);
  return w.digest();
}

}  // namespace sb
