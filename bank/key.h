// Chain keys (docs/bank.md, "Keys").
//
//   K0     = H(format version, model fingerprint, namespace, block tokens)
//   K(k+1) = H(K(k), token ids of block k)
//
// H is XXH3-128 over tagged, length-prefixed fields, so no two different
// field lists can hash the same bytes (a namespace equal to a fingerprint
// still gives another key).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace sb {

struct Key {
  uint64_t hi = 0;
  uint64_t lo = 0;
  bool operator==(const Key&) const = default;
  auto operator<=>(const Key&) const = default;
  std::string hex() const;  // 32 lowercase hex digits
  static bool from_hex(const std::string& text, Key* out);
};

struct KeyHash {
  size_t operator()(const Key& k) const { return static_cast<size_t>(k.lo ^ (k.hi * 0x9e3779b97f4a7c15ULL)); }
};

constexpr uint32_t kBankFormatVersion = 1;

Key root_key(uint32_t format_version, const std::string& model_fingerprint, const std::string& name_space,
             uint32_t block_tokens);
Key chain_key(const Key& parent, std::span<const int32_t> block_tokens);

}  // namespace sb
