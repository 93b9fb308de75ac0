#include "common/sha256.h"

#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>

namespace sb {
namespace {

// Fetched once: an implicit fetch on every init costs more than hashing one
// 1 KB block of tokens.
const EVP_MD* sha256_md() {
  static const EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md;
}

// libcrypto fails here only without memory or without its default provider:
// nothing can be named safely then, so the process stops.
[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "statebank: %s failed in libcrypto\n", what);
  std::abort();
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr || sha256_md() == nullptr ||
      EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), sha256_md(), nullptr) != 1)
    die("SHA-256 init");
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::update(const void* data, size_t n) {
  if (n != 0 && EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, n) != 1) die("SHA-256 update");
}

Sha256Digest Sha256::finish() {
  Sha256Digest d{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), d.data(), &len) != 1 || len != d.size())
    die("SHA-256 final");
  return d;
}

Sha256Digest sha256(std::string_view data) {
  Sha256 h;
  h.update(data.data(), data.size());
  return h.finish();
}

std::string hex_digest(const Sha256Digest& digest) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * digest.size());
  for (uint8_t b : digest) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

}  // namespace sb
