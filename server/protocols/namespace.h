// Tenants, their API keys and their bank namespaces (docs/bank.md, "Tenants";
// the namespace is inside the root of every chain key, so two namespaces
// never share state).
//  - ApiKeys: the configured keys, each naming its tenant; only SHA-256
//    digests are kept, and a presented key is compared with every one of them
//    in constant time;
//  - request_namespace(): the tenant's part (with keys), then the
//    cache_salt's, each tagged and length-prefixed so a salt never spells a
//    tenant or another salt; it follows the tenant, not the key;
//  - the shared namespace (--shared-namespace TENANT): one tenant's unsalted
//    namespace every tenant may restore from but only it publishes to; a
//    side channel, so for public text only.
// Pure functions and an immutable ApiKeys after loading; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"

namespace sb {

struct Tenant {
  std::string name;
  bool admin = false;  // may use the bank admin routes
};

class ApiKeys {
 public:
  // Reads `path`: one key per line, "TENANT KEY" or "TENANT KEY admin",
  // separated by spaces or tabs; blank lines and lines starting with '#'
  // are skipped. TENANT is 1..64 of [A-Za-z0-9._-]; KEY is 16..256
  // printable characters without spaces. A key given twice, a malformed
  // line, no key at all, or a file that other users may read or write
  // (mode & 077) is an error naming the file and line.
  static Status load_file(const std::string& path, ApiKeys* out);
  // One key for the tenant "default", admin (--api-key, --api-key-file).
  static ApiKeys single(const std::string& key);

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  bool has_tenant(const std::string& name) const;
  size_t tenant_count() const;  // distinct tenants
  // The tenant whose key was presented, or nullptr.
  const Tenant* find(const std::string& presented) const;

 private:
  struct Entry {
    Sha256Digest digest;
    Tenant tenant;
  };
  std::vector<Entry> entries_;
};

// The bank namespace of a request (see above); tenant is null without keys.
std::string request_namespace(const Tenant* tenant, bool has_salt, const std::string& cache_salt);

}  // namespace sb
