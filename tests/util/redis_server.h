// RedisServer: a private redis-server for one test, on a free loopback port,
// in a temporary directory, with no persistence; stopped and removed when the
// object goes. Nothing relies on a system Redis service.
//
// The binary is Debian's redis-server (tools/install-deps.sh installs it),
// found as $SB_REDIS_SERVER, else redis-server on PATH. A missing binary fails
// the test (it is not skipped).
//
// Fault injection for the remote tier's tests: kill() (SIGKILL), restart()
// (a fresh, empty server on the same port), pause()/resume() (SIGSTOP and
// SIGCONT), and command() to read or damage what the server holds.
//
// The test's own view of the server goes through hiredis's blocking API
// with a time-out, never through the code under test. If the test process
// dies, the kernel kills the server too (PR_SET_PDEATHSIG).
//
// Thread safety: one thread drives a RedisServer; command() may be called
// from any thread (each call opens its own connection).
#pragma once

#include <arpa/inet.h>
#include <hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace sb::testing {

// One reply, flattened: type is hiredis's REDIS_REPLY_*; arrays keep their
// elements' strings.
struct RedisValue {
  int type = 0;
  std::string str;
  long long integer = 0;
  std::vector<std::string> elements;
  bool ok() const { return type != REDIS_REPLY_ERROR && type != 0; }
};

class RedisServer {
 public:
  // `extra` goes on redis-server's command line (e.g. {"--maxmemory", "1mb"}).
  explicit RedisServer(std::vector<std::string> extra = {}) : extra_(std::move(extra)) {
    char tmpl[] = "/tmp/sb_redis_XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    for (int attempt = 0; attempt < 5 && pid_ <= 0; ++attempt) {
      port_ = free_port();
      start();
    }
    if (pid_ <= 0) throw std::runtime_error("redis-server did not start (see " + dir_ + "/redis.log)");
  }
  ~RedisServer() {
    kill();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string url(int db = -1) const {
    return "redis://127.0.0.1:" + std::to_string(port_) + (db >= 0 ? "/" + std::to_string(db) : "");
  }
  const std::string& dir() const { return dir_; }
  bool running() const { return pid_ > 0; }

  // SIGKILL (a crash: nothing is saved) and reap. A paused server dies too.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  // A fresh, empty server on the same port (the old one is killed first).
  void restart() {
    kill();
    for (int attempt = 0; attempt < 20 && pid_ <= 0; ++attempt) {
      start();
      if (pid_ <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (pid_ <= 0) throw std::runtime_error("redis-server did not restart on port " + std::to_string(port_));
  }
  void pause() { ::kill(pid_, SIGSTOP); }
  void resume() { ::kill(pid_, SIGCONT); }

  // Runs one command with a 10-second time-out; type 0 when no reply came.
  RedisValue command(const std::vector<std::string>& args, int db = 0) const {
    RedisValue v;
    timeval tv{10, 0};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
    if (!c || c->err) {
      if (c) redisFree(c);
      return v;
    }
    redisSetTimeout(c, tv);
    if (db != 0) freeReplyObject(redisCommand(c, "SELECT %d", db));
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (r) {
      v.type = r->type;
      v.integer = r->integer;
      if (r->str) v.str.assign(r->str, r->len);
      for (size_t i = 0; i < r->elements; ++i)
        if (r->element[i]->str) v.elements.emplace_back(r->element[i]->str, r->element[i]->len);
      freeReplyObject(r);
    }
    redisFree(c);
    return v;
  }
  // Every key matching `pattern` (KEYS: fine for a test's few keys).
  std::vector<std::string> keys(const std::string& pattern = "*", int db = 0) const {
    return command({"KEYS", pattern}, db).elements;
  }
  // Has Redis itself evict `key`, and no other key, under memory pressure:
  // needs a server started with --maxmemory-policy volatile-ttl (or
  // volatile-lru), which evicts only keys with an expiry. Every other key
  // loses its expiry, maxmemory drops just below what is used, a write makes
  // Redis evict, and maxmemory is lifted again. True when `key` is gone by
  // eviction.
  bool evict_only(const std::string& key) const {
    if (command({"EXPIRE", key, "86400"}).integer != 1) return false;
    for (const auto& k : keys())
      if (k != key) command({"PERSIST", k});
    const long long evicted = std::stoll("0" + info("evicted_keys"));
    const long long used = std::stoll("0" + info("used_memory"));
    if (command({"CONFIG", "SET", "maxmemory", std::to_string(used - 64)}).str != "OK") return false;
    command({"SET", "sb-redis-server-pressure", "x"});  // refused or not, it makes Redis evict now
    command({"CONFIG", "SET", "maxmemory", "0"});
    command({"DEL", "sb-redis-server-pressure"});
    return command({"EXISTS", key}).integer == 0 && std::stoll("0" + info("evicted_keys")) > evicted;
  }

  // A field of INFO (e.g. "evicted_keys"), or "" when absent.
  std::string info(const std::string& field) const {
    const std::string text = command({"INFO"}).str;
    const std::string at = field + ":";
    size_t p = text.find(at);
    if (p == std::string::npos) return "";
    size_t end = text.find_first_of("\r\n", p);
    return text.substr(p + at.size(), end - p - at.size());
  }

  // A loopback port nothing listens on now.
  static int free_port() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
    close(fd);
    return port;
  }

 private:

  static std::string binary() {
    if (const char* b = std::getenv("SB_REDIS_SERVER"); b && *b) return b;
    if (const char* path = std::getenv("PATH")) {
      std::string p = path;
      size_t at = 0;
      while (at <= p.size()) {
        size_t end = p.find(':', at);
        if (end == std::string::npos) end = p.size();
        std::string candidate = p.substr(at, end - at) + "/redis-server";
        if (access(candidate.c_str(), X_OK) == 0) return candidate;
        at = end + 1;
      }
    }
    throw std::runtime_error("redis-server not found: run tools/install-deps.sh (Debian's redis-server)");
  }

  // Starts the server and waits until it answers PING; pid_ stays -1 when
  // it does not come up (port taken, bad arguments).
  void start() {
    const std::string bin = binary();
    std::vector<std::string> args = {bin,          "--port",       std::to_string(port_), "--bind", "127.0.0.1",
                                     "--dir",      dir_,           "--save",              "",       "--appendonly",
                                     "no",         "--daemonize",  "no",                  "--logfile",
                                     dir_ + "/redis.log", "--protected-mode", "yes"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    if (pid < 0) return;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) return;  // it exited: the port was taken, most likely
      RedisValue pong = command({"PING"});
      // With --requirepass the answer is NOAUTH: up all the same.
      if ((pong.type == REDIS_REPLY_STATUS && pong.str == "PONG") ||
          (pong.type == REDIS_REPLY_ERROR && pong.str.rfind("NOAUTH", 0) == 0)) {
        pid_ = pid;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }

  std::vector<std::string> extra_;
  std::string dir_;
  int port_ = -1;
  pid_t pid_ = -1;
};

}  // namespace sb::testing
