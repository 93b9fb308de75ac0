#include "bank/ssd_versions.h"

#include <cstdlib>

#include "bank/format.h"

namespace sb {
namespace {

bool all_hex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return !s.empty();
}

// Version 1 named objects "<32 hex>.blk|.snp", temporaries "<that>.tmp-*".
bool is_v1_name(std::string_view name) {
  if (name.size() < 36 || !all_hex(name.substr(0, 32))) return false;
  const auto ext = name.substr(32, 4);
  if (ext != ".blk" && ext != ".snp") return false;
  return name.size() == 36 || name.substr(36, 5) == ".tmp-";
}

// Counts (and with `remove`, deletes) the version-1 files under `sub` of
// dir: fan-out directories of objects/, or quarantine/ itself.
Status walk_v1(Fs* fs, const std::string& dir, bool remove, OtherVersions* found, V1Removal* removed) {
  auto file = [&](const std::string& path, bool ours) -> Status {
    FileInfo info;
    if (!fs->stat(path, &info).is_ok() || info.is_dir || !ours) {
      if (removed) removed->left.push_back(path);
      return Status::ok();
    }
    if (found) {
      ++found->v1_files;
      found->v1_bytes += info.size;
    }
    if (remove) {
      Status s = fs->remove(path);
      if (!s.is_ok()) return s;
      ++removed->files;
      removed->bytes += info.size;
    }
    return Status::ok();
  };
  const std::string objects = dir + "/objects", quarantine = dir + "/quarantine";
  std::vector<std::string> subs;
  if (fs->list(objects, &subs).is_ok()) {
    for (const auto& sub : subs) {
      const std::string sub_dir = objects + "/" + sub;
      std::vector<std::string> names;
      if (sub.size() != 2 || !all_hex(sub) || !fs->list(sub_dir, &names).is_ok()) {
        if (removed) removed->left.push_back(sub_dir);
        continue;
      }
      for (const auto& n : names) SB_RETURN_IF_ERROR(file(sub_dir + "/" + n, is_v1_name(n) && n.substr(0, 2) == sub));
      if (remove) (void)fs->remove_dir(sub_dir);  // fails, and stays, when something foreign is left
    }
    if (remove) (void)fs->remove_dir(objects);
  }
  std::vector<std::string> q;
  if (fs->list(quarantine, &q).is_ok()) {
    for (const auto& n : q) SB_RETURN_IF_ERROR(file(quarantine + "/" + n, true));
    if (remove) (void)fs->remove_dir(quarantine);
  }
  return Status::ok();
}

}  // namespace

Status find_other_versions(Fs* fs, const std::string& dir, OtherVersions* out) {
  *out = OtherVersions{};
  std::vector<std::string> top;
  if (!fs->list(dir, &top).is_ok()) return Status::ok();
  for (const auto& name : top) {
    if (name.size() >= 2 && name[0] == 'v' && name.find_first_not_of("0123456789", 1) == std::string::npos &&
        std::strtoull(name.c_str() + 1, nullptr, 10) > kObjectFormatVersion)
      out->newer.push_back(name);
  }
  return walk_v1(fs, dir, false, out, nullptr);
}

Status remove_v1_bank(Fs* fs, const std::string& dir, V1Removal* out) {
  *out = V1Removal{};
  return walk_v1(fs, dir, true, nullptr, out);
}

}  // namespace sb
