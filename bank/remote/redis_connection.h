// RedisConnection: one TCP connection to a Redis (or Valkey) server, where
// every exchange ends by a deadline whatever the server does (docs/bank.md,
// "The remote tier").
// Contract:
//  - hiredis formats commands and parses replies; the socket I/O is poll()
//    against the deadline, so sending a pipeline and reading all its replies
//    take at most the time left, whatever a stopped, slow or gone server does;
//  - the bytes counted are exactly those that crossed the socket (RESP);
//  - a failed exchange (time-out, reset, end of stream, protocol error)
//    leaves it broken(): its replies are out of step, drop it. An error reply
//    ("-ERR ...") is a reply, not a failure; the caller judges it.
// Not thread-safe: one thread uses a connection at a time (RedisTier keeps a
// pool of them).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

struct redisContext;
struct redisReply;

namespace sb {

// One server: a name, an IPv4 address, or an IPv6 address (written [addr]
// in a URL), and its port.
struct RedisEndpoint {
  std::string host;
  int port = 6379;
  std::string text() const;  // host:port, [addr]:port for IPv6
};

// Where the remote tier lives: `redis://HOST[:PORT][/DB]`, or a Redis
// Cluster, `redis-cluster://HOST:PORT[,HOST:PORT...]` (any of its nodes; the
// rest is learnt from them, bank/remote/redis_cluster.h).
struct RedisAddress {
  std::string host;  // the single server, or the first seed of a cluster
  int port = 6379;
  int db = 0;        // always 0 for a cluster
  bool cluster = false;
  std::vector<RedisEndpoint> seeds;  // a cluster's nodes as given
  std::string url() const;  // normalised, for logs
};

// Parses `redis://HOST[:PORT][/DB]` and `redis-cluster://HOST:PORT[,...]`.
// A password never goes in the URL (`redis://user:pass@...` is refused with
// a pointer to the password file).
Status parse_redis_url(std::string_view url, RedisAddress* out);

// Where the remote tier's operator messages go: the given sink, or stderr
// after `statebank <who>: ` when there is none.
using RedisLog = std::function<void(const std::string&)>;
void redis_log(const RedisLog& sink, std::string_view who, const std::string& message);

using RedisClock = std::chrono::steady_clock;
using RedisDeadline = RedisClock::time_point;

struct RedisReplyDeleter {
  void operator()(redisReply* r) const;
};
using RedisReplyPtr = std::unique_ptr<redisReply, RedisReplyDeleter>;

// One command: its arguments as bytes (the caller keeps them alive through
// the exchange).
using RedisCommand = std::vector<std::string_view>;

class RedisConnection {
 public:
  // Connects to `host` (already a numeric address: name resolution has no
  // time-out, so RedisTier resolves once when it opens), authenticates when
  // `password` is not empty and selects `db`, all by `deadline`.
  static Status open(const std::string& host, int port, int db, const std::string& password, RedisDeadline deadline,
                     std::unique_ptr<RedisConnection>* out);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends every command and reads one reply per command, by `deadline`.
  // Replies are in command order. Failure: kIoError (see timed_out()), and
  // the connection is broken().
  Status exchange(std::span<const RedisCommand> commands, RedisDeadline deadline,
                  std::vector<RedisReplyPtr>* replies);

  bool broken() const { return broken_; }
  // The last failed exchange ran out of time (rather than failing at once).
  bool timed_out() const { return timed_out_; }
  uint64_t bytes_sent() const { return bytes_sent_; }
  uint64_t bytes_received() const { return bytes_received_; }

 private:
  explicit RedisConnection(redisContext* context) : context_(context) {}
  Status fail(std::string why, bool timed_out);
  struct Pipeline;  // one exchange's commands, formatted, and how much of them is sent
  // Sends what the socket takes now; non-blocking.
  Status send_some(Pipeline& pipeline);
  // Reads what has arrived and parses replies until `expected` are in; non-blocking.
  Status receive_some(size_t expected, std::vector<RedisReplyPtr>* replies);

  redisContext* context_;
  bool broken_ = false;
  bool timed_out_ = false;
  uint64_t bytes_sent_ = 0, bytes_received_ = 0;
  std::vector<char> read_buffer_;
};

// Resolves `host` to one numeric address (IPv4 or IPv6) for connect().
Status resolve_redis_host(const std::string& host, std::string* numeric);

}  // namespace sb
