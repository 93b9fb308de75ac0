// TestServer: a Server over a FakeBackend (with `engine`'s admission bounds)
// on a free loopback port, serving on its own thread for the length of one
// test.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <string>
#include <thread>

#include "server/server.h"
#include "tests/server/fake_backend.h"

namespace sb::testing {

class TestServer {
 public:
  explicit TestServer(ServerOptions options = {}, int64_t context_length = 1 << 20, const EngineOptions& engine = {})
      : backend(engine) {
    backend.context = context_length;
    options.host = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<Server>(&backend, &backend, options);
    Status s = server_->bind(&port);
    if (!s) throw std::runtime_error(s.to_string());
    thread_ = std::thread([this] { served = server_->serve(); });
  }
  ~TestServer() { (void)stop(); }

  Status stop() {
    Status s;
    if (thread_.joinable()) {
      s = server_->shutdown();
      thread_.join();
    }
    return s;
  }

  std::unique_ptr<httplib::Client> client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
    c->set_read_timeout(60);
    return c;
  }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port); }

  FakeBackend backend;
  int port = 0;
  Status served;

 private:
  std::unique_ptr<Server> server_;
  std::thread thread_;
};

}  // namespace sb::testing
