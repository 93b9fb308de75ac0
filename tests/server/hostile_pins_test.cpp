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
#include <cstdio>
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
      (void)sc.send(streamed_post("/v1/completions", with_key(), body, [&](const char*, size_t, uint64_t, uint64_t) {
        started = 1;
        return !stop.load();
      }));
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

// The pin budget's flags take hostile values as clear errors: one line
// naming the flag, exit 2, before anything starts.
TEST(HostilePins, HostileBudgetFlagsAreClearErrors) {
  const std::pair<std::string, std::string> cases[] = {
      {"--max-pins-per-tenant -1", "must be in [0, 1048576]"},
      {"--max-pins-per-tenant 1048577", "must be in [0, 1048576]"},
      {"--max-pins-per-tenant abc", "wants an integer"},
      {"--max-pins-per-tenant 99999999999999999999999", "wants an integer"},
      {"--max-pins-per-tenant 1.5", "wants an integer"},
      {"--max-pinned-bytes -5", "does not start with a number"},
      {"--max-pinned-bytes 10Q", "unknown suffix"},
      {"--max-pinned-bytes 99999999999999T", "too large"},
      {"--max-pinned-bytes 184467440737095516160", "too large"},
  };
  for (const auto& [flags, message] : cases) expect_serve_refuses(flags, message);
}

int64_t metric(httplib::Client& c, const httplib::Headers& h, const std::string& line) {
  auto r = c.Get("/metrics", h);
  if (!r) return -1;
  const size_t at = r->body.find("\n" + line + " ");
  return at == std::string::npos ? -1 : std::atoll(r->body.c_str() + at + line.size() + 2);
}

json cache_control_request(const std::string& model, int i) {
  return {{"model", model},
          {"max_tokens", 2},
          {"system",
           {{{"type", "text"},
             {"text", "prompt " + std::to_string(i) + " " + std::string(2000, 'a')},
             {"cache_control", {{"type", "ephemeral"}, {"ttl", "1h"}}}}}},
          {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
}

// A zero budget (of pins, or of pinned bytes) is sensible: no client pins,
// every request is served unpinned, and each refusal is counted by budget.
TEST(HostilePins, ZeroBudgetsPinNothingAndCountTheRefusals) {
  const std::string root = make_temp_dir("sb_hostile_pin_zero");
  ASSERT_EQ(gen_model(root + "/model", "qwen3_next", "tiny", 6), 0) << kGenModelFailed;
  for (const std::string budget : {"pins", "bytes"}) {
    ServeProcess server({SB_STATEBANK_BIN, "serve", "--model", root + "/model", "--port", "0", "--bank-dir",
                         root + "/bank-" + budget, "--block-tokens", "64", "--threads", "1", "--ram-bank", "64M",
                         "--api-key", kKey, budget == "pins" ? "--max-pins-per-tenant" : "--max-pinned-bytes", "0"});
    auto c = server.client();
    const std::string model = json::parse(c.Get("/v1/models", with_key())->body)["data"][0]["id"];
    for (int i = 0; i < 3; ++i) {
      auto r = c.Post("/v1/messages", with_key(), cache_control_request(model, i).dump(), "application/json");
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 200) << budget << ": " << r->body.substr(0, 300);
    }
    EXPECT_EQ(pin_count(c), 0u) << "a zero " << budget << " budget pinned";
    EXPECT_EQ(metric(c, with_key(), "statebank_pins_refused_total{budget=\"" + budget + "\"}"), 3) << budget;
    EXPECT_EQ(server.stop(), 0);
  }
  std::filesystem::remove_all(root);
}

// Issue 47, finding 6: pins held the RAM tier at 189 MiB of 8 MiB. Now
// pinned bytes count in each tier's budget: with budgets that allow any
// number of pins (an admin's pins through the API, a client's through
// cache_control with a huge --max-pinned-bytes), RAM and SSD stay within
// their budgets while far more prefixes are pinned than fit (each prefix is
// four 64-token blocks and a snapshot, about 80 KiB in RAM: 24 of them held
// the 400 KiB RAM tier at 3.2 MiB and the 40 KiB SSD tier at 115 KiB).
TEST(HostilePins, PinsNeverHoldATierOverItsBudget) {
  const std::string root = make_temp_dir("sb_hostile_pin_tiers");
  ASSERT_EQ(gen_model(root + "/model", "qwen3_next", "tiny", 6), 0) << kGenModelFailed;
  ServeProcess server({SB_STATEBANK_BIN, "serve", "--model", root + "/model", "--port", "0", "--bank-dir",
                       root + "/bank", "--block-tokens", "64", "--threads", "1", "--ram-bank", "400K", "--ssd-bank",
                       "40K", "--api-key", kKey, "--max-pins-per-tenant", "1048576", "--max-pinned-bytes", "16T"});
  auto c = server.client();
  const std::string model = json::parse(c.Get("/v1/models", with_key())->body)["data"][0]["id"];
  auto tiers_within_budget = [&](const std::string& when) {
    auto r = c.Get("/v1/bank", with_key());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json tiers = json::parse(r->body)["tiers"];
    ASSERT_EQ(tiers.size(), 2u) << r->body.substr(0, 300);  // RAM and SSD
    for (const auto& t : tiers) {
      std::printf("%s: %s tier %llu of %llu bytes\n", when.c_str(), t["name"].get<std::string>().c_str(),
                  static_cast<unsigned long long>(t["bytes"].get<uint64_t>()),
                  static_cast<unsigned long long>(t["budget_bytes"].get<uint64_t>()));
      EXPECT_GT(t["bytes"].get<uint64_t>(), 0u) << when << ": " << t.dump();
      EXPECT_LE(t["bytes"].get<uint64_t>(), t["budget_bytes"].get<uint64_t>()) << when << ": " << t.dump();
    }
  };
  for (int i = 0; i < 12; ++i) {
    auto r = c.Post("/v1/messages", with_key(), cache_control_request(model, i).dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body.substr(0, 300);
  }
  tiers_within_budget("cache_control pins");
  // An admin's pins through the API, set before the prefixes are computed.
  for (int i = 0; i < 12; ++i) {
    const std::string prompt = "admin prompt " + std::to_string(i) + " " + std::string(3000, 'b');
    auto p = c.Post("/v1/bank/pins", with_key(), json{{"prompt", prompt}, {"ttl_s", 3600}}.dump(), "application/json");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->status, 200) << p->body.substr(0, 300);
    auto r = c.Post("/v1/completions", with_key(), json{{"prompt", prompt}, {"max_tokens", 2}}.dump(),
                    "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body.substr(0, 300);
  }
  EXPECT_GE(pin_count(c), 12u);
  tiers_within_budget("admin pins");
  EXPECT_EQ(server.stop(), 0);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace sb::testing
