// Issue 47, findings 3 and 4, against the real binary: clients that send
// requests and do not read the answers (a ~1 KB receive buffer, pipelined
// requests, nothing read).
//  - finding 3: 60 such connections pipelining 100 GET /bank/bank.js each
//    held every request thread in a blocking write, and completions were
//    503; now the page's files are answered without a request thread and a
//    response waits on its client without one, so a completion is served;
//  - finding 4: 4 such connections pipelining GET /metrics stalled /health
//    for 5-15 s on a server without keys; now /health and /metrics answer;
//  - a response's time waiting on its client is bounded as a whole
//    (--write-timeout), not per write: a client that reads a trickle, enough
//    to renew any per-write timeout, is cut off.
// Deadlines are generous ("within N s") where the point is "not wedged".
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
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

const char* kKey = "hostile-readers-key-0123456789";
const std::string kAsset = "GET /bank/bank.js HTTP/1.1\r\nHost: x\r\n\r\n";

class HostileReaders : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = make_temp_dir("sb_hostile_readers");
    model_ = root_ + "/model";
    ASSERT_EQ(gen_model(model_, "qwen3_next", "tiny", 5), 0) << kGenModelFailed;
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  // A server with few request threads (2 slots + 16 spares), so that a
  // crowd of slow readers would hold them all.
  static std::vector<std::string> args(std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {SB_STATEBANK_BIN, "serve",         "--model", model_, "--port", "0", "--ssd", "off",
                                  "--threads",      "1",             "--ram-bank", "64M", "--max-running", "1",
                                  "--max-queue",    "1"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  static std::string root_, model_;
};
std::string HostileReaders::root_, HostileReaders::model_;

// How many responses (status lines) `data` holds.
int responses_in(const std::string& data) {
  int n = 0;
  for (size_t at = data.find("HTTP/1.1 "); at != std::string::npos; at = data.find("HTTP/1.1 ", at + 1)) ++n;
  return n;
}

TEST_F(HostileReaders, SlowReadersOfThePageLeaveCompletionsServed) {
  ServeProcess server(args({"--api-key", kKey}));
  std::vector<int> slow;
  for (int i = 0; i < 60; ++i) {
    const int fd = pipeline_unread(server.port, kAsset, 100);
    ASSERT_GE(fd, 0) << "connection " << i;
    slow.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // each has its first answer under way
  httplib::Client c("127.0.0.1", server.port);
  c.set_read_timeout(30);
  const httplib::Headers key = {{"Authorization", std::string("Bearer ") + kKey}};
  for (int i = 0; i < 3; ++i) {
    auto r = c.Post("/v1/completions", key, json{{"prompt", "hi"}, {"max_tokens", 4}}.dump(), "application/json");
    ASSERT_TRUE(r) << "completion " << i;
    EXPECT_EQ(r->status, 200) << "completion " << i << ": " << r->body;
  }
  // The slow readers were answered too, as far as they read.
  std::string first(64, '\0');
  const ssize_t n = ::recv(slow[0], first.data(), first.size(), 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(first.rfind("HTTP/1.1 200 OK", 0), 0u) << first;
  for (int fd : slow) ::close(fd);
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(HostileReaders, SlowReadersOfMetricsDelayNeitherHealthNorMetrics) {
  ServeProcess server(args());  // no keys: /metrics is open to anyone
  std::vector<int> slow;
  for (int i = 0; i < 4; ++i) {
    const int fd = pipeline_unread(server.port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 100);
    ASSERT_GE(fd, 0);
    slow.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (int i = 0; i < 5; ++i) {
    httplib::Client c("127.0.0.1", server.port);
    c.set_read_timeout(3);  // the stall was 5-15 s
    const auto t0 = Clock::now();
    auto health = c.Get("/health");
    auto metrics = c.Get("/metrics");
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    ASSERT_TRUE(health && metrics) << "round " << i;
    EXPECT_EQ(health->status, 200);
    EXPECT_EQ(metrics->status, 200);
    EXPECT_NE(metrics->body.find("statebank_"), std::string::npos);
    std::printf("slow /metrics readers: /health and /metrics answered in %lld ms\n", static_cast<long long>(ms));
  }
  for (int fd : slow) ::close(fd);
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(HostileReaders, AResponseWaitsOnItsClientAtMostTheWriteTimeoutInAll) {
  ServeProcess server(args({"--write-timeout", "1"}));
  const int fd = pipeline_unread(server.port, kAsset, 100);
  ASSERT_GE(fd, 0);
  // 512 bytes every 100 ms: each write moves within any per-write timeout,
  // but a 12 KB answer takes over 2 s once the buffers between are full.
  std::string got;
  bool ended = false;
  const auto trickle_until = Clock::now() + std::chrono::seconds(4);
  while (!ended && Clock::now() < trickle_until) {
    char buf[512];
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) ended = true;
    if (n > 0) got.append(buf, static_cast<size_t>(n));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Then everything left, at full speed: a server that kept the connection
  // would send all 100 answers now.
  if (!ended) got += read_until_closed(fd, std::chrono::seconds(10));
  ::close(fd);
  EXPECT_EQ(got.rfind("HTTP/1.1 200 OK", 0), 0u);
  EXPECT_LT(responses_in(got), 100) << "the connection was not cut: " << got.size() << " bytes";
  std::printf("trickle reader: %d answers (%zu bytes) before the cut\n", responses_in(got), got.size());
  // The server itself is unharmed, and counted the cut.
  httplib::Client c("127.0.0.1", server.port);
  auto r = c.Get("/bank/bank.js");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("\nstatebank_responses_cut_total{reason=\"write_timeout\"} 1\n"), std::string::npos)
      << m->body.substr(0, 2000);
  EXPECT_EQ(server.stop(), 0);
}

// The slow-reader limits' flags take hostile values as clear errors.
TEST(HostileReaderFlags, HostileValuesAreClearErrors) {
  const std::pair<std::string, std::string> cases[] = {
      {"--slow-reader-threads -1", "must be in [0, 1048576]"},
      {"--slow-reader-threads many", "wants an integer"},
      {"--slow-reader-threads-per-peer 99999999999999999999", "wants an integer"},
      {"--response-buffer 0", "between 4K and 1G"},
      {"--response-buffer 2G", "between 4K and 1G"},
      {"--response-buffer 1X", "unknown suffix"},
      {"--response-buffer-total 64K --response-buffer 1M", "between --response-buffer and 64G"},
      {"--response-buffer-total 65G", "between --response-buffer and 64G"},
      {"--write-timeout 0", "must be in [1, 3600]"},
  };
  for (const auto& [flags, message] : cases) expect_serve_refuses(flags, message);
}

}  // namespace
}  // namespace sb::testing
