#include "bank/key.h"

#include <algorithm>
#include <atomic>
#include <bit>

#include "bank/key_bits.h"
#include "common/sha256.h"

namespace sb {

static_assert(std::endian::native == std::endian::little, "token ids are hashed as their little-endian bytes");

std::atomic<int> g_key_bits_kept{0};

namespace {

// Tagged, length-prefixed fields fed straight into SHA-256 (no buffer).
class FieldHasher {
 public:
  explicit FieldHasher(std::string_view domain) { add('D', domain.data(), domain.size()); }

  void add(char tag, const void* data, uint64_t n) {
    uint8_t head[9];
    head[0] = static_cast<uint8_t>(tag);
    for (int i = 0; i < 8; ++i) head[1 + i] = static_cast<uint8_t>(n >> (8 * i));
    h_.update(head, sizeof head);
    h_.update(data, n);
  }
  void add_u32(char tag, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
    add(tag, b, 4);
  }

  Key finish() {
    Key k;
    k.bytes = h_.finish();
    if (const int bits = g_key_bits_kept.load(std::memory_order_relaxed); bits > 0 && bits < 256) {
      for (int i = 0; i < 32; ++i) {
        const int keep = std::max(0, std::min(8, bits - 8 * i));
        k.bytes[i] &= static_cast<uint8_t>(0xff00 >> keep);
      }
    }
    return k;
  }

 private:
  Sha256 h_;
};

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is not ours: keys are written lower case
}

}  // namespace

std::string Key::hex() const {
  static const char* digits = "0123456789abcdef";
  std::string out(64, '0');
  for (size_t i = 0; i < 32; ++i) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  return out;
}

bool Key::from_hex(std::string_view text, Key* out) {
  if (text.size() != 64) return false;
  Key k;
  for (size_t i = 0; i < 32; ++i) {
    const int a = hex_value(text[2 * i]), b = hex_value(text[2 * i + 1]);
    if (a < 0 || b < 0) return false;
    k.bytes[i] = static_cast<uint8_t>(a << 4 | b);
  }
  *out = k;
  return true;
}

Key root_key(uint32_t format_version, const std::string& model_fingerprint, const std::string& name_space,
             uint32_t block_tokens) {
  FieldHasher h("statebank.root");
  h.add_u32('V', format_version);
  h.add('F', model_fingerprint.data(), model_fingerprint.size());
  h.add('N', name_space.data(), name_space.size());
  h.add_u32('B', block_tokens);
  return h.finish();
}

Key chain_key(const Key& parent, std::span<const int32_t> block_tokens) {
  FieldHasher h("statebank.chain");
  h.add('P', parent.bytes.data(), parent.bytes.size());
  h.add('T', block_tokens.data(), block_tokens.size_bytes());
  return h.finish();
}

}  // namespace sb
