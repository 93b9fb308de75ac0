// Chain keys (docs/bank.md, "Keys"):
//   K0     = H(format version, model fingerprint, namespace, block tokens)
//   K(k+1) = H(K(k), token ids of block k)
// H is SHA-256 (libcrypto) over a domain field naming the key's kind, then
// fields each written as a tag byte, a little-endian u64 length and the
// bytes, so no two different field lists hash the same bytes; a key is all
// 256 bits. Clients choose the tokens, so only a hash that resists crafted
// collisions keeps one conversation's state from another's name (what stored
// tokens catch and where only H stands: docs/bank.md, "Keys").
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace sb {

struct Key {
  std::array<uint8_t, 32> bytes{};
  bool operator==(const Key&) const = default;
  auto operator<=>(const Key&) const = default;
  std::string hex() const;  // 64 lowercase hex digits, bytes in order
  // Exactly 64 lowercase hex digits (the form file names use).
  static bool from_hex(std::string_view text, Key* out);
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t w[4];
    std::memcpy(w, k.bytes.data(), sizeof w);
    return static_cast<size_t>((w[0] ^ w[2]) + (w[1] ^ w[3]) * 0x9e3779b97f4a7c15ULL);
  }
};

// Version 2: SHA-256 keys of 256 bits (version 1 used XXH3-128).
constexpr uint32_t kBankFormatVersion = 2;

Key root_key(uint32_t format_version, const std::string& model_fingerprint, const std::string& name_space,
             uint32_t block_tokens);
Key chain_key(const Key& parent, std::span<const int32_t> block_tokens);

}  // namespace sb
