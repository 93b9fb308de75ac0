// RedisCluster: sends single-key commands to a Redis (or Valkey) Cluster,
// each to the master owning its key's hash slot, so the remote tier spreads
// over several machines' memory and survives a master's loss (in full:
// docs/bank.md, "A Redis Cluster").
// Contract:
//  - a command's key is its first argument; its slot is CRC16 (XMODEM) of
//    the key or its first non-empty {hash tag}, modulo 16384, as the nodes
//    compute it; the slot map comes from CLUSTER SLOTS, re-read when stale;
//  - MOVED and ASK are followed, at most kMaxRedirects hops, all within the
//    call's one deadline (`timeout` in all, whatever the nodes do);
//  - a node that fails opens its own breaker (its commands fail at once until
//    a background PING answers); other nodes' commands go on;
//  - a failed command has a null reply; a reply is always the node's own
//    answer to that command, never another key's.
// Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bank/remote/redis_connection.h"
#include "bank/remote/redis_pool.h"

namespace sb {

inline constexpr int kRedisClusterSlots = 16384;

// The hash slot of `key`, as the nodes compute it (see the contract above).
int redis_cluster_slot(std::string_view key);

struct RedisClusterOptions {
  std::vector<RedisEndpoint> seeds;
  std::string password;  // empty: no AUTH
  std::chrono::milliseconds timeout{500};
  std::chrono::milliseconds retry_interval{1000};
  size_t max_idle_connections = 8;  // per node
  RedisLog log;
};

// The call counters: the nodes' pools summed, plus the commands skipped for a
// node whose breaker was open.
struct RedisClusterStats : RedisCallStats {
  uint64_t moved = 0, ask = 0;            // redirections followed
  uint64_t refreshes = 0;                 // slot maps read (CLUSTER SLOTS answered)
  uint64_t unrouted = 0;                  // commands failed: no known owner, CLUSTERDOWN, TRYAGAIN, too many hops
  uint64_t masters = 0, masters_down = 0; // nodes owning slots now, and how many of them have an open breaker
  uint64_t slots_covered = 0;             // slots with a known owner
  bool available = false;                 // every slot has an owner whose breaker is closed
};

class RedisCluster {
 public:
  static constexpr int kMaxRedirects = 5;
  // Resolves the seeds and reads the slot map from the first that answers.
  // A refusal (wrong password) is an error; no seed answering is not: the
  // cluster opens with an empty map and keeps trying.
  static Status open(RedisClusterOptions options, std::unique_ptr<RedisCluster>* out);
  ~RedisCluster();
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  // Sends every command to its slot's owner (one pipeline per node) and
  // returns one reply per command, in command order; null where the command
  // failed (never another key's reply).
  void exchange(std::span<const RedisCommand> commands, std::vector<RedisReplyPtr>* replies);

  RedisClusterStats stats() const;
  // Reads the slot map now (tests; the background thread does it on its own).
  Status refresh();

 private:
  struct Node;
  struct Group;  // one node's share of a call
  explicit RedisCluster(RedisClusterOptions options);
  // The node at host:port (numeric host), created when new; under mu_.
  Node* node_at(const std::string& host, int port);
  // Sends one node its commands; fills their replies, or group.retry on a redirection.
  void run_group(Group& group, std::span<const RedisCommand> commands, RedisDeadline deadline,
                 std::vector<RedisReplyPtr>* replies);
  // `node`'s breaker opened: its slots' map is stale, its probe scheduled.
  void tripped(Node* node, const Status& why);
  Status read_slots(Node* node);
  void maintain_loop();
  bool stale_locked() const;
  void log(const std::string& message) const;

  RedisClusterOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_.
  std::vector<std::unique_ptr<Node>> nodes_;  // never removed: routing entries point into it
  std::array<Node*, kRedisClusterSlots> owner_{};
  bool stale_ = true;
  bool stop_ = false;
  RedisClusterStats stats_;
  std::thread maintainer_;
};

}  // namespace sb
