#include "server/namespace.h"

#include <openssl/evp.h>

#include <stdexcept>

namespace sb {

namespace {

std::string sha256_hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

}  // namespace

std::string derive_namespace(bool key_configured, const std::string& api_key, bool has_salt, const std::string& cache_salt) {
  std::string ns;
  if (key_configured) {
    // The domain tag keeps this digest apart from any other use of the key.
    std::string digest = sha256_hex(std::string("statebank-namespace-v1\0", 23) + api_key);
    ns = "k" + std::to_string(digest.size()) + ":" + digest;
  }
  if (has_salt) ns += "s" + std::to_string(cache_salt.size()) + ":" + cache_salt;
  return ns;
}

bool api_key_matches(const std::string& presented, const std::string& configured) {
  // Compare digests so the time taken depends on neither length nor content.
  std::string a = sha256_hex(presented), b = sha256_hex(configured);
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace sb
