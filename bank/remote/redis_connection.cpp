#include "bank/remote/redis_connection.h"

#include <hiredis.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstring>

namespace sb {
namespace {

constexpr size_t kReadChunk = 512 * 1024;
constexpr int kMaxIov = 64;

bool parse_int(std::string_view text, int lo, int hi, int* out) {
  if (text.empty()) return false;
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

int millis_left(RedisDeadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - RedisClock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left + 1, 1 << 30));
}

std::string reply_error(const redisReply* r) {
  if (!r) return "no reply";
  if (r->type == REDIS_REPLY_ERROR) return std::string(r->str, r->len);
  return "";
}

}  // namespace

void RedisReplyDeleter::operator()(redisReply* r) const { freeReplyObject(r); }

std::string RedisEndpoint::text() const {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string RedisAddress::url() const {
  if (!cluster) return "redis://" + RedisEndpoint{host, port}.text() + "/" + std::to_string(db);
  std::string out = "redis-cluster://";
  for (size_t i = 0; i < seeds.size(); ++i) out += (i ? "," : "") + seeds[i].text();
  return out;
}

namespace {

// HOST[:PORT] or [ADDR][:PORT]; "" when it parses, else why not.
std::string parse_endpoint(std::string_view authority, bool port_required, RedisEndpoint* out) {
  RedisEndpoint e;
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return "an IPv6 address is missing its ']'";
    e.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after.front() != ':') return "unexpected text after the IPv6 address";
    if (after == ":") return "the port is empty";
    if (!after.empty()) port_text = after.substr(1);
  } else {
    const size_t colon = authority.rfind(':');
    e.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return "the port is empty";
    }
    if (e.host.find(':') != std::string::npos) return "write an IPv6 address in brackets, [addr]";
  }
  if (e.host.empty()) return "the host is empty";
  for (char c : e.host)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '_'))
      return "the host holds a character that no host name has";
  if (port_text.empty() && port_required) return "every cluster node needs its port";
  if (!port_text.empty() && !parse_int(port_text, 1, 65535, &e.port)) return "the port must be a number from 1 to 65535";
  *out = e;
  return "";
}

}  // namespace

Status parse_redis_url(std::string_view url, RedisAddress* out) {
  // Never echo credentials someone put in the URL.
  std::string shown(url);
  if (const size_t at = shown.find('@'); at != std::string::npos) {
    const size_t scheme_end = shown.find("://");
    const size_t from = scheme_end == std::string::npos || scheme_end + 3 > at ? 0 : scheme_end + 3;
    shown.replace(from, at - from, "***");
  }
  constexpr std::string_view scheme = "redis://", cluster_scheme = "redis-cluster://";
  const bool cluster = url.substr(0, cluster_scheme.size()) == cluster_scheme;
  auto bad = [&](const std::string& why) {
    return Status::invalid("remote URL '" + shown + "': " + why +
                           (cluster ? " (expected redis-cluster://HOST:PORT[,HOST:PORT...])"
                                    : " (expected redis://HOST:PORT[/DB] or redis-cluster://HOST:PORT[,...])"));
  };
  if (!cluster && url.substr(0, scheme.size()) != scheme) {
    if (url.substr(0, 9) == "rediss://") return bad("TLS (rediss://) is not supported");
    return bad("it must start with redis:// or redis-cluster://");
  }
  std::string_view rest = url.substr(cluster ? cluster_scheme.size() : scheme.size());
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (authority.find('@') != std::string_view::npos)
    return bad("credentials do not go in the URL; put the password in a file and give --remote-password-file");
  RedisAddress a;
  a.cluster = cluster;
  if (cluster) {
    if (slash != std::string_view::npos) return bad("a cluster has only database 0: no /DB");
    for (size_t at = 0; at <= authority.size();) {
      const size_t comma = std::min(authority.find(',', at), authority.size());
      RedisEndpoint e;
      const std::string why = parse_endpoint(authority.substr(at, comma - at), true, &e);
      if (!why.empty()) return bad(why);
      a.seeds.push_back(e);
      at = comma + 1;
    }
    a.host = a.seeds.front().host;
    a.port = a.seeds.front().port;
    *out = a;
    return Status::ok();
  }
  RedisEndpoint e;
  if (const std::string why = parse_endpoint(authority, false, &e); !why.empty()) return bad(why);
  a.host = e.host;
  a.port = e.port;
  if (slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && !parse_int(db, 0, 1 << 20, &a.db)) return bad("the database must be a number (0, 1, ...)");
  }
  *out = a;
  return Status::ok();
}

Status resolve_redis_host(const std::string& host, std::string* numeric) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || !found) return Status::invalid("remote host '" + host + "' does not resolve: " + gai_strerror(rc));
  char text[NI_MAXHOST];
  rc = getnameinfo(found->ai_addr, found->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST);
  freeaddrinfo(found);
  if (rc != 0) return Status::invalid("remote host '" + host + "': " + gai_strerror(rc));
  *numeric = text;
  return Status::ok();
}

Status RedisConnection::open(const std::string& host, int port, int db, const std::string& password,
                             RedisDeadline deadline, std::unique_ptr<RedisConnection>* out) {
  const int ms = millis_left(deadline);
  const std::string where = host + ":" + std::to_string(port);
  if (ms <= 0) return Status::io_error("redis " + where + ": no time left to connect");
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  redisContext* c = redisConnectWithTimeout(host.c_str(), port, tv);
  if (!c) return Status::io_error("redis " + where + ": cannot allocate a connection");
  if (c->err) {
    std::string why = c->errstr;
    redisFree(c);
    return Status::io_error("redis " + where + ": " + why);
  }
  std::unique_ptr<RedisConnection> conn(new RedisConnection(c));
  conn->read_buffer_.resize(kReadChunk);
  // Authentication and database first; PING last, so that a server that
  // wants a password we did not give says so now rather than on every read.
  const std::string db_text = std::to_string(db);
  std::vector<RedisCommand> hello;
  if (!password.empty()) hello.push_back({"AUTH", password});
  if (db != 0) hello.push_back({"SELECT", db_text});
  hello.push_back({"PING"});
  std::vector<RedisReplyPtr> replies;
  SB_RETURN_IF_ERROR(conn->exchange(hello, deadline, &replies));
  for (const auto& r : replies) {
    std::string err = reply_error(r.get());
    // A refusal is a configuration problem, not a sick server: kInvalidArgument.
    if (!err.empty()) return Status::invalid("redis " + where + " refused the connection: " + err);
  }
  *out = std::move(conn);
  return Status::ok();
}

RedisConnection::~RedisConnection() { redisFree(context_); }

Status RedisConnection::fail(std::string why, bool timed_out) {
  broken_ = true;
  timed_out_ = timed_out;
  return Status::io_error(std::move(why));
}

// Each command formatted on its own, so a large value is copied once (into
// its command) and the pipeline goes out with one sendmsg per kMaxIov commands.
struct RedisConnection::Pipeline {
  struct Formatted {
    char* data = nullptr;
    size_t size = 0;
  };
  std::vector<Formatted> commands;
  size_t next = 0;    // the first command not wholly sent
  size_t offset = 0;  // bytes of it already sent

  ~Pipeline() {
    for (auto& f : commands) redisFreeCommand(f.data);
  }
  Status format(std::span<const RedisCommand> in) {
    commands.reserve(in.size());
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& cmd : in) {
      argv.clear();
      lens.clear();
      for (std::string_view a : cmd) {
        argv.push_back(a.data());
        lens.push_back(a.size());
      }
      char* text = nullptr;
      int n = redisFormatCommandArgv(&text, static_cast<int>(argv.size()), argv.data(), lens.data());
      if (n < 0 || !text) return Status::internal("cannot format a redis command");
      commands.push_back({text, static_cast<size_t>(n)});
    }
    return Status::ok();
  }
  bool all_sent() const { return next == commands.size(); }
  void advance(size_t sent) {
    while (sent > 0) {
      const size_t here = commands[next].size - offset;
      if (sent < here) {
        offset += sent;
        return;
      }
      sent -= here;
      ++next;
      offset = 0;
    }
  }
};

Status RedisConnection::exchange(std::span<const RedisCommand> commands, RedisDeadline deadline,
                                 std::vector<RedisReplyPtr>* replies) {
  replies->clear();
  if (broken_) return Status::io_error("redis connection is broken");
  if (commands.empty()) return Status::ok();
  Pipeline pipeline;
  SB_RETURN_IF_ERROR(pipeline.format(commands));
  replies->reserve(commands.size());
  while (!pipeline.all_sent() || replies->size() < commands.size()) {
    const int ms = millis_left(deadline);
    if (ms <= 0)
      return fail("redis did not answer " + std::to_string(commands.size()) + " commands in time (" +
                      std::to_string(replies->size()) + " replies came)",
                  true);
    pollfd p{context_->fd, static_cast<short>(POLLIN | (pipeline.all_sent() ? 0 : POLLOUT)), 0};
    const int ready = ::poll(&p, 1, ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return fail(std::string("redis: poll: ") + std::strerror(errno), false);
    }
    if (ready == 0) continue;  // the deadline check above ends it
    if ((p.revents & POLLOUT) && !pipeline.all_sent()) SB_RETURN_IF_ERROR(send_some(pipeline));
    if (p.revents & (POLLIN | POLLERR | POLLHUP)) SB_RETURN_IF_ERROR(receive_some(commands.size(), replies));
  }
  return Status::ok();
}

Status RedisConnection::send_some(Pipeline& pipeline) {
  iovec iov[kMaxIov];
  int n_iov = 0;
  for (size_t i = pipeline.next; i < pipeline.commands.size() && n_iov < kMaxIov; ++i, ++n_iov) {
    const size_t skip = i == pipeline.next ? pipeline.offset : 0;
    iov[n_iov].iov_base = pipeline.commands[i].data + skip;
    iov[n_iov].iov_len = pipeline.commands[i].size - skip;
  }
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = static_cast<size_t>(n_iov);
  ssize_t sent = ::sendmsg(context_->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    return fail(std::string("redis: send: ") + std::strerror(errno), false);
  if (sent > 0) {
    bytes_sent_ += static_cast<uint64_t>(sent);
    pipeline.advance(static_cast<size_t>(sent));
  }
  return Status::ok();
}

Status RedisConnection::receive_some(size_t expected, std::vector<RedisReplyPtr>* replies) {
  ssize_t got = ::recv(context_->fd, read_buffer_.data(), read_buffer_.size(), MSG_DONTWAIT);
  if (got == 0) return fail("redis closed the connection", false);
  if (got < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return fail(std::string("redis: recv: ") + std::strerror(errno), false);
    return Status::ok();
  }
  bytes_received_ += static_cast<uint64_t>(got);
  if (redisReaderFeed(context_->reader, read_buffer_.data(), static_cast<size_t>(got)) != REDIS_OK)
    return fail(std::string("redis: ") + context_->reader->errstr, false);
  while (replies->size() < expected) {
    void* reply = nullptr;
    if (redisReaderGetReply(context_->reader, &reply) != REDIS_OK)
      return fail(std::string("redis protocol error: ") + context_->reader->errstr, false);
    if (!reply) break;
    replies->emplace_back(static_cast<redisReply*>(reply));
  }
  return Status::ok();
}

void redis_log(const RedisLog& sink, std::string_view who, const std::string& message) {
  if (sink)
    sink(message);
  else
    std::fprintf(stderr, "statebank %.*s: %s\n", static_cast<int>(who.size()), who.data(), message.c_str());
}

}  // namespace sb
