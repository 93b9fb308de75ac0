// GgufFile::join_shards (gguf/gguf.h): a model that llama.cpp's gguf-split
// cut into shards, named PREFIX-%05d-of-%05d.gguf from 1, read as one file.
#include <cstdio>

#include "gguf/gguf.h"

namespace sb {
namespace {

// gguf-split's suffix of shard `no` (from 0) of `count`.
std::string shard_suffix(int64_t no, int64_t count) {
  char s[40];
  std::snprintf(s, sizeof s, "-%05lld-of-%05lld.gguf", static_cast<long long>(no + 1), static_cast<long long>(count));
  return s;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The shard's split.no and split.count, checked against what its name says.
Status check_shard(const GgufFile& g, int64_t no, int64_t count) {
  int64_t has_no = -1, has_count = -1;
  SB_RETURN_IF_ERROR(g.get_int(kGgufSplitNo, &has_no));
  SB_RETURN_IF_ERROR(g.get_int(kGgufSplitCount, &has_count));
  if (has_no != no || has_count != count)
    return Status::corruption("file " + g.file() + " says it is shard " + std::to_string(has_no + 1) + " of " +
                              std::to_string(has_count) + ", its name shard " + std::to_string(no + 1) + " of " +
                              std::to_string(count));
  return Status::ok();
}

}  // namespace

Status GgufFile::join_shards(int64_t count, XXH3_state_t* hash) {
  if (count < 1 || count > 99999)
    return Status::corruption("file " + file_ + ": split.count " + std::to_string(count) + " is not 1 to 99999");
  int64_t no = -1;
  SB_RETURN_IF_ERROR(get_int(kGgufSplitNo, &no));
  if (no != 0) {
    const std::string own = shard_suffix(no, count), first = shard_suffix(0, count);
    const std::string named = ends_with(file_, own) ? file_.substr(0, file_.size() - own.size()) + first : first;
    return Status::invalid("file " + file_ + " is shard " + std::to_string(no + 1) + " of " + std::to_string(count) +
                           " of a split model: open its first shard, " + named);
  }
  const std::string first = shard_suffix(0, count);
  if (!ends_with(file_, first))
    return Status::invalid("file " + file_ + " is the first of " + std::to_string(count) +
                           " shards, so its name must end in " + first + " (as gguf-split names them)");
  SB_RETURN_IF_ERROR(check_shard(*this, 0, count));
  const std::string prefix = file_.substr(0, file_.size() - first.size());
  for (int64_t i = 1; i < count; ++i) {
    std::unique_ptr<GgufFile> shard;
    SB_RETURN_IF_ERROR(open_one(prefix + shard_suffix(i, count), &shard));  // its error names the shard's path
    SB_RETURN_IF_ERROR(check_shard(*shard, i, count));
    for (auto& [name, view] : shard->tensors_)
      if (!tensors_.emplace(name, view).second)
        return Status::corruption("tensor " + name + " is in both " + shard->file() + " and an earlier shard of " +
                                  file_);
    if (hash) SB_RETURN_IF_ERROR(hash_file(shard->file(), shard->mappings_[0]->size(), hash));
    mappings_.push_back(std::move(shard->mappings_[0]));
  }
  int64_t total = -1;
  SB_RETURN_IF_ERROR(get_int(kGgufSplitTensorsCount, &total));
  if (total != static_cast<int64_t>(tensors_.size()))
    return Status::corruption("the " + std::to_string(count) + " shards of " + file_ + " hold " +
                              std::to_string(tensors_.size()) + " tensors, split.tensors.count says " +
                              std::to_string(total));
  return Status::ok();
}

}  // namespace sb
