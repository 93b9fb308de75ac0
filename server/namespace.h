// Tenant namespaces for the bank (bank.md, "Keys": the namespace is inside
// the root of every chain key, so two namespaces never share state).
//
//  - With an API key configured, the namespace is derived from the key the
//    request authenticated with: a SHA-256 digest, never the key itself, so the
//    key never reaches the bank's files. A request's cache_salt subdivides it.
//  - Without a key, the namespace is the cache_salt alone; no salt is the
//    empty (single-user) namespace.
// Every part is tagged and length-prefixed, so a salt can never spell a key
// digest or another salt ("k64:<digest>" vs "s<len>:<salt>").
// Pure function; safe from any thread.
#pragma once

#include <string>

namespace sb {

std::string derive_namespace(bool key_configured, const std::string& api_key, bool has_salt, const std::string& cache_salt);

// Constant-time comparison of a presented key with the configured one.
bool api_key_matches(const std::string& presented, const std::string& configured);

}  // namespace sb
