// Issue 34, the whole surface at once, with the real binary over HTTP: while
// 8 normal clients stream completions, 50 hostile requests (self-reaching
// and overflowing schemas, an 8 MB cache_salt, a 10 MB text prompt, a
// chunked upload without a key, over-long stop strings, a bodied request to
// an unknown route, and from issue 47 a body with 120,000 keys in one
// object) and 200 slowloris connections run; from issue 47 also 24
// connections that pipeline 100 requests for /bank/bank.js or /metrics and
// read nothing (findings 3, 4), and two tenants pinning a new prefix with
// cache_control again and again (finding 6), and a chat whose every mask is
// slow (finding 2). The hostile requests come from
// two tenants, the normal clients are a third. Asserted:
//  - every normal reply equals, chunk for chunk (text, token ids' logprobs,
//    finish reason), the same request's reply on the quiet server;
//  - /health answers within 1 s throughout (polled every 100 ms);
//  - the server's RSS grows by less than 256 MiB;
//  - no response is a 5xx;
//  - the pinning tenants hold at most their --max-pins-per-tenant each;
//  - SIGTERM, sent while two 1.4 MB many-key bodies are still arriving,
//    stops the server (exit 0) within its deadline.
// Printed, not asserted (no timed assertions): the normal clients'
// inter-token latency p50 and p99 each alone, all at once on the quiet
// server (the comparison: the same batch without the hostile load), and
// under load; and where the machine's CPU went in each phase (the step
// thread's share of a core, the attack threads', the whole machine's, the
// server's threads by name).
// In the timed variant the attack threads run under SCHED_IDLE: on a
// deployment the attackers' own CPU is on their machines, not the server's,
// and on a 2-core test machine it took a third of both cores from the step
// thread even at nice 19 (issue 47); the server's work on their behalf is
// what the comparison measures. SB_HOSTILE_SECONDS=60 (the `long` label) keeps the
// load on for that long, and the quiet comparison for a quarter of it.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/raw_socket.h"
#include "tests/server/serve_process.h"

namespace sb::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// The normal clients' tenant (admin: it reads the pins) and the two hostile ones.
const char* kKey = "hostile-load-key-0123456789";
const char* kHostileKeys[2] = {"mallory-key-0123456789abcdef", "trudy-key-0123456789abcdef"};
constexpr int kPinsPerTenant = 4;

int64_t rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  return -1;
}

httplib::Headers with_key() { return {{"Authorization", std::string("Bearer ") + kKey}}; }
// The hostile tenant of request k.
const char* hostile_key(int k) { return kHostileKeys[k % 2]; }

// The CPU seconds (user and system) in a /proc .../stat file, and the
// name it gives; false when unreadable.
bool read_stat(const fs::path& path, double* seconds, std::string* name) {
  std::ifstream in(path);
  const std::string all((std::istreambuf_iterator<char>(in)), {});
  const size_t open = all.find('('), close = all.rfind(')');
  if (open == std::string::npos || close == std::string::npos) return false;
  *name = all.substr(open + 1, close - open - 1);
  std::istringstream fields(all.substr(close + 2));  // from field 3, the state
  std::string f;
  long long ticks = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i)
    if (i == 14 || i == 15) ticks += std::atoll(f.c_str());  // utime, stime
  *seconds = static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
  return true;
}

// CPU seconds of each thread name of process `pid`, summed over its live
// threads.
std::map<std::string, double> cpu_by_thread_name(pid_t pid) {
  std::map<std::string, double> out;
  double seconds = 0;
  std::string name;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task"))
    if (read_stat(e.path() / "stat", &seconds, &name)) out[name] += seconds;
  return out;
}

// CPU seconds of process `pid`, all its threads (thread_name empty: the
// ended ones too) or the live ones of that name.
double cpu_seconds(pid_t pid, const std::string& thread_name = "") {
  if (!thread_name.empty()) return cpu_by_thread_name(pid)[thread_name];
  double seconds = 0;
  std::string name;
  return read_stat("/proc/" + std::to_string(pid) + "/stat", &seconds, &name) ? seconds : 0;
}

// Busy CPU seconds of the whole machine, all cores.
double machine_busy_seconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  long long user = 0, nice = 0, sys = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  in >> cpu >> user >> nice >> sys >> idle >> iowait >> irq >> softirq >> steal;
  return static_cast<double>(user + nice + sys + irq + softirq + steal) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Where the CPU went between construction and print().
class CpuSplit {
 public:
  explicit CpuSplit(pid_t server) : server_(server), start_names_(cpu_by_thread_name(server)) { start_ = now(); }
  void print(const char* phase, double attack_seconds) const {
    const Sample end = now();
    const double wall = std::chrono::duration<double>(end.at - start_.at).count();
    std::printf("hostile load: %s: %.1f s; CPU seconds: machine %.1f (of %.1f), server %.2f (step thread %.2f, "
                "%.0f%% of a core), hostile and pinning requests' threads %.2f\n",
                phase, wall, end.machine - start_.machine, wall * static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN)),
                end.server - start_.server, end.step - start_.step, 100 * (end.step - start_.step) / wall,
                attack_seconds);
    // Threads that ended in between (a request's mask worker) are not counted.
    const auto names = cpu_by_thread_name(server_);
    std::string by_name;
    for (const auto& [name, s] : names) {
      const auto was = start_names_.find(name);
      const double d = s - (was == start_names_.end() ? 0.0 : was->second);
      if (d >= 0.05) by_name += " " + name + " " + std::to_string(d).substr(0, std::to_string(d).find('.') + 3);
    }
    std::printf("hostile load: %s: server threads' CPU seconds by name:%s\n", phase, by_name.c_str());
  }

 private:
  struct Sample {
    Clock::time_point at;
    double machine, server, step;
  };
  Sample now() const {
    return {Clock::now(), machine_busy_seconds(), cpu_seconds(server_), cpu_seconds(server_, "sb-step")};
  }
  pid_t server_;
  std::map<std::string, double> start_names_;
  Sample start_;
};

// An attack thread; its CPU time is added to *seconds_us when `body`
// returns. `idle`: below the server's priority (the file's opening says
// why), for the timed variant whose latencies are compared. The one-pass
// variant (the suite's) runs its attackers at the normal priority: under
// SCHED_IDLE they got no core while anything else ran (a ctest neighbour,
// CI's build at nice 19, the normal clients' own steps), and the normal
// clients, which stream until the last attacker is done, kept the test at
// 100 s on CI for one pass of 50 hostile requests.
void run_attack(bool idle, std::atomic<int64_t>* cpu_us, const std::function<void()>& body) {
  // SCHED_IDLE: below nice 19, and a waking nice-0 thread (the server's step
  // thread, a normal client) takes the core from it at once.
  const sched_param none{};
  if (idle && sched_setscheduler(gettid(), SCHED_IDLE, &none) != 0)
    setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
  body();
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  *cpu_us += static_cast<int64_t>(t.tv_sec) * 1000000 + t.tv_nsec / 1000;
}

int64_t percentile_us(std::vector<int64_t> v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// A body with 120,000 keys in one object (1.4 MB): issue 47, finding 5.
std::string many_keys_body() {
  std::string keys;
  for (int i = 0; i < 120000; ++i) keys += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
  return R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2,"metadata":{)" + keys + "}}";
}

// The deterministic part of a streamed completion: each chunk's text,
// logprobs and finish reason (ids, timestamps and restore records differ).
// *gaps gets the time between successive pieces of the stream (inter-token
// latency, as the client sees it), in microseconds.
std::vector<std::string> stream_reply(int port, int client, int turn, int* status,
                                      std::vector<int64_t>* gaps = nullptr) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40 + 7 * client; ++i) prompt.push_back(100 + (client * 131 + turn * 17 + i * 29) % 5000);
  const json body = {{"prompt", prompt}, {"max_tokens", 12}, {"logprobs", 2}, {"temperature", 0}, {"stream", true}};
  std::string text;
  Clock::time_point last{};
  auto r = c.send(streamed_post("/v1/completions", with_key(), body, [&](const char* data, size_t n, uint64_t, uint64_t) {
    const auto now = Clock::now();
    if (gaps && last != Clock::time_point{})
      gaps->push_back(std::chrono::duration_cast<std::chrono::microseconds>(now - last).count());
    last = now;
    text.append(data, n);
    return true;
  }));
  std::vector<std::string> out;
  *status = r ? r->status : -1;
  if (!r) return out;
  size_t at = 0;
  while ((at = text.find("data: ", at)) != std::string::npos) {
    const size_t end = text.find("\n\n", at);
    const std::string data = text.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") break;
    const json chunk = json::parse(data, nullptr, false);
    if (chunk.is_discarded() || !chunk.contains("choices")) continue;
    for (const auto& ch : chunk["choices"])
      out.push_back(json{{"text", ch.value("text", "")},
                         {"logprobs", ch.value("logprobs", json())},
                         {"finish_reason", ch.value("finish_reason", json())}}
                        .dump());
  }
  return out;
}

json chat_with_schema(const json& schema) {
  return {{"messages", {{{"role", "user"}, {"content", "x"}}}},
          {"max_tokens", 8},
          {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}}};
}

// One hostile request of kind k; the HTTP status, or 0 when the server
// closed the connection without one (a refusal, never a 5xx).
int hostile(int port, int k) {
  const httplib::Headers with_key = {{"Authorization", std::string("Bearer ") + hostile_key(k)}};
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(30);
  c.set_write_timeout(30);
  const json any_self = {{"anyOf", {{{"$ref", "#"}}, {{"type", "string"}}}}};
  auto status = [](const httplib::Result& r) { return r ? r->status : 0; };
  switch (k % 9) {
    case 0:
      return status(
          c.Post("/v1/chat/completions", with_key, chat_with_schema({{"$ref", "#"}}).dump(), "application/json"));
    case 1:
      return status(c.Post("/v1/chat/completions", with_key, chat_with_schema(any_self).dump(), "application/json"));
    case 2:
      return status(c.Post("/v1/chat/completions", with_key,
                           chat_with_schema({{"type", "array"}, {"minItems", int64_t{1} << 62}}).dump(),
                           "application/json"));
    case 3:  // an 8 MB cache_salt and a 10 MB text prompt: bodies beyond any prompt that fits
    case 4: {
      const std::string body =
          k % 8 == 3 ? json{{"prompt", "hi"}, {"max_tokens", 2}, {"cache_salt", std::string(8 << 20, 's')}}.dump()
                     : json{{"prompt", std::string(10 << 20, 'a')}, {"max_tokens", 2}}.dump();
      // As a client that sends its body whatever the server says: the answer
      // comes before the body's end, or the connection is reset.
      return http_status(exchange(port,
                                  "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                  "Authorization: Bearer " +
                                      std::string(hostile_key(k)) + "\r\nContent-Length: " + std::to_string(body.size()) +
                                      "\r\n\r\n",
                                  body, 1, std::chrono::seconds(10)));
    }
    case 5:
      return status(c.Post("/v1/completions", with_key,
                           json{{"prompt", "hi"}, {"max_tokens", 2}, {"stop", {std::string(1 << 20, 'x')}}}.dump(),
                           "application/json"));
    case 6:  // a chunked upload without a key, meant to be 64 MB
      return http_status(exchange(port,
                                  "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\n",
                                  chunk(std::string(1 << 20, 'a')), 64, std::chrono::seconds(10)));
    case 7:  // issue 47: 120,000 keys in one object, 1.4 MB
      return status(c.Post("/v1/chat/completions", with_key, many_keys_body(), "application/json"));
    default:
      return status(c.Post("/v1/nothing-here", with_key, std::string(1 << 20, '{'), "application/json"));
  }
}

// Issue 47, finding 2: a chat constrained by an anyOf of 50 long string
// schemas, whose every mask is slow (about half its budget); hostile
// tenant 0's.
int slow_masks(int port) {
  json any = json::array();
  for (int i = 0; i < 50; ++i) any.push_back({{"type", "string"}, {"minLength", 100}, {"maxLength", 3000 + i}});
  json body = chat_with_schema({{"anyOf", any}});
  body["max_tokens"] = 16;
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(300);
  auto r = c.Post("/v1/chat/completions", {{"Authorization", std::string("Bearer ") + kHostileKeys[0]}}, body.dump(),
                  "application/json");
  return r ? r->status : 0;
}

// A Messages request from hostile tenant `t` marking a new system prompt
// (number `n`) with cache_control: a pin each, were there no budget.
int pin_spam(int port, const std::string& model, int t, int n) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60);
  const json body = {{"model", model},
                     {"max_tokens", 2},
                     {"system",
                      {{{"type", "text"},
                        {"text", "spam " + std::to_string(t) + " " + std::to_string(n) + " " + std::string(1500, 'z')},
                        {"cache_control", {{"type", "ephemeral"}, {"ttl", "1h"}}}}}},
                     {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  auto r = c.Post("/v1/messages", {{"x-api-key", kHostileKeys[t]}, {"anthropic-version", "2023-06-01"}}, body.dump(),
                  "application/json");
  return r ? r->status : 0;
}

TEST(HostileLoad, NormalClientsAreServedAsOnAQuietServer) {
  // A server that refuses a body before its end closes the connection: a
  // write after that must be an error here, not the end of the test.
  std::signal(SIGPIPE, SIG_IGN);
  const std::string root = make_temp_dir("sb_hostile_load");
  ASSERT_EQ(gen_model(root + "/model", "qwen3_next", "tiny", 9), 0) << kGenModelFailed;
  {
    std::ofstream keys(root + "/keys");
    keys << "quiet " << kKey << " admin\nmallory " << kHostileKeys[0] << "\ntrudy " << kHostileKeys[1] << "\n";
  }
  fs::permissions(root + "/keys", fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  const int kDeadlineS = 10;
  const char* seconds_env = std::getenv("SB_HOSTILE_SECONDS");
  const int seconds = seconds_env ? std::atoi(seconds_env) : 0;  // 0: one pass of the hostile requests
  ServeProcess server({SB_STATEBANK_BIN, "serve", "--model", root + "/model", "--port", "0", "--bank-dir",
                       root + "/bank", "--threads", "1", "--ram-bank", "128M", "--block-tokens", "64",
                       "--snapshot-every", "128", "--api-keys-file", root + "/keys", "--max-pins-per-tenant",
                       std::to_string(kPinsPerTenant), "--shutdown-deadline",
                       std::to_string(kDeadlineS)});
  const int port = server.port;
  constexpr int kClients = 8, kTurns = 2;
  const std::string model = json::parse(server.client().Get("/v1/models", with_key())->body)["data"][0]["id"];

  // The quiet server's replies, each client alone.
  std::vector<int64_t> alone_gaps;
  std::vector<std::vector<std::vector<std::string>>> quiet(kClients, std::vector<std::vector<std::string>>(kTurns));
  for (int i = 0; i < kClients; ++i)
    for (int t = 0; t < kTurns; ++t) {
      int status = 0;
      quiet[i][t] = stream_reply(port, i, t, &status, &alone_gaps);
      ASSERT_EQ(status, 200);
      ASSERT_FALSE(quiet[i][t].empty());
    }
  // The quiet server with the normal clients all at once, as under load: the
  // latency the load is compared with (the same batch, without the hostile).
  std::vector<std::vector<int64_t>> quiet_gaps_of(kClients);
  const CpuSplit quiet_cpu(server.pid());
  {
    const auto quiet_until = Clock::now() + std::chrono::seconds(seconds / 4);
    std::vector<std::thread> together;
    for (int i = 0; i < kClients; ++i)
      together.emplace_back([&, i] {
        for (int n = 0; n < 2 * kTurns || Clock::now() < quiet_until; ++n) {
          int status = 0;
          const auto chunks = stream_reply(port, i, n % kTurns, &status, &quiet_gaps_of[i]);
          EXPECT_EQ(status, 200);
          EXPECT_EQ(chunks, quiet[i][n % kTurns]) << "client " << i << ": batched differs from alone";
        }
      });
    for (auto& t : together) t.join();
  }
  quiet_cpu.print("quiet, all at once", 0);
  std::vector<int64_t> quiet_gaps;
  for (const auto& g : quiet_gaps_of) quiet_gaps.insert(quiet_gaps.end(), g.begin(), g.end());
  const int64_t rss_before = rss_kib(server.pid());
  ASSERT_GT(rss_before, 0);
  const auto load_until = Clock::now() + std::chrono::seconds(seconds);

  const CpuSplit loud_cpu(server.pid());
  std::atomic<int64_t> attack_cpu_us{0};
  std::atomic<bool> done{false};
  std::atomic<int64_t> rss_max{rss_before};
  std::atomic<int> health_failures{0};
  std::atomic<int64_t> health_worst_ms{0};
  std::thread health([&] {
    while (!done) {
      httplib::Client c("127.0.0.1", port);
      c.set_connection_timeout(1);
      c.set_read_timeout(1);
      const auto t0 = Clock::now();
      auto r = c.Get("/health");
      const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
      if (!r || r->status != 200 || ms > 1000) ++health_failures;
      if (ms > health_worst_ms) health_worst_ms = ms;
      const int64_t rss = rss_kib(server.pid());
      if (rss > rss_max) rss_max = rss;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  // 200 slowloris connections: a header begun and trickled a byte a second;
  // 24 slow readers: 100 pipelined requests each, nothing read (renewed
  // every 5 s, so that some are always fresh).
  // SB_HOSTILE_ONLY=readers|bodies|pins|masks: that kind of attack alone
  // (to see which costs the normal clients what; not in the suite).
  const std::string only = std::getenv("SB_HOSTILE_ONLY") ? std::getenv("SB_HOSTILE_ONLY") : "";
  auto want = [&](const char* kind) { return only.empty() || only == kind; };
  std::thread slow([&] {
    if (!want("readers")) return;
    run_attack(seconds > 0, &attack_cpu_us, [&] {
    std::vector<int> fds;
    for (int i = 0; i < 200; ++i) {
      int fd = connect_to(port);
      if (fd >= 0 && send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n")) fds.push_back(fd);
    }
    std::vector<int> readers;
    for (int round = 0; !done; ++round) {
      if (round % 5 == 0) {
        for (int fd : readers) ::close(fd);
        readers.clear();
        for (int i = 0; i < 24; ++i) {
          const std::string path = i % 6 == 5 ? "/metrics" : "/bank/bank.js";
          const int fd = pipeline_unread(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n", 100);
          if (fd >= 0) readers.push_back(fd);
        }
      }
      for (int fd : fds) send_all(fd, "X");
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    for (int fd : fds) ::close(fd);
    for (int fd : readers) ::close(fd);
  }); });
  std::mutex mu;
  std::vector<int> hostile_statuses;
  std::vector<int> pin_statuses;
  std::vector<int> mask_statuses;
  std::atomic<int> attackers_left{(want("bodies") ? 5 : 0) + (want("pins") ? 2 : 0) + (want("masks") ? 1 : 0)};
  std::vector<std::thread> attackers;
  if (want("masks"))
    attackers.emplace_back([&] { run_attack(seconds > 0, &attack_cpu_us, [&] {
      for (int n = 0; n < 1 || Clock::now() < load_until; ++n) {
        const int s = slow_masks(port);
        std::lock_guard<std::mutex> lock(mu);
        mask_statuses.push_back(s);
      }
      --attackers_left;
    }); });
  for (int a = 0; a < (want("bodies") ? 5 : 0); ++a)
    attackers.emplace_back([&, a] { run_attack(seconds > 0, &attack_cpu_us, [&] {
      for (int i = 0; i < 10 || Clock::now() < load_until; ++i) {
        const int s = hostile(port, a * 10 + i % 10);
        std::lock_guard<std::mutex> lock(mu);
        hostile_statuses.push_back(s);
      }
      --attackers_left;
    }); });
  for (int t = 0; t < (want("pins") ? 2 : 0); ++t)
    attackers.emplace_back([&, t] { run_attack(seconds > 0, &attack_cpu_us, [&] {
      for (int n = 0; n < 12 || Clock::now() < load_until; ++n) {
        const int s = pin_spam(port, model, t, n);
        std::lock_guard<std::mutex> lock(mu);
        pin_statuses.push_back(s);
      }
      --attackers_left;
    }); });
  // Each normal client streams its turns again and again until every
  // hostile request is answered (at least once through them all).
  struct Reply {
    int turn, status;
    std::vector<std::string> chunks;
  };
  std::vector<std::vector<Reply>> loud(kClients);
  std::vector<std::vector<int64_t>> loud_gaps(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&, i] {
      for (int n = 0; n < kTurns || attackers_left > 0 || Clock::now() < load_until; ++n) {
        Reply r{n % kTurns, 0, {}};
        r.chunks = stream_reply(port, i, r.turn, &r.status, &loud_gaps[i]);
        loud[i].push_back(std::move(r));
      }
    });
  for (auto& t : clients) t.join();
  for (auto& t : attackers) t.join();
  // The slow-reader thread is still running: its CPU is counted when it ends.
  loud_cpu.print("under load", static_cast<double>(attack_cpu_us.load()) / 1e6);

  size_t replies = 0;
  std::vector<int64_t> gaps;
  for (int i = 0; i < kClients; ++i) {
    gaps.insert(gaps.end(), loud_gaps[i].begin(), loud_gaps[i].end());
    for (const Reply& r : loud[i]) {
      ++replies;
      EXPECT_EQ(r.status, 200) << "client " << i << " turn " << r.turn;
      EXPECT_EQ(r.chunks, quiet[i][r.turn]) << "client " << i << " turn " << r.turn;
    }
  }
  if (want("bodies")) {
    ASSERT_GE(hostile_statuses.size(), 50u);
  }
  for (int s : hostile_statuses) {
    EXPECT_LT(s, 500) << "a hostile request got a 5xx";
    EXPECT_NE(s, 200) << "a hostile request was served";
  }
  for (int s : pin_statuses) EXPECT_TRUE(s == 200 || s == 429) << "a pinning request got " << s;
  // Served (its masks within their budget), or refused for the tenant's share.
  for (int s : mask_statuses) EXPECT_TRUE(s == 200 || s == 429) << "a slow-mask request got " << s;
  {
    httplib::Client c("127.0.0.1", port);
    auto r = c.Get("/v1/bank/pins", with_key());
    ASSERT_TRUE(r);
    EXPECT_LE(json::parse(r->body)["pins"].size(), size_t{2 * kPinsPerTenant}) << "a tenant pinned beyond its budget";
  }
  std::printf("hostile load: %d s, %zu normal replies, %zu hostile and %zu pinning requests, worst /health %lld ms, "
              "RSS %lld -> at most %lld KiB\n",
              seconds, replies, hostile_statuses.size(), pin_statuses.size(),
              static_cast<long long>(health_worst_ms.load()), static_cast<long long>(rss_before),
              static_cast<long long>(rss_max.load()));
  std::printf("hostile load: inter-token latency p50/p99 alone %lld/%lld us, %d clients at once quiet %lld/%lld us, "
              "under load %lld/%lld us (p99 %.1fx quiet; not asserted)\n",
              static_cast<long long>(percentile_us(alone_gaps, 0.5)),
              static_cast<long long>(percentile_us(alone_gaps, 0.99)), kClients,
              static_cast<long long>(percentile_us(quiet_gaps, 0.5)),
              static_cast<long long>(percentile_us(quiet_gaps, 0.99)), static_cast<long long>(percentile_us(gaps, 0.5)),
              static_cast<long long>(percentile_us(gaps, 0.99)),
              static_cast<double>(percentile_us(gaps, 0.99)) / static_cast<double>(std::max<int64_t>(1, percentile_us(quiet_gaps, 0.99))));
  EXPECT_EQ(health_failures.load(), 0) << "worst /health: " << health_worst_ms.load() << " ms";
  EXPECT_LT(rss_max.load() - rss_before, int64_t{256} << 10) << "RSS grew from " << rss_before << " KiB";

  // Two many-key bodies still arriving (half sent) when SIGTERM comes.
  const std::string body = many_keys_body();
  std::vector<int> uploads;
  for (int i = 0; i < 2; ++i) {
    const int fd = connect_to(port);
    ASSERT_GE(fd, 0);
    send_all(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Authorization: Bearer " + std::string(hostile_key(i)) +
                     "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body.substr(0, body.size() / 2));
    uploads.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = Clock::now();
  EXPECT_EQ(server.stop(), 0);
  const auto stop_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  std::printf("hostile load: SIGTERM to exit %lld ms (two bodies arriving; deadline %d s)\n",
              static_cast<long long>(stop_ms), kDeadlineS);
  EXPECT_LT(stop_ms, kDeadlineS * 1000);
  done = true;
  health.join();
  slow.join();
  for (int fd : uploads) ::close(fd);
  fs::remove_all(root);
}

}  // namespace
}  // namespace sb::testing
