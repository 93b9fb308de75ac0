// The real file system: thin wrappers over POSIX calls that turn errno into
// Status and retry EINTR and short writes.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fs/fs.h"

namespace sb {
namespace {

Status errno_status(const std::string& what, const std::string& path, int err) {
  std::string m = what + " " + path + ": " + std::strerror(err);
  if (err == ENOENT) return Status::not_found(m);
  if (err == ENOSPC || err == EDQUOT) return Status::exhausted(m);
  return Status::io_error(m);
}

class PosixWritable : public WritableFile {
 public:
  PosixWritable(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritable() override {
    if (fd_ >= 0) ::close(fd_);
  }
  Status append(const void* data, size_t n) override {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return errno_status("write", path_, errno);
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    return Status::ok();
  }
  Status sync() override {
    if (::fdatasync(fd_) != 0) return errno_status("fsync", path_, errno);
    return Status::ok();
  }
  Status close() override {
    if (fd_ < 0) return Status::ok();
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return errno_status("close", path_, errno);
    return Status::ok();
  }

 private:
  std::string path_;
  int fd_;
};

class PosixReadable : public ReadableFile {
 public:
  PosixReadable(std::string path, int fd, bool direct) : path_(std::move(path)), fd_(fd), direct_(direct) {}
  ~PosixReadable() override { ::close(fd_); }
  Status read_at(uint64_t offset, void* dst, size_t n, size_t* got) override {
    char* p = static_cast<char*>(dst);
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return errno_status("read", path_, errno);
      }
      if (r == 0) break;
      done += static_cast<size_t>(r);
      // A direct read may stop short only at the end of the file; keep the
      // next request aligned by stopping at an unaligned count.
      if (direct_ && done % kDirectAlignment != 0) break;
    }
    *got = done;
    return Status::ok();
  }
  bool direct() const override { return direct_; }

 private:
  std::string path_;
  int fd_;
  bool direct_;
};

class PosixLock : public FileLock {
 public:
  explicit PosixLock(int fd) : fd_(fd) {}
  ~PosixLock() override {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }

 private:
  int fd_;
};

class PosixFs : public Fs {
 public:
  Status new_writable(const std::string& path, std::unique_ptr<WritableFile>* out) override {
    // Private (docs/bank-format.md, "Directory"): block files hold tenants' token ids.
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return errno_status("create", path, errno);
    *out = std::make_unique<PosixWritable>(path, fd);
    return Status::ok();
  }
  Status open_readable(const std::string& path, bool want_direct, std::unique_ptr<ReadableFile>* out) override {
    int fd = -1;
    bool direct = false;
    if (want_direct) {
      fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
      direct = fd >= 0;
      // EINVAL: the file system has no direct I/O (tmpfs); read buffered.
      if (fd < 0 && errno != EINVAL) return errno_status("open", path, errno);
    }
    if (fd < 0) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno_status("open", path, errno);
    *out = std::make_unique<PosixReadable>(path, fd, direct);
    return Status::ok();
  }
  Status rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return errno_status("rename", from + " -> " + to, errno);
    return Status::ok();
  }
  Status remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return errno_status("remove", path, errno);
    return Status::ok();
  }
  Status mkdir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0700) == 0) return Status::ok();
    int err = errno;
    struct stat st;
    if (err == EEXIST && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Status::ok();
    return errno_status("mkdir", path, err);
  }
  Status remove_dir(const std::string& path) override {
    if (::rmdir(path.c_str()) != 0) return errno_status("remove directory", path, errno);
    return Status::ok();
  }
  Status space(const std::string& path, SpaceInfo* out) override {
    struct statvfs v;
    if (::statvfs(path.c_str(), &v) != 0) return errno_status("statvfs", path, errno);
    out->total_bytes = static_cast<uint64_t>(v.f_blocks) * v.f_frsize;
    out->free_bytes = static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
    return Status::ok();
  }
  Status sync_dir(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno_status("open directory", path, errno);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) return errno_status("fsync directory", path, err);
    return Status::ok();
  }
  Status list(const std::string& dir, std::vector<std::string>* names) override {
    names->clear();
    DIR* d = ::opendir(dir.c_str());
    if (!d) return errno_status("list", dir, errno);
    while (struct dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      names->emplace_back(e->d_name);
    }
    ::closedir(d);
    return Status::ok();
  }
  Status stat(const std::string& path, FileInfo* out) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return errno_status("stat", path, errno);
    out->size = static_cast<uint64_t>(st.st_size);
    out->mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
    out->is_dir = S_ISDIR(st.st_mode);
    return Status::ok();
  }
  Status touch(const std::string& path) override {
    if (::utimensat(AT_FDCWD, path.c_str(), nullptr, 0) != 0) return errno_status("touch", path, errno);
    return Status::ok();
  }
  Status lock(const std::string& path, bool exclusive, std::unique_ptr<FileLock>* out) override {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 && !exclusive) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno_status("open lock file", path, errno);
    if (::flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
      int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK) return Status::io_error(path + " is held by another process");
      return errno_status("lock", path, err);
    }
    *out = std::make_unique<PosixLock>(fd);
    return Status::ok();
  }
  Status drop_cache(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno_status("open", path, errno);
    int rc = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
    if (rc != 0) return errno_status("fadvise", path, rc);
    return Status::ok();
  }
};

}  // namespace

Fs* posix_fs() {
  static PosixFs fs;
  return &fs;
}

Status read_whole_file(Fs* fs, const std::string& path, std::string* out) {
  std::unique_ptr<ReadableFile> f;
  SB_RETURN_IF_ERROR(fs->open_readable(path, false, &f));
  FileInfo info;
  SB_RETURN_IF_ERROR(fs->stat(path, &info));
  out->assign(info.size, '\0');
  size_t got = 0;
  SB_RETURN_IF_ERROR(f->read_at(0, out->data(), out->size(), &got));
  out->resize(got);
  return Status::ok();
}

Status write_whole_file(Fs* fs, const std::string& path, const std::string& data) {
  std::unique_ptr<WritableFile> f;
  SB_RETURN_IF_ERROR(fs->new_writable(path, &f));
  SB_RETURN_IF_ERROR(f->append(data.data(), data.size()));
  return f->close();
}

}  // namespace sb
