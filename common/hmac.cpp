#include "common/hmac.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <cstdio>
#include <cstdlib>

namespace sb {
namespace {

EVP_MAC* hmac_mac() {
  static EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  return mac;
}

// As for SHA-256 (common/sha256.cpp): libcrypto fails here only without
// memory or its default provider; nothing can be authenticated then.
[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "statebank: %s failed in libcrypto\n", what);
  std::abort();
}

}  // namespace

HmacSha256::HmacSha256(std::string_view key) : ctx_(hmac_mac() ? EVP_MAC_CTX_new(hmac_mac()) : nullptr) {
  if (ctx_ == nullptr || key.empty()) die("HMAC-SHA-256 init");
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(static_cast<EVP_MAC_CTX*>(ctx_), reinterpret_cast<const unsigned char*>(key.data()), key.size(),
                   params) != 1)
    die("HMAC-SHA-256 init");
}

HmacSha256::~HmacSha256() { EVP_MAC_CTX_free(static_cast<EVP_MAC_CTX*>(ctx_)); }

void HmacSha256::update(const void* data, size_t n) {
  if (n != 0 && EVP_MAC_update(static_cast<EVP_MAC_CTX*>(ctx_), static_cast<const unsigned char*>(data), n) != 1)
    die("HMAC-SHA-256 update");
}

Sha256Digest HmacSha256::finish() {
  Sha256Digest d{};
  size_t n = 0;
  if (EVP_MAC_final(static_cast<EVP_MAC_CTX*>(ctx_), d.data(), &n, d.size()) != 1 || n != d.size())
    die("HMAC-SHA-256 final");
  return d;
}

bool same_tag(const uint8_t* a, const uint8_t* b, size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }

}  // namespace sb
