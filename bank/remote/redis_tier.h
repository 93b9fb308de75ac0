// RedisTier: the bank's shared remote tier on a Redis (or Valkey) server, so
// that several server replicas restore each other's prefixes. Values are
// object images in the SSD tier's self-checking format (bank/format.h),
// authenticated with an HMAC under `secret`, under <prefix>blk:<key hex> and
// <prefix>snp:<key hex>. Promises (on top of bank/tier.h): nothing read is
// trusted (a value that fails a check or its MAC is a counted miss, deleted
// in the background); no call waits longer than `timeout`; a failed call
// opens a circuit breaker (every call an immediate miss until a PING
// answers); reads are pipelined; put() never blocks; the password and the
// secret are never logged. Each promise in full: docs/bank.md, "RedisTier's
// promises".
// Thread-safe. The destructor writes out what is queued while Redis answers
// (each round trip bounded by `timeout`; nothing after close()), then stops
// its thread.
#pragma once

#include <atomic>
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
#include <string_view>
#include <thread>
#include <vector>

#include "bank/remote/redis_cluster.h"
#include "bank/remote/redis_connection.h"
#include "bank/remote/redis_pool.h"
#include "bank/tier.h"
#include "runtime/state.h"

namespace sb {

struct RedisOptions {
  RedisAddress address;
  std::string password;  // empty: no AUTH
  // The key of every value's MAC (invariant 7); required, the same on every
  // replica that shares the store (--remote-secret-file).
  std::string secret;
  std::string key_prefix = "statebank:";
  std::chrono::milliseconds timeout{500};  // every call, connecting included
  std::chrono::seconds ttl{0};             // 0: keys do not expire
  std::chrono::milliseconds retry_interval{1000};
  size_t queue_max_objects = 1024;
  uint64_t queue_max_bytes = 256ull << 20;
  uint64_t write_batch_bytes = 32ull << 20;  // one SET pipeline carries about this much
  size_t max_idle_connections = 8;
  // When set, written into every value (digest) and every read's part sizes
  // are checked against it.
  std::optional<StateSchema> schema;
  // When set, every block read is checked with it (the Bank passes
  // chain_key(parent, tokens) == key); false makes the read a corruption.
  std::function<bool(const Object&)> verify_block;
  RedisLog log;  // nullptr: stderr
};

// The call counters (trips, timeouts, ... wire bytes) are the pool's, or the
// cluster's nodes' summed.
struct RedisStats : RedisCallStats {
  TierStats tier;  // bytes/blocks/snapshots stay 0: the store is shared, its contents are not ours to count
  bool available = false;       // the breaker is closed
  uint64_t queued = 0;          // objects waiting to be written
  uint64_t dropped_puts = 0;    // queue full or tier unavailable
  uint64_t write_errors = 0;    // SETs Redis refused (e.g. OOM at maxmemory with noeviction)
  uint64_t skipped_writes = 0;  // objects Redis already held (only their expiry refreshed)
  uint64_t deleted = 0;         // bad values removed
  uint64_t mac_failures = 0;    // values read whose MAC was missing or wrong (misses, deleted)
  bool cluster = false;         // the store is a Redis Cluster; the counters below are its
  RedisClusterStats nodes;      // moved/ask redirections, map refreshes, masters and slots
};

class RedisTier : public Tier {
 public:
  // Resolves the host and connects once. A refusal (wrong password, a
  // database that does not exist) is an error; an unreachable server is not:
  // the tier opens unavailable and keeps trying.
  static Status open(RedisOptions options, std::unique_ptr<RedisTier>* out);
  ~RedisTier() override;
  RedisTier(const RedisTier&) = delete;
  RedisTier& operator=(const RedisTier&) = delete;

  TierKind kind() const override { return TierKind::kRemote; }
  bool contains(ObjectKind kind, const Key& key) const override;
  void contains_many(std::span<TierProbe> probes) const override;
  Status get(ObjectKind kind, const Key& key, ObjectRef* out) override;
  void get_many(std::span<TierRead> reads) override;
  Status put(const ObjectRef& object, Retention retention) override;
  // Deletes the value from Redis now (one DEL, bounded by `timeout`); true
  // when it was there. Unavailable: false, and it is left for the next
  // reader's checks.
  bool quarantine(ObjectKind kind, const Key& key, const std::string& why) override;
  // The common counters, plus the ones below as `counts` and the URL as a
  // fact (what /v1/bank shows under "remote").
  TierStats stats() const override;

  RedisStats redis_stats() const;
  const RedisOptions& options() const { return options_; }
  // The Redis key of an object (tests and tools).
  std::string redis_key(ObjectKind kind, const Key& key) const;
  // The value stored under `name` for `image`: the image, then its tag
  // (HMAC-SHA-256 under `secret`, docs/bank-format.md "Remote values").
  static std::string seal(std::string_view secret, std::string_view name, std::span<const uint8_t> image);
  static constexpr size_t kTagBytes = 32;
  // Waits until every put() queued before the call is written, dropped or
  // failed, at most until `deadline`: kResourceExhausted when the deadline
  // came first. Objects Redis refused or that were dropped are not errors
  // here (they are counted): the remote tier is a cache.
  Status flush(RedisDeadline deadline = RedisDeadline::max()) override;
  // Shutdown: flush(deadline), then drops what is still queued (counted as
  // dropped puts) and stops writing; later put()s are dropped. Reads keep
  // working. Returns flush's status. Idempotent.
  Status close(RedisDeadline deadline);

 private:
  struct Job {
    ObjectRef object;  // null: delete `kind`/`key`
    ObjectKind kind = ObjectKind::kBlock;
    Key key;
    Retention retention = Retention::kBlock;
    uint64_t bytes = 0;
  };
  explicit RedisTier(RedisOptions options);
  Status open_cluster();
  // One exchange: on the pool under its breaker, or through the cluster. Not
  // OK: the tier is (now) unavailable, or the exchange failed and tripped it.
  Status call(std::span<const RedisCommand> commands, std::vector<RedisReplyPtr>* replies) const;
  bool available() const { return cluster_ || pool_->up(); }
  // An error reply that says the server is not serving: the pool's breaker opens.
  void trip(const Status& why) const;
  // The pool's breaker opened: schedule the probe, wake the writer, say so.
  void tripped(const Status& why);
  // Checks one GET reply and turns it into an object or a miss.
  Status decode_reply(ObjectKind kind, const Key& key, const redisReply* reply, ObjectRef* out) const;
  void schedule_delete(ObjectKind kind, const Key& key) const;
  void worker_loop();
  // Drops every waiting write (counted as dropped puts) and wakes flush(); under mu_.
  void drop_queue();
  void probe();
  // Two round trips: deletions and which objects Redis lacks, then SET of
  // those (EXPIRE of the rest). A failed trip drops the batch's puts.
  void write_batch(std::vector<Job>& jobs);
  struct WriteRound;  // round trip 2's commands and the sealed images they send
  // Round trip 2's commands from round trip 1's EXISTS replies; false when Redis answered an error.
  bool plan_writes(const std::vector<Job>& jobs, const std::vector<std::string>& names, const std::vector<size_t>& puts,
                   size_t deletes, const std::vector<RedisReplyPtr>& exists, WriteRound* round);
  void count_write_replies(const WriteRound& round, const std::vector<RedisReplyPtr>& replies);
  void log(const std::string& message) const;

  // Constant after open.
  RedisOptions options_;
  uint64_t schema_digest_ = 0;
  std::string ttl_text_;  // seconds, "" without a ttl
  std::unique_ptr<RedisCluster> cluster_;  // set for redis-cluster://: call() routes through it
  std::unique_ptr<RedisPool> pool_;        // set for redis://

  mutable std::mutex mu_;
  mutable std::condition_variable work_cv_, done_cv_;
  // Guarded by mu_.
  mutable std::deque<Job> queue_;
  mutable uint64_t queue_bytes_ = 0;
  mutable std::set<std::pair<ObjectKind, Key>> pending_;  // queued or being written
  mutable uint64_t enqueued_ = 0, finished_ = 0;          // jobs, for flush()
  size_t writing_ = 0;                                     // jobs of the batch being written
  mutable RedisStats stats_;
  mutable RedisClock::time_point next_probe_{};
  mutable std::string last_logged_;
  bool stop_ = false;
  bool closed_ = false;  // close(): nothing more is written

  std::thread worker_;
};

}  // namespace sb
