// Sha256: SHA-256 through OpenSSL's libcrypto, for everything that names or
// identifies state by content and must hold against a client who chooses the
// content (bank chain keys, the model fingerprint, tenant key digests).
//
// Incremental: update() any number of times, then finish() once. An object is
// used by one thread at a time; separate objects are independent.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sb {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t n);
  // The digest of everything given since construction. Call once.
  Sha256Digest finish();

 private:
  void* ctx_;  // EVP_MD_CTX
};

Sha256Digest sha256(std::string_view data);
// 64 lowercase hex digits.
std::string hex_digest(const Sha256Digest& digest);

}  // namespace sb
