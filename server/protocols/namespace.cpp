#include "server/protocols/namespace.h"

#include <set>

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace sb {
namespace {

// The domain tag keeps this digest apart from any other use of the key.
Sha256Digest key_digest(const std::string& key) { return sha256(std::string("statebank-api-key-v1\0", 21) + key); }

bool valid_tenant(const std::string& t) {
  if (t.empty() || t.size() > 64) return false;
  for (char c : t)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
      return false;
  return true;
}

bool valid_key(const std::string& k) {
  if (k.size() < 16 || k.size() > 256) return false;
  for (unsigned char c : k)
    if (c <= 0x20 || c >= 0x7f) return false;
  return true;
}

}  // namespace

Status ApiKeys::load_file(const std::string& path, ApiKeys* out) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::io_error("cannot read --api-keys-file " + path);
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::invalid("--api-keys-file " + path + " may be read or written by other users (mode " + mode +
                           "); chmod 600 it");
  }
  std::ifstream in(path);
  if (!in) return Status::io_error("cannot read --api-keys-file " + path);
  ApiKeys keys;
  std::vector<int> line_of;  // per entry, for duplicate messages
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = path + ":" + std::to_string(n) + ": ";
    std::istringstream words(line);
    std::string tenant, key, role, extra;
    words >> tenant;
    if (tenant.empty() || tenant[0] == '#') continue;
    words >> key >> role >> extra;
    if (key.empty() || !extra.empty() || (!role.empty() && role != "admin"))
      return Status::invalid(where + "expected 'TENANT KEY' or 'TENANT KEY admin'");
    if (!valid_tenant(tenant))
      return Status::invalid(where + "tenant names are 1 to 64 letters, digits, '.', '_' or '-'");
    if (!valid_key(key)) return Status::invalid(where + "keys are 16 to 256 printable characters without spaces");
    const Sha256Digest d = key_digest(key);
    for (size_t i = 0; i < keys.entries_.size(); ++i)
      if (keys.entries_[i].digest == d)
        return Status::invalid(where + "this key is already given on line " + std::to_string(line_of[i]) +
                               " (to tenant " + keys.entries_[i].tenant.name + ")");
    keys.entries_.push_back(Entry{d, Tenant{tenant, role == "admin"}});
    line_of.push_back(n);
  }
  if (keys.entries_.empty()) return Status::invalid("--api-keys-file " + path + " holds no keys");
  *out = std::move(keys);
  return Status::ok();
}

ApiKeys ApiKeys::single(const std::string& key) {
  ApiKeys keys;
  keys.entries_.push_back(Entry{key_digest(key), Tenant{"default", true}});
  return keys;
}

bool ApiKeys::has_tenant(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.tenant.name == name) return true;
  return false;
}

size_t ApiKeys::tenant_count() const {
  std::set<std::string> names;
  for (const auto& e : entries_) names.insert(e.tenant.name);
  return names.size();
}

const Tenant* ApiKeys::find(const std::string& presented) const {
  // Every digest is compared in full, so the time taken says nothing about
  // which key (if any) matched, nor how much of it.
  const Sha256Digest d = key_digest(presented);
  const Tenant* found = nullptr;
  for (const auto& e : entries_) {
    unsigned char diff = 0;
    for (size_t i = 0; i < d.size(); ++i) diff |= static_cast<unsigned char>(d[i] ^ e.digest[i]);
    if (diff == 0) found = &e.tenant;
  }
  return found;
}

std::string request_namespace(const Tenant* tenant, bool has_salt, const std::string& cache_salt) {
  std::string ns;
  if (tenant) ns = "t" + std::to_string(tenant->name.size()) + ":" + tenant->name;
  if (has_salt) ns += "s" + std::to_string(cache_salt.size()) + ":" + cache_salt;
  return ns;
}

}  // namespace sb
