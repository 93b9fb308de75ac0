// HmacSha256: HMAC-SHA-256 (RFC 2104) through OpenSSL's libcrypto (EVP_MAC),
// for values another party can write (the remote tier's Redis values): an
// unkeyed checksum proves nothing there, a keyed MAC does.
//
// Incremental: update() any number of times, then finish() once. An object is
// used by one thread at a time; separate objects are independent.
#pragma once

#include <cstddef>
#include <string_view>

#include "common/sha256.h"

namespace sb {

class HmacSha256 {
 public:
  // REQUIRES: !key.empty().
  explicit HmacSha256(std::string_view key);
  ~HmacSha256();
  HmacSha256(const HmacSha256&) = delete;
  HmacSha256& operator=(const HmacSha256&) = delete;

  void update(const void* data, size_t n);
  // The tag of everything given since construction. Call once.
  Sha256Digest finish();

 private:
  void* ctx_;  // EVP_MAC_CTX
};

// Compares two tags in time that does not depend on where they differ.
bool same_tag(const uint8_t* a, const uint8_t* b, size_t n);

}  // namespace sb
