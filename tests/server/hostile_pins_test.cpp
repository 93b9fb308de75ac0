// Issue 47, finding 6 (its first part): pins were set before admission, so
// requests refused with 429 still pinned their cache_control prefixes. With
// the real binary, one running and one queued stream fill the server
// (--max-running 1 --max-queue 1); 20 Messages requests marking a system
// prompt with cache_control are then refused, and no pin exists. Once the
// streams end, the same request is admitted and pins (so the test sees pins).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/serve_process.h"

namespace sb::testing {
namespace {

using nlohmann::json;

const char* kKey = "hostile-pins-key-0123456789";

httplib::Headers with_key() { return {{"Authorization", std::string("Bearer ") + kKey}}; }

int64_t queue_depth(httplib::Client& c) {
  auto r = c.Get("/metrics", with_key());
  if (!r) return -1;
  const std::string line = "\nstatebank_queue_depth ";
  const size_t at = r->body.find(line);
  return at == std::string::npos ? -1 : std::atoll(r->body.c_str() + at + line.size());
}

size_t pin_count(httplib::Client& c) {
  auto r = c.Get("/v1/bank/pins", with_key());
  EXPECT_TRUE(r);
  return r ? json::parse(r->body)["pins"].size() : 0;
}

TEST(HostilePins, RefusedRequestsPinNothing) {
  const std::string root = make_temp_dir("sb_hostile_pins");
  ASSERT_EQ(gen_model(root + "/model", "qwen3_next", "tiny", 6), 0) << kGenModelFailed;
  ServeProcess server({SB_STATEBANK_BIN, "serve", "--model", root + "/model", "--port", "0", "--bank-dir",
                       root + "/bank", "--block-tokens", "64", "--threads", "1", "--ram-bank", "64M", "--api-key", kKey,
                       "--max-running", "1", "--max-queue", "1"});
  auto c = server.client();
  const std::string model = json::parse(c.Get("/v1/models", with_key())->body)["data"][0]["id"];

  // Two long streams: the one admitted first runs, the other waits in the
  // queue (either may be first).
  std::atomic<bool> stop{false};
  std::atomic<int> started{0};
  std::vector<std::thread> streams;
  struct JoinAtExit {  // a failed ASSERT returns early: the streams stop first
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~JoinAtExit() {
      stop = true;
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
  } join_at_exit{stop, streams};
  for (int i = 0; i < 2; ++i)
    streams.emplace_back([&, i] {
      httplib::Client sc("127.0.0.1", server.port);
      sc.set_read_timeout(300);
      const json body = {{"prompt", {1000 + i, 2000, 3000}}, {"max_tokens", 30000}, {"stream", true}};
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.headers = with_key();
      req.body = body.dump();
      req.set_header("Content-Type", "application/json");
      req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
        started = 1;
        return !stop.load();
      };
      (void)sc.send(req);
    });
  for (int i = 0; i < 600 && started == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(started.load(), 1) << "no stream started";
  for (int i = 0; i < 600 && queue_depth(c) != 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(queue_depth(c), 1) << "the second stream is not queued";

  const json pinning = {
      {"model", model},
      {"max_tokens", 2},
      {"system", {{{"type", "text"}, {"text", std::string(2000, 'a')}, {"cache_control", {{"type", "ephemeral"}}}}}},
      {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  for (int i = 0; i < 20; ++i) {
    auto r = c.Post("/v1/messages", with_key(), pinning.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 429) << r->body.substr(0, 300);
  }
  EXPECT_EQ(pin_count(c), 0u) << "refused requests pinned";

  stop = true;
  for (auto& t : streams) t.join();
  auto ok = c.Post("/v1/messages", with_key(), pinning.dump(), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body.substr(0, 300);
  EXPECT_GT(pin_count(c), 0u) << "an admitted request pins";
  EXPECT_EQ(server.stop(), 0);
  std::filesystem::remove_all(root);
}

// Issue 47, finding 6 (its second part): one tenant pinned without limit
// (360 one-hour pins held the RAM tier at 189 MiB of 8 MiB). Now a tenant
// holds at most --max-pins-per-tenant pins from cache_control; beyond, its
// requests are served unpinned, and another tenant still pins.
TEST(HostilePins, ATenantPinsAtMostItsBudget) {
  const std::string root = make_temp_dir("sb_hostile_pin_budget");
  ASSERT_EQ(gen_model(root + "/model", "qwen3_next", "tiny", 6), 0) << kGenModelFailed;
  {
    std::ofstream keys(root + "/keys");
    keys << "alice alice-key-0123456789abcdef admin\nbob bob-key-0123456789abcdef\n";
  }
  std::filesystem::permissions(root + "/keys",
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::replace);
  ServeProcess server({SB_STATEBANK_BIN, "serve", "--model", root + "/model", "--port", "0", "--bank-dir",
                       root + "/bank", "--block-tokens", "64", "--threads", "1", "--ram-bank", "64M",
                       "--api-keys-file", root + "/keys", "--max-pins-per-tenant", "3"});
  auto c = server.client();
  const httplib::Headers alice = {{"Authorization", "Bearer alice-key-0123456789abcdef"}};
  const httplib::Headers bob = {{"Authorization", "Bearer bob-key-0123456789abcdef"}};
  const std::string model = json::parse(c.Get("/v1/models", alice)->body)["data"][0]["id"];
  auto pinning = [&](int i) {
    return json{{"model", model},
                {"max_tokens", 2},
                {"system",
                 {{{"type", "text"},
                   {"text", "prompt " + std::to_string(i) + " " + std::string(2000, 'a')},
                   {"cache_control", {{"type", "ephemeral"}}}}}},
                {"messages", {{{"role", "user"}, {"content", "hi"}}}}}
        .dump();
  };
  auto pins = [&] {
    auto r = c.Get("/v1/bank/pins", alice);
    EXPECT_TRUE(r);
    return r ? json::parse(r->body)["pins"].size() : 0;
  };
  for (int i = 0; i < 8; ++i) {
    auto r = c.Post("/v1/messages", bob, pinning(i), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << "request " << i << " (beyond the budget, served unpinned): " << r->body.substr(0, 300);
  }
  EXPECT_EQ(pins(), 3u) << "bob pinned beyond his budget";
  auto r = c.Post("/v1/messages", alice, pinning(100), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(pins(), 4u) << "alice's pin counts against her budget, not bob's";
  EXPECT_EQ(server.stop(), 0);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace sb::testing
