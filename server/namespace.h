// Tenants, their API keys and their bank namespaces (docs/bank.md, "Keys":
// the namespace is inside the root of every chain key, so two namespaces
// never share state).
//
//  - ApiKeys: the configured keys, each naming its tenant. `--api-keys-file`
//    gives many (load_file); `--api-key` / `--api-key-file` give one, for
//    the tenant "default", which is also the admin. Only SHA-256 digests of
//    the keys are kept, and a presented key is compared with every one of
//    them in constant time.
//  - A request's namespace (request_namespace): with keys configured,
//    "t<len>:<tenant>" for the tenant its key names, then, when the body
//    has a cache_salt, "s<len>:<salt>". Without keys: the salt part alone;
//    no salt is the empty (single-user) namespace. Every part is tagged and
//    length-prefixed, so a salt can never spell a tenant or another salt.
//    The namespace follows the tenant, not the key: a tenant's keys (say an
//    old and a new one while rotating) share its cached state.
//  - The shared namespace (opt-in, `--shared-namespace TENANT`): the
//    unsalted namespace of one tenant, which every other tenant may also
//    restore from but never publish to; that tenant's requests publish the
//    public system prompt there. It opens a side channel: a tenant learns,
//    from cached_tokens, restore.mode and timings, whether a prefix is in
//    the shared namespace and whether other tenants used it recently (it is
//    in RAM rather than on SSD, or was not yet evicted). Put only public
//    text there.
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
