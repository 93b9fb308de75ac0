// Fs: every file-system call the bank makes goes through this one interface,
// so tests can swap in one that injects faults (tests/util/fault_fs.h).
//
// Contract:
//  1. Paths are used exactly as given; an Fs never builds, expands or
//     resolves a path of its own. Callers build every path from a root they
//     were given plus names they generated (the bank: hex keys).
//  2. Errors come back as Status: kNotFound for a missing path,
//     kResourceExhausted for a full disk (ENOSPC, EDQUOT), kIoError for the
//     rest, each with the path and the OS message.
//  3. Fs objects are thread-safe; a WritableFile or ReadableFile is used by
//     one thread at a time. A FileLock holds its lock until destroyed.
//  4. Nothing is durable until sync() (file data) and sync_dir() (the names in
//     a directory) have returned OK. A failed sync() says nothing about what
//     reached the disk: callers treat the file as lost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace sb {

struct FileInfo {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool is_dir = false;
};

// The size of the file system holding a path, and what an unprivileged
// writer may still use of it (statvfs f_bavail).
struct SpaceInfo {
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
};

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status append(const void* data, size_t n) = 0;
  virtual Status sync() = 0;   // file data and size to stable storage
  virtual Status close() = 0;  // idempotent; the destructor closes silently
};

class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  // Reads up to n bytes at offset into dst; *got < n only at end of file.
  // For a direct-I/O file, dst, offset and n must be multiples of
  // kDirectAlignment (n may run past the end of the file).
  virtual Status read_at(uint64_t offset, void* dst, size_t n, size_t* got) = 0;
  virtual bool direct() const = 0;
};

class FileLock {
 public:
  virtual ~FileLock() = default;
};

constexpr size_t kDirectAlignment = 4096;

class Fs {
 public:
  virtual ~Fs() = default;

  // Creates or truncates `path` for writing. A file created here is private
  // to its owner (posix: mode 0600 at most): bank files hold tenants' tokens.
  virtual Status new_writable(const std::string& path, std::unique_ptr<WritableFile>* out) = 0;
  // Opens `path` for reading. With want_direct the file bypasses the page
  // cache when the file system allows it (check ReadableFile::direct()).
  virtual Status open_readable(const std::string& path, bool want_direct, std::unique_ptr<ReadableFile>* out) = 0;
  virtual Status rename(const std::string& from, const std::string& to) = 0;
  virtual Status remove(const std::string& path) = 0;
  // Creates one directory, private to its owner (posix: 0700 at most); OK
  // when it exists already (its mode is left as it is).
  virtual Status mkdir(const std::string& path) = 0;
  // Removes one empty directory.
  virtual Status remove_dir(const std::string& path) = 0;
  virtual Status sync_dir(const std::string& path) = 0;
  // Names in a directory, without "." and "..", in no particular order.
  virtual Status list(const std::string& dir, std::vector<std::string>* names) = 0;
  virtual Status stat(const std::string& path, FileInfo* out) = 0;
  // Sets the modification time to now (the bank's persisted access time).
  virtual Status touch(const std::string& path) = 0;
  // Advisory whole-file lock (flock, created if missing, private to its
  // owner). When another open
  // file description holds a conflicting lock: kIoError "held by another
  // process".
  virtual Status lock(const std::string& path, bool exclusive, std::unique_ptr<FileLock>* out) = 0;
  // Drops the file's pages from the page cache (benchmarks; best effort).
  virtual Status drop_cache(const std::string& path) = 0;
  virtual Status space(const std::string& path, SpaceInfo* out) = 0;
};

// The process-wide POSIX file system.
Fs* posix_fs();

// Forwards every call to `base`; a test subclass overrides what it needs.
class ForwardingFs : public Fs {
 public:
  explicit ForwardingFs(Fs* base) : base_(base) {}
  Status new_writable(const std::string& p, std::unique_ptr<WritableFile>* o) override { return base_->new_writable(p, o); }
  Status open_readable(const std::string& p, bool d, std::unique_ptr<ReadableFile>* o) override {
    return base_->open_readable(p, d, o);
  }
  Status rename(const std::string& f, const std::string& t) override { return base_->rename(f, t); }
  Status remove(const std::string& p) override { return base_->remove(p); }
  Status mkdir(const std::string& p) override { return base_->mkdir(p); }
  Status remove_dir(const std::string& p) override { return base_->remove_dir(p); }
  Status sync_dir(const std::string& p) override { return base_->sync_dir(p); }
  Status list(const std::string& d, std::vector<std::string>* n) override { return base_->list(d, n); }
  Status stat(const std::string& p, FileInfo* o) override { return base_->stat(p, o); }
  Status touch(const std::string& p) override { return base_->touch(p); }
  Status lock(const std::string& p, bool e, std::unique_ptr<FileLock>* o) override { return base_->lock(p, e, o); }
  Status drop_cache(const std::string& p) override { return base_->drop_cache(p); }
  Status space(const std::string& p, SpaceInfo* o) override { return base_->space(p, o); }

 protected:
  Fs* base() const { return base_; }

 private:
  Fs* base_;
};

// Reads a whole small file (tests, tools).
Status read_whole_file(Fs* fs, const std::string& path, std::string* out);
// Writes a whole file without syncing (tests, tools).
Status write_whole_file(Fs* fs, const std::string& path, const std::string& data);

}  // namespace sb
