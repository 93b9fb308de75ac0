// Chain keys (docs/bank.md, "Keys").
//
//   K0     = H(format version, model fingerprint, namespace, block tokens)
//   K(k+1) = H(K(k), token ids of block k)
//
// H is SHA-256 (libcrypto) over tagged, length-prefixed fields, and a key is
// all 256 bits of it. A key names a whole prefix, and clients choose the
// tokens: a hash made to resist crafted collisions is what keeps one
// conversation's state from being filed under another's name. The stored
// tokens and parent of a block catch a collision at that block's own level,
// but nothing stored can reveal a collision further up a chain, nor one on
// a snapshot's name (snapshots carry no tokens); there only H stands
// (tests/engine/key_collision_test.cpp shows which is which).
//
// Every field is written as one tag byte, a little-endian u64 byte length,
// then the bytes, after a domain field naming the key's kind, so no two
// different field lists hash the same bytes (a namespace equal to a
// fingerprint still gives another key).
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
