// SsdTier: the bank's disk tier. One file per object, named by its key
// (content address), under a 256-way fan-out directory; the format is
// bank/format.h and docs/bank-format.md.
//
//   <dir>/LOCK                        flock: one writer, or any number of readers
//   <dir>/objects/<2 hex>/<32 hex>.blk   block objects
//   <dir>/objects/<2 hex>/<32 hex>.snp   snapshot objects
//   <dir>/objects/<2 hex>/<name>.tmp-*   being written (removed at open)
//   <dir>/quarantine/<name>.q<pid>-<n>   failed a check; `bank gc` deletes them
//
// Promises (on top of bank/tier.h):
//  1. put() never blocks longer than SsdOptions::put_max_wait: it queues the
//     object for a background writer, or drops it (kResourceExhausted) when
//     the bounded queue stays full.
//  2. An object becomes visible (contains/get) only once durable: written to a
//     temporary name, fsynced, renamed, and its directory fsynced. Any failed
//     step (a failed fsync included) leaves it unpublished.
//  3. get() reads the whole file and checks the header, the exact size, the
//     payload checksum (XXH3-64), the key and kind, the part table, and, when
//     configured, the part sizes against the schema and the block's key
//     against its tokens. A failure is a miss: kCorruption, the file moves to
//     quarantine/ (left in place in read-only mode), and check_failures grows.
//  4. Opening recovers the index from the files: temporary files are
//     removed, damaged ones quarantined, foreign and future-version files left
//     alone (all with a log line). A second writer on the same directory is
//     refused with a clear message.
//  5. Only paths under `dir` are touched; every name is built from a key.
//  6. With a byte budget, publishing evicts in SsdIndex's order (least
//     recently accessed first) until the new object fits, passing over what
//     the eviction guard protects (pins). When only protected objects are
//     left and the new object does not fit, it is not stored
//     (kResourceExhausted in the writer), unless it is protected itself.
// Thread-safe. The destructor writes out the queue (unless close() dropped
// it), then stops its threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bank/ssd_index.h"
#include "bank/tier.h"
#include "fs/fs.h"
#include "runtime/state.h"

namespace sb {

enum class SsdMode { kOff, kOn, kReadOnly };
Status parse_ssd_mode(const std::string& text, SsdMode* out);  // "on", "off", "read-only"
const char* ssd_mode_name(SsdMode mode);

struct SsdOptions {
  std::string dir;
  SsdMode mode = SsdMode::kOn;
  uint64_t budget_bytes = 0;  // 0: no limit
  size_t queue_max_objects = 1024;
  uint64_t queue_max_bytes = 512ull << 20;
  std::chrono::milliseconds put_max_wait{100};
  int writer_threads = 1;
  int reader_threads = 8;  // get_many's parallelism
  bool direct_io = true;   // reads bypass the page cache where the fs allows
  Fs* fs = nullptr;        // nullptr: posix_fs()
  // When set, written into every object (digest) and every read's part sizes
  // are checked against it.
  std::optional<StateSchema> schema;
  // When set, every block read is checked with it (the Bank passes
  // chain_key(parent, tokens) == key); false makes the read a corruption.
  std::function<bool(const Object&)> verify_block;
  std::function<void(const std::string&)> log;  // nullptr: stderr
};

struct SsdStats {
  TierStats tier;
  uint64_t queued = 0;          // objects waiting to be written
  uint64_t dropped_puts = 0;    // the queue stayed full
  uint64_t write_errors = 0;
  uint64_t quarantined = 0;     // files this process moved to quarantine/
  uint64_t temp_removed = 0;    // temporary files removed at open
  uint64_t temp_left = 0;       // temporary files seen at open and left (read-only)
  uint64_t ignored_files = 0;   // foreign or future-version files left alone
  uint64_t quarantine_files = 0, quarantine_bytes = 0;  // in quarantine/ at open, plus since
};

class SsdTier : public Tier {
 public:
  static Status open(SsdOptions options, std::unique_ptr<SsdTier>* out);
  ~SsdTier() override;
  SsdTier(const SsdTier&) = delete;
  SsdTier& operator=(const SsdTier&) = delete;

  TierKind kind() const override { return TierKind::kSsd; }
  bool contains(ObjectKind kind, const Key& key) const override;
  Status get(ObjectKind kind, const Key& key, ObjectRef* out) override;
  // Read-only and off modes store nothing and return OK.
  Status put(const ObjectRef& object, Retention retention) override;
  TierStats stats() const override;

  SsdStats ssd_stats() const;
  SsdMode mode() const { return options_.mode; }
  const std::string& dir() const { return options_.dir; }

  // Reads concurrently, reader_threads at a time.
  void get_many(std::span<TierRead> reads) override;
  // Waits until every put() queued before the call is published or has
  // failed, at most until `deadline`. Returns the first write failure since
  // the previous flush(), or kResourceExhausted when the deadline came first.
  Status flush(std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) override;
  // Shutdown: flush(deadline), then drops what is still queued (counted as
  // dropped puts, logged) and joins the writers once they finish their
  // current file; later put()s are dropped. Reads keep working. Returns
  // flush's status. Idempotent.
  Status close(std::chrono::steady_clock::time_point deadline);

  void set_eviction_guard(const EvictionGuard* guard) override;
  void guard_changed() override;
  bool writable() const override { return options_.mode == SsdMode::kOn; }
  std::vector<TierEntry> entries() const override;
  bool describe(ObjectKind kind, const Key& key, TierEntry* out) const override;
  std::vector<Key> children(const Key& parent, size_t max) const override;
  // Reads the header and the token ids only (not the rows).
  Status peek_tokens(const Key& block, Key* parent, std::vector<int32_t>* tokens) const override;
  // Removes a published object's file (writable mode). A put() still queued
  // is not affected: call flush() first.
  Status discard(ObjectKind kind, const Key& key) override;
  // Published objects, in eviction order (first = next victim).
  std::vector<SsdEntry> list() const;
  // Evicts until the published bytes fit `budget`; counts what it removed.
  Status evict_to(uint64_t budget, uint64_t* objects, uint64_t* bytes);
  // Deletes every file in quarantine/ (writable mode).
  Status clear_quarantine(uint64_t* files, uint64_t* bytes);
  // Path of an object's file (tests and tools).
  std::string object_path(ObjectKind kind, const Key& key) const;

 private:
  struct Job {
    ObjectRef object;
    Retention retention;
  };
  explicit SsdTier(SsdOptions options);
  Status open_dir();
  Status scan_fanout(const std::string& sub, std::vector<std::pair<int64_t, SsdEntry>>* found);
  Status read_object(ObjectKind kind, const Key& key, uint64_t size, ObjectRef* out);
  Status write_object(const Job& job, uint64_t size);
  void writer_loop();
  void reader_loop();
  void quarantine(ObjectKind kind, const Key& key, const std::string& why);
  void quarantine_path(const std::string& path, const std::string& name, const std::string& why);
  // REQUIRES: mu_ held. Picks victims so that `incoming` more bytes fit,
  // passing over protected ones (the result may not make them fit).
  std::vector<SsdEntry> pick_victims_locked(uint64_t budget, uint64_t incoming);
  bool guarded_locked(ObjectKind kind, const Key& key) const;
  void remove_victims(const std::vector<SsdEntry>& victims);
  void log(const std::string& message) const;
  std::string fanout_dir(const Key& key) const;

  // Constant after open.
  SsdOptions options_;
  Fs* fs_;
  uint64_t schema_digest_ = 0;
  std::unique_ptr<FileLock> lock_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_, space_cv_;
  // Guarded by mu_.
  SsdIndex index_;
  TierStats tier_;
  SsdStats extra_;
  std::deque<Job> queue_;
  uint64_t queue_bytes_ = 0;
  std::set<std::pair<ObjectKind, Key>> pending_;  // queued or being written
  uint64_t in_flight_ = 0, reserved_bytes_ = 0;
  uint64_t enqueued_ = 0, finished_ = 0;  // jobs, for flush()
  Status first_error_;
  std::string last_logged_error_;
  uint64_t temp_seq_ = 0, quarantine_seq_ = 0;
  std::set<std::string> durable_dirs_;  // fan-out directories known to be on disk
  bool stop_ = false;
  bool closed_ = false;  // close(): nothing more is written
  std::deque<std::function<void()>> read_tasks_;
  std::vector<std::thread> readers_;  // started by the first get_many()
  const EvictionGuard* guard_ = nullptr;

  std::vector<std::thread> writers_;  // constant after open
};

}  // namespace sb
