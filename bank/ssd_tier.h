// SsdTier: the bank's disk tier, one file per object named by its key (the
// layout and its rules in full: docs/bank.md, "SsdTier's rules"; the format:
// docs/bank-format.md). Contract, on top of bank/tier.h:
//  - put() waits at most SsdOptions::put_max_wait, else drops the object;
//  - an object is visible only once durable (temporary name, fsync, rename,
//    directory fsync); a failed step leaves it unpublished;
//  - get() checks everything it reads; a failure is a miss (kCorruption),
//    the file is quarantined, check_failures grows;
//  - opening recovers the index from the files; a second writer is refused;
//  - only paths under `dir` are touched, every name built from a key;
//  - the budget and the free-space reserve hold; a failed write never
//    removes a published object; pins never hold the tier over its budget.
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
  // Published plus quarantined bytes. 0: default_budget_share of the file
  // system's size, measured at open.
  uint64_t budget_bytes = 0;
  double default_budget_share = 0.5;
  // No write may leave less than this share of the file system free.
  double reserve_share = 0.10;
  // Quarantined files older than this are deleted (at open, and whenever the
  // writer makes room).
  std::chrono::seconds quarantine_max_age{24 * 3600};
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
  TierStats tier;               // tier.quarantined: objects this process took out
  uint64_t queued = 0;          // objects waiting to be written
  uint64_t dropped_puts = 0;    // the queue stayed full
  uint64_t write_errors = 0;
  uint64_t skipped_no_space = 0;  // not written: even an empty bank would break the reserve
  uint64_t reserve_bytes = 0;   // the free-space reserve in force (0: unknown file system size)
  uint64_t temp_removed = 0;    // temporary files removed at open
  uint64_t temp_left = 0;       // temporary files seen at open and left (read-only)
  uint64_t ignored_files = 0;   // foreign or future-version files left alone
  uint64_t quarantine_files = 0, quarantine_bytes = 0;  // in quarantine/ now (counted in the budget)
  uint64_t quarantine_aged_out = 0;  // quarantined files deleted for age or room
  uint64_t old_format_files = 0, old_format_bytes = 0;  // a version-1 bank beside this one
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
  // Takes the object out of the index and moves its file to quarantine/
  // (read-only mode: out of this process's index only; the file stays).
  bool quarantine(ObjectKind kind, const Key& key, const std::string& why) override;
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
  void set_observer(TierObserver* observer) override;
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
  // Deletes a version-1 bank in the same directory (bank/ssd_versions.h).
  Status remove_old_versions(uint64_t* files, uint64_t* bytes);
  // Paths (tests and tools).
  std::string object_path(ObjectKind kind, const Key& key) const;
  std::string objects_dir() const { return options_.dir + "/v2/objects"; }
  std::string quarantine_dir() const { return options_.dir + "/v2/quarantine"; }

 private:
  struct Job {
    ObjectRef object;
    Retention retention;
  };
  struct Quarantined {
    std::string name;  // file name in quarantine/
    uint64_t bytes = 0;
    int64_t since_ns = 0;  // when it was moved there (its mtime)
  };
  explicit SsdTier(SsdOptions options);
  Status open_dir();
  Status make_dir_durably(const std::string& dir);
  Status expect_dir(const std::string& dir);
  Status note_other_versions();  // logs and counts v1 banks and newer formats beside ours
  Status scan_objects();
  void log_open_summary();
  Status scan_fanout(const std::string& sub, std::vector<std::pair<int64_t, SsdEntry>>* found);
  Status read_object(ObjectKind kind, const Key& key, uint64_t size, ObjectRef* out);
  Status write_object(const Job& job, uint64_t size);
  void write_one(const Job& job, uint64_t size);
  // Expired quarantine files to remove and victims to make `size` fit the
  // budget (doomed, still readable); reserves `size`. Not OK: it cannot fit.
  Status reserve_for_write(const Job& job, uint64_t size, std::vector<Quarantined>* files,
                           std::vector<SsdEntry>* victims);
  // Evicts victims (more when needed) until the file system keeps its
  // reserve after `size` more bytes; victims[0, *evicted) are then gone.
  Status make_room_on_disk(uint64_t size, std::vector<SsdEntry>* victims, size_t* evicted);
  void publish_locked(const Job& job, uint64_t size);  // REQUIRES: mu_ held
  void log_write_failure(const Status& s);
  void writer_loop();
  void reader_loop();
  void set_limits();
  void scan_quarantine();
  // Moves a file to quarantine/ and records it; counts nothing else.
  void quarantine_path(const std::string& path, const std::string& name, const std::string& why);
  // REQUIRES: mu_ held. Quarantined files past their age, taken off the list.
  std::vector<Quarantined> take_expired_locked();
  // REQUIRES: mu_ held. Chooses victims until published + quarantined +
  // reserved + incoming fits `budget`: quarantined files first (taken off the
  // list), then published objects the guard does not protect (doomed, still
  // readable). The result may not make them fit.
  void pick_victims_locked(uint64_t budget, uint64_t incoming, std::vector<Quarantined>* files,
                           std::vector<SsdEntry>* victims);
  bool guarded_locked(ObjectKind kind, const Key& key) const;
  void remove_quarantined(const std::vector<Quarantined>& files);
  // Takes a doomed victim out of the index and deletes its file; false when
  // it is no longer the doomed entry (quarantined or re-read meanwhile).
  bool evict(const SsdEntry& victim);
  void log(const std::string& message) const;
  std::string fanout_dir(const Key& key) const;

  // Constant after open.
  SsdOptions options_;
  Fs* fs_;
  uint64_t schema_digest_ = 0;
  std::unique_ptr<FileLock> lock_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_, space_cv_;
  uint64_t budget_ = 0;   // 0: none (the file system's size is unknown)
  uint64_t reserve_ = 0;  // free bytes no write may take

  // Guarded by mu_.
  SsdIndex index_;
  std::deque<Quarantined> quarantine_;  // oldest first
  uint64_t quarantine_bytes_ = 0;
  // Names whose file is being moved or deleted: a put() of one is dropped,
  // so the move never takes a fresh copy with it.
  std::set<std::pair<ObjectKind, Key>> removing_;
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
  TierObserver* observer_ = nullptr;  // guarded by mu_
  // The index's changes, told to the observer; under mu_.
  bool unindex(ObjectKind kind, const Key& key);
  void note_stored(const SsdEntry& e, std::span<const int32_t> tokens);

  std::vector<std::thread> writers_;  // constant after open
};

}  // namespace sb
