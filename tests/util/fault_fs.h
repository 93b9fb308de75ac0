// FaultFs: a file system for tests that fails on command and can leave behind
// what a crash would leave.
//
// It forwards to a real Fs and counts operations. Faults, each independent:
//  - kill_at(n): the n-th write-path operation from now (create, append,
//    sync, close, rename, remove, mkdir, sync_dir, touch) fails, and so does
//    every operation after it, of any kind: the process is "dead".
//  - fail_at(n): the n-th operation of any kind from now fails once with
//    kIoError.
//  - set_sync_broken(true): every sync() and sync_dir() fails until cleared
//    (a failed fsync that stays failed).
//  - set_disk_full(true): every append() fails with kResourceExhausted
//    (ENOSPC) until cleared.
//  - set_capacity(bytes): a small disk. The files written through this
//    FaultFs (from the call on; removed and overwritten ones give their
//    bytes back) may hold at most `bytes`; an append past it fails with
//    ENOSPC, and space() reports this disk (total = capacity, free = what
//    is left) instead of the real one. 0 turns it off.
// simulate_crash() then rewrites the files it saw written, as the disk would
// hold them after a power cut:
//  - kLoseUnsynced: names created or renamed in a directory that was not
//    synced afterwards are undone (in reverse order; an unsynced new
//    directory goes with everything in it), and every file loses the
//    bytes appended after its last successful sync().
//  - kTornKeepNames: every name survives, and every file keeps its synced
//    bytes plus a random part of its unsynced tail, with a few bytes of that
//    tail overwritten by garbage (a torn write).
// Thread-safe. simulate_crash() must run after every file handle obtained
// through this FaultFs is closed (destroy the bank first).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "fs/fs.h"

namespace sb {

enum class CrashMode { kLoseUnsynced, kTornKeepNames };

class FaultFs : public ForwardingFs {
 public:
  explicit FaultFs(Fs* base = posix_fs()) : ForwardingFs(base) {}

  void kill_at(uint64_t n);
  void fail_at(uint64_t n);
  void set_sync_broken(bool broken);
  void set_disk_full(bool full);
  void set_capacity(uint64_t bytes);
  uint64_t used_bytes() const;  // bytes of the files written through this FaultFs
  // Every sync() sleeps this long first (a slow disk, for queue tests).
  void set_sync_delay_ms(int ms);
  // Clears every fault, the kill included, and restarts the counters.
  void clear_faults();
  bool killed() const;
  bool fail_hit() const;

  void simulate_crash(CrashMode mode, uint64_t seed);

  Status new_writable(const std::string& p, std::unique_ptr<WritableFile>* o) override;
  Status open_readable(const std::string& p, bool d, std::unique_ptr<ReadableFile>* o) override;
  Status rename(const std::string& f, const std::string& t) override;
  Status remove(const std::string& p) override;
  Status mkdir(const std::string& p) override;
  Status remove_dir(const std::string& p) override;
  Status space(const std::string& p, SpaceInfo* o) override;
  Status sync_dir(const std::string& p) override;
  Status list(const std::string& d, std::vector<std::string>* n) override;
  Status stat(const std::string& p, FileInfo* o) override;
  Status touch(const std::string& p) override;
  Status lock(const std::string& p, bool e, std::unique_ptr<FileLock>* o) override;

  // Used by the file wrappers.
  enum class Op { kCreate, kAppend, kSync, kClose, kRename, kRemove, kMkdir, kSyncDir, kTouch, kOpen, kRead, kList, kStat, kLock };
  Status check(Op op, const std::string& path);
  // Fails with ENOSPC when n more bytes do not fit the capacity.
  Status reserve_append(const std::string& path, uint64_t n);
  void note_append(const std::string& path, uint64_t n);
  void note_sync(const std::string& path);

 private:
  struct Track {
    uint64_t size = 0;
    uint64_t synced = 0;
  };
  struct DirOp {
    bool is_rename = false;
    bool is_mkdir = false;
    std::string dir;   // directory whose entry changed (the destination's)
    std::string from;  // rename source
    std::string path;  // created path or rename destination
  };

  mutable std::mutex mu_;
  uint64_t kill_at_ = 0, fail_at_ = 0;
  uint64_t write_ops_ = 0, all_ops_ = 0;
  bool killed_ = false, fail_hit_ = false, sync_broken_ = false, disk_full_ = false;
  int sync_delay_ms_ = 0;
  uint64_t capacity_ = 0, used_ = 0;  // used_: sum of files_' sizes
  std::map<std::string, Track> files_;
  std::vector<DirOp> dir_log_;
};

}  // namespace sb
