#include "tests/util/fault_fs.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <chrono>
#include <random>
#include <thread>

namespace sb {
namespace {

std::string parent_dir(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool is_write_path(FaultFs::Op op) {
  switch (op) {
    case FaultFs::Op::kCreate:
    case FaultFs::Op::kAppend:
    case FaultFs::Op::kSync:
    case FaultFs::Op::kClose:
    case FaultFs::Op::kRename:
    case FaultFs::Op::kRemove:
    case FaultFs::Op::kMkdir:
    case FaultFs::Op::kSyncDir:
    case FaultFs::Op::kTouch:
      return true;
    default:
      return false;
  }
}

class FaultWritable : public WritableFile {
 public:
  FaultWritable(FaultFs* fs, std::string path, std::unique_ptr<WritableFile> base)
      : fs_(fs), path_(std::move(path)), base_(std::move(base)) {}
  Status append(const void* data, size_t n) override {
    SB_RETURN_IF_ERROR(fs_->check(FaultFs::Op::kAppend, path_));
    SB_RETURN_IF_ERROR(fs_->reserve_append(path_, n));
    SB_RETURN_IF_ERROR(base_->append(data, n));
    fs_->note_append(path_, n);
    return Status::ok();
  }
  Status sync() override {
    SB_RETURN_IF_ERROR(fs_->check(FaultFs::Op::kSync, path_));
    SB_RETURN_IF_ERROR(base_->sync());
    fs_->note_sync(path_);
    return Status::ok();
  }
  Status close() override {
    if (closed_) return Status::ok();
    closed_ = true;
    Status s = fs_->check(FaultFs::Op::kClose, path_);
    Status c = base_->close();  // the descriptor is released either way
    return s.is_ok() ? c : s;
  }

 private:
  FaultFs* fs_;
  std::string path_;
  std::unique_ptr<WritableFile> base_;
  bool closed_ = false;
};

class FaultReadable : public ReadableFile {
 public:
  FaultReadable(FaultFs* fs, std::string path, std::unique_ptr<ReadableFile> base)
      : fs_(fs), path_(std::move(path)), base_(std::move(base)) {}
  Status read_at(uint64_t offset, void* dst, size_t n, size_t* got) override {
    SB_RETURN_IF_ERROR(fs_->check(FaultFs::Op::kRead, path_));
    return base_->read_at(offset, dst, n, got);
  }
  bool direct() const override { return base_->direct(); }

 private:
  FaultFs* fs_;
  std::string path_;
  std::unique_ptr<ReadableFile> base_;
};

}  // namespace

void FaultFs::kill_at(uint64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  kill_at_ = n;
  write_ops_ = all_ops_ = 0;
}
void FaultFs::fail_at(uint64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  fail_at_ = n;
  fail_hit_ = false;
  write_ops_ = all_ops_ = 0;
}
void FaultFs::set_sync_broken(bool broken) {
  std::lock_guard<std::mutex> l(mu_);
  sync_broken_ = broken;
}
void FaultFs::set_disk_full(bool full) {
  std::lock_guard<std::mutex> l(mu_);
  disk_full_ = full;
}
void FaultFs::set_capacity(uint64_t bytes) {
  std::lock_guard<std::mutex> l(mu_);
  capacity_ = bytes;
}
uint64_t FaultFs::used_bytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return used_;
}
void FaultFs::set_sync_delay_ms(int ms) {
  std::lock_guard<std::mutex> l(mu_);
  sync_delay_ms_ = ms;
}
void FaultFs::clear_faults() {
  std::lock_guard<std::mutex> l(mu_);
  kill_at_ = fail_at_ = write_ops_ = all_ops_ = 0;
  killed_ = fail_hit_ = sync_broken_ = disk_full_ = false;
  sync_delay_ms_ = 0;
}
bool FaultFs::killed() const {
  std::lock_guard<std::mutex> l(mu_);
  return killed_;
}
bool FaultFs::fail_hit() const {
  std::lock_guard<std::mutex> l(mu_);
  return fail_hit_;
}

Status FaultFs::check(Op op, const std::string& path) {
  int delay = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (op == Op::kSync) delay = sync_delay_ms_;
  }
  if (delay) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  std::lock_guard<std::mutex> l(mu_);
  if (killed_) return Status::io_error("simulated crash: process is dead (" + path + ")");
  if (is_write_path(op)) {
    ++write_ops_;
    if (kill_at_ != 0 && write_ops_ == kill_at_) {
      killed_ = true;
      return Status::io_error("simulated crash at write op " + std::to_string(write_ops_) + " (" + path + ")");
    }
  }
  ++all_ops_;
  if (fail_at_ != 0 && all_ops_ == fail_at_) {
    fail_hit_ = true;
    return Status::io_error("injected I/O error at op " + std::to_string(all_ops_) + " (" + path + ")");
  }
  if (sync_broken_ && (op == Op::kSync || op == Op::kSyncDir))
    return Status::io_error("injected fsync failure (" + path + ")");
  if (disk_full_ && op == Op::kAppend) return Status::exhausted("injected ENOSPC: no space left on device (" + path + ")");
  return Status::ok();
}

Status FaultFs::reserve_append(const std::string& path, uint64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  if (capacity_ != 0 && used_ + n > capacity_)
    return Status::exhausted("simulated full disk: no space left on device (" + path + ")");
  return Status::ok();
}

void FaultFs::note_append(const std::string& path, uint64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(path);
  if (it != files_.end()) {
    it->second.size += n;
    used_ += n;
  }
}

void FaultFs::note_sync(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(path);
  if (it != files_.end()) it->second.synced = it->second.size;
}

Status FaultFs::new_writable(const std::string& p, std::unique_ptr<WritableFile>* o) {
  SB_RETURN_IF_ERROR(check(Op::kCreate, p));
  std::unique_ptr<WritableFile> base_file;
  SB_RETURN_IF_ERROR(base()->new_writable(p, &base_file));
  {
    std::lock_guard<std::mutex> l(mu_);
    if (auto old = files_.find(p); old != files_.end()) used_ -= old->second.size;  // truncated
    files_[p] = Track{};
    dir_log_.push_back(DirOp{false, false, parent_dir(p), "", p});
  }
  *o = std::make_unique<FaultWritable>(this, p, std::move(base_file));
  return Status::ok();
}

Status FaultFs::open_readable(const std::string& p, bool d, std::unique_ptr<ReadableFile>* o) {
  SB_RETURN_IF_ERROR(check(Op::kOpen, p));
  std::unique_ptr<ReadableFile> base_file;
  SB_RETURN_IF_ERROR(base()->open_readable(p, d, &base_file));
  *o = std::make_unique<FaultReadable>(this, p, std::move(base_file));
  return Status::ok();
}

Status FaultFs::rename(const std::string& f, const std::string& t) {
  SB_RETURN_IF_ERROR(check(Op::kRename, f));
  SB_RETURN_IF_ERROR(base()->rename(f, t));
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(f);
  if (it != files_.end()) {
    if (auto old = files_.find(t); old != files_.end()) used_ -= old->second.size;  // replaced
    const Track moved = it->second;
    files_.erase(it);
    files_[t] = moved;
  }
  dir_log_.push_back(DirOp{true, false, parent_dir(t), f, t});
  return Status::ok();
}

Status FaultFs::remove(const std::string& p) {
  SB_RETURN_IF_ERROR(check(Op::kRemove, p));
  SB_RETURN_IF_ERROR(base()->remove(p));
  std::lock_guard<std::mutex> l(mu_);
  if (auto it = files_.find(p); it != files_.end()) {
    used_ -= it->second.size;
    files_.erase(it);
  }
  return Status::ok();
}

Status FaultFs::remove_dir(const std::string& p) {
  SB_RETURN_IF_ERROR(check(Op::kRemove, p));
  return base()->remove_dir(p);
}

Status FaultFs::space(const std::string& p, SpaceInfo* o) {
  SB_RETURN_IF_ERROR(check(Op::kStat, p));
  {
    std::lock_guard<std::mutex> l(mu_);
    if (capacity_ != 0) {
      o->total_bytes = capacity_;
      o->free_bytes = capacity_ - std::min(capacity_, used_);
      return Status::ok();
    }
  }
  return base()->space(p, o);
}

Status FaultFs::mkdir(const std::string& p) {
  SB_RETURN_IF_ERROR(check(Op::kMkdir, p));
  FileInfo info;
  const bool existed = base()->stat(p, &info).is_ok();
  SB_RETURN_IF_ERROR(base()->mkdir(p));
  if (!existed) {
    std::lock_guard<std::mutex> l(mu_);
    DirOp op;
    op.is_mkdir = true;
    op.dir = parent_dir(p);
    op.path = p;
    dir_log_.push_back(op);
  }
  return Status::ok();
}

Status FaultFs::sync_dir(const std::string& p) {
  SB_RETURN_IF_ERROR(check(Op::kSyncDir, p));
  SB_RETURN_IF_ERROR(base()->sync_dir(p));
  std::lock_guard<std::mutex> l(mu_);
  std::vector<DirOp> keep;
  for (auto& op : dir_log_)
    if (op.dir != p) keep.push_back(std::move(op));
  dir_log_.swap(keep);
  return Status::ok();
}

Status FaultFs::list(const std::string& d, std::vector<std::string>* n) {
  SB_RETURN_IF_ERROR(check(Op::kList, d));
  return base()->list(d, n);
}
Status FaultFs::stat(const std::string& p, FileInfo* o) {
  SB_RETURN_IF_ERROR(check(Op::kStat, p));
  return base()->stat(p, o);
}
Status FaultFs::touch(const std::string& p) {
  SB_RETURN_IF_ERROR(check(Op::kTouch, p));
  return base()->touch(p);
}
Status FaultFs::lock(const std::string& p, bool e, std::unique_ptr<FileLock>* o) {
  SB_RETURN_IF_ERROR(check(Op::kLock, p));
  return base()->lock(p, e, o);
}

void FaultFs::simulate_crash(CrashMode mode, uint64_t seed) {
  std::lock_guard<std::mutex> l(mu_);
  std::mt19937_64 rng(seed);
  if (mode == CrashMode::kLoseUnsynced) {
    for (auto it = dir_log_.rbegin(); it != dir_log_.rend(); ++it) {
      if (it->is_mkdir) {
        std::error_code ec;
        std::filesystem::remove_all(it->path, ec);
        for (auto f = files_.begin(); f != files_.end();)
          f = f->first.rfind(it->path + "/", 0) == 0 ? files_.erase(f) : std::next(f);
      } else if (it->is_rename) {
        if (::rename(it->path.c_str(), it->from.c_str()) == 0) {
          auto f = files_.find(it->path);
          if (f != files_.end()) {
            files_[it->from] = f->second;
            files_.erase(f);
          }
        }
      } else {
        ::unlink(it->path.c_str());
        files_.erase(it->path);
      }
    }
  }
  for (auto& [path, t] : files_) {
    if (t.size <= t.synced) continue;
    uint64_t keep = t.synced;
    if (mode == CrashMode::kTornKeepNames) keep += rng() % (t.size - t.synced + 1);
    if (::truncate(path.c_str(), static_cast<off_t>(keep)) != 0) continue;
    if (mode == CrashMode::kTornKeepNames && keep > t.synced) {
      if (FILE* f = std::fopen(path.c_str(), "r+b")) {
        uint64_t at = t.synced + rng() % (keep - t.synced);
        std::fseek(f, static_cast<long>(at), SEEK_SET);
        for (int i = 0; i < 8 && at + i < keep; ++i) std::fputc(static_cast<int>(rng() & 0xff), f);
        std::fclose(f);
      }
    }
  }
  files_.clear();
  dir_log_.clear();
  used_ = 0;
}

}  // namespace sb
