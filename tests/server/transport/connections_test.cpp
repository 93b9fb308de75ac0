// Connections (server/connections.h) with cpp-httplib's routing and no
// model: the share of request threads that clients which do not read may
// hold (issue 47, finding 3), and the next pipelined request waiting for its
// predecessor's answer.
#include "server/transport/connections.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/raw_socket.h"

namespace sb::testing {
namespace {

// An HttpServer on a free loopback port, listening on its own thread.
class Served {
 public:
  explicit Served(ConnectionOptions options) : http(options, nullptr) {
    // 1 MiB: more than a connection may leave for the poll thread to write.
    http.Get("/big", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(1 << 20, 'b'), "text/plain");
    });
    http.Get("/small", [this](const httplib::Request&, httplib::Response& res) {
      ++small_served;
      res.set_content("ok", "text/plain");
    });
    port = http.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { http.listen_after_bind(); });
    while (!http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~Served() {
    http.stop();
    thread.join();
  }

  HttpServer http;
  int port = 0;
  std::atomic<int> small_served{0};
  std::thread thread;
};

TEST(Connections, ClientsThatDoNotReadHoldAtMostTheirShareOfThreads) {
  ConnectionOptions o;
  o.threads = 8;
  o.slow_reader_threads = 2;
  o.slow_reader_threads_per_peer = 2;
  o.write_timeout = std::chrono::seconds(30);  // longer than the test: only the share frees threads
  Served s(o);
  // Eight clients ask for a large answer and read nothing; without a share
  // they would hold all 8 threads for the write timeout. (More than 8 at once
  // could find every thread still busy and be refused with a 503.)
  std::vector<int> slow;
  for (int i = 0; i < 8; ++i) {
    const int fd = pipeline_unread(s.port, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n", 1);
    ASSERT_GE(fd, 0);
    slow.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (int i = 0; i < 6; ++i) {
    httplib::Client c("127.0.0.1", s.port);
    c.set_read_timeout(10);
    auto r = c.Get("/small");
    ASSERT_TRUE(r) << "request " << i;
    EXPECT_EQ(r->status, 200) << "request " << i << ": " << r->body;
  }
  // Every slow reader got the start of its answer: the cut ones lost the end.
  for (int fd : slow) {
    std::string head(15, '\0');
    ASSERT_EQ(::recv(fd, head.data(), head.size(), MSG_WAITALL), 15);
    EXPECT_EQ(head, "HTTP/1.1 200 OK");
    ::close(fd);
  }
}

TEST(Connections, ThePipelinedNextRequestWaitsForTheAnswerBeforeIt) {
  ConnectionOptions o;
  o.threads = 4;
  o.write_timeout = std::chrono::seconds(30);
  Served s(o);
  // A 1 MiB answer not read, then a second request on the same connection.
  const int fd = pipeline_unread(s.port, "GET /big HTTP/1.1\r\nHost: x\r\n\r\nGET /small HTTP/1.1\r\nHost: x\r\n\r\n", 1);
  ASSERT_GE(fd, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(s.small_served.load(), 0) << "the second request ran before the first answer was written";
  // Read everything: both answers arrive, in order.
  const std::string all = read_until_closed(fd, std::chrono::seconds(2));
  ::close(fd);
  EXPECT_EQ(all.rfind("HTTP/1.1 200 OK", 0), 0u);
  const size_t second = all.find("HTTP/1.1 200 OK", 1);
  ASSERT_NE(second, std::string::npos);
  EXPECT_GT(second, size_t{1} << 20);
  EXPECT_EQ(s.small_served.load(), 1);
}

}  // namespace
}  // namespace sb::testing
