// Load on loopback: 8 concurrent clients against the real binary for
// SB_LOAD_SECONDS (default 10; the `long` run uses 60), each sending
// conversations that share prefixes, every response checked against the same
// request with the bank bypassed. No error, no crash, a clean SIGTERM exit.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include "tests/server/serve_process.h"
#include "tests/util/temp_dir.h"

namespace sb::testing {
namespace {

using nlohmann::json;

TEST(ServeLoad, ConcurrentClientsAllEqualToBypass) {
  const char* secs = std::getenv("SB_LOAD_SECONDS");
  const int seconds = secs ? std::atoi(secs) : 10;
  TempDir dir;
  const std::string root = dir.path();
  const char* tok = std::getenv("SB_TOKENIZER_DIR");
  ASSERT_NE(tok, nullptr);
  ASSERT_EQ(run_command({SB_STATEBANK_BIN, "gen-model", "--arch", "qwen3_next", "--preset", "tiny", "--seed", "4",
                         "--tokenizer", tok, root + "/model"}),
            0);
  ServeProcess server({SB_STATEBANK_BIN, "serve", "--model", root + "/model", "--port", "0", "--bank-dir", root + "/bank",
                       "--block-tokens", "64", "--snapshot-every", "128", "--threads", "1", "--max-running", "8",
                       "--max-queue", "256"});
  std::atomic<int> requests{0}, errors{0}, cached{0};
  std::mutex report_mu;
  std::string first_error;
  auto report = [&](const std::string& what) {
    errors++;
    std::lock_guard<std::mutex> lock(report_mu);
    if (first_error.empty()) first_error = what;
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      httplib::Client http = server.client();
      int round = 0;
      do {
        // Four shared prefixes (200 tokens), tails that differ by client and round.
        std::vector<int32_t> prompt;
        for (int i = 0; i < 200; ++i) prompt.push_back(2000 + ((c % 4) * 1000 + i * 13) % 30000);
        for (int i = 0; i < 10 + round % 7; ++i) prompt.push_back(500 + (c * 31 + round * 7 + i) % 9000);
        json body = {{"prompt", prompt}, {"max_tokens", 4}, {"logprobs", 2}, {"temperature", 0}};
        if (round % 3 == 1) body["temperature"] = 0.8, body["seed"] = round;
        bool stream = round % 4 == 2;
        json served, cold;
        for (bool bypass : {false, true}) {
          httplib::Headers h;
          if (bypass) h.emplace("X-Cache-Mode", "bypass");
          auto r = http.Post("/v1/completions", h, body.dump(), "application/json");
          if (!r || r->status != 200) {
            report(r ? r->body : "no response (" + httplib::to_string(r.error()) + ")");
            return;
          }
          (bypass ? cold : served) = json::parse(r->body);
        }
        requests += 2;
        if (served["choices"].dump() != cold["choices"].dump()) report("differs from bypass: " + served.dump());
        if (served["restore"]["restore_point"].get<int64_t>() > 0) cached++;
        if (stream) {
          body["stream"] = true;
          auto r = http.Post("/v1/completions", body.dump(), "application/json");
          if (!r || r->status != 200 || r->body.find("data: [DONE]") == std::string::npos) report("stream failed");
          requests++;
        }
        ++round;
      } while (std::chrono::steady_clock::now() < until);
    });
  }
  for (auto& t : clients) t.join();
  std::printf("load: %d requests in %d s from 8 clients, %d served from the bank, %d errors\n", requests.load(), seconds,
              cached.load(), errors.load());
  EXPECT_EQ(errors.load(), 0) << first_error;
  EXPECT_GE(requests.load(), 16);
  EXPECT_GT(cached.load(), 0);
  auto health = server.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace sb::testing
