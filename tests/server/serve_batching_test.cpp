// Equivalence under batching over HTTP: the real binary with continuous
// batching (--max-running 8, a small --batch-tokens so prompts prefill in
// several steps beside running decodes) serves a mix of completions from 8
// concurrent clients (shared prefixes restored from the bank, greedy and
// seeded sampling, logprobs, echo, stop strings, streams, and one client
// that hangs up mid-stream), and every response equals, bit for bit, the
// same request served alone with the bank bypassed.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include "tests/server/serve_process.h"

namespace sb::testing {
namespace {

using nlohmann::json;

struct Case {
  json body;
  bool stream = false;
};

std::vector<Case> make_cases() {
  std::vector<Case> cases;
  for (int i = 0; i < 24; ++i) {
    std::vector<int32_t> prompt;
    // Four shared prefixes of 150 tokens, tails that differ.
    for (int t = 0; t < 150; ++t) prompt.push_back(3000 + ((i % 4) * 997 + t * 17) % 40000);
    for (int t = 0; t < 5 + (i * 7) % 40; ++t) prompt.push_back(700 + (i * 131 + t * 3) % 20000);
    json body = {{"prompt", prompt}, {"max_tokens", 3 + i % 6}, {"logprobs", i % 3}, {"temperature", 0}};
    if (i % 3 == 1) body["temperature"] = 0.9, body["seed"] = 1000 + i, body["top_p"] = 0.95;
    if (i % 8 == 5) body["echo"] = true;
    if (i % 5 == 2) body["stop"] = json::array({"e", " t"});
    if (i % 7 == 3) {
      // A text prompt, for stop strings on real text.
      body["prompt"] = "The bank keeps prefixes of conversation number " + std::to_string(i % 4) + " and";
      body["stop"] = json::array({"a", "o"});
    }
    cases.push_back({body, i % 4 == 2});
  }
  return cases;
}

// What must be equal: the choices of a response, or of every chunk of a
// stream (ids and timestamps differ by design).
std::string outcome(const httplib::Result& r, bool stream) {
  if (!r) return "no response (" + httplib::to_string(r.error()) + ")";
  if (r->status != 200) return "status " + std::to_string(r->status) + ": " + r->body;
  if (!stream) return json::parse(r->body)["choices"].dump();
  std::string all;
  size_t pos = 0;
  while ((pos = r->body.find("data: ", pos)) != std::string::npos) {
    const size_t end = r->body.find("\n\n", pos);
    const std::string data = r->body.substr(pos + 6, end - pos - 6);
    all += data == "[DONE]" ? data : json::parse(data)["choices"].dump();
    all += "\n";
    pos = end;
  }
  return all;
}

httplib::Result send(httplib::Client& http, const Case& c, bool bypass) {
  json body = c.body;
  if (c.stream) body["stream"] = true;
  httplib::Headers h;
  if (bypass) h.emplace("X-Cache-Mode", "bypass");
  return http.Post("/v1/completions", h, body.dump(), "application/json");
}

TEST(ServeBatching, EightConcurrentClientsEachGetWhatTheyGetAloneWithTheBankBypassed) {
  const std::string root = make_temp_dir("sb_serve_batching");
  ASSERT_EQ(gen_model(root + "/model", "qwen3_next", "tiny", 4), 0) << kGenModelFailed;
  ServeProcess server({SB_STATEBANK_BIN, "serve", "--model", root + "/model", "--port", "0", "--bank-dir",
                       root + "/bank", "--block-tokens", "64", "--snapshot-every", "128", "--threads", "1",
                       "--max-running", "8", "--batch-tokens", "40"});
  const auto cases = make_cases();
  // Alone: one request at a time, the bank bypassed.
  std::vector<std::string> alone;
  {
    httplib::Client http = server.client();
    for (const Case& c : cases) alone.push_back(outcome(send(http, c, true), c.stream));
  }
  for (const auto& a : alone) ASSERT_EQ(a.rfind("status", 0), std::string::npos) << a;

  std::atomic<size_t> next{0};
  std::atomic<int> mismatches{0};
  std::mutex mu;
  std::string first;
  std::vector<std::thread> clients;
  for (int k = 0; k < 8; ++k)
    clients.emplace_back([&, k] {
      httplib::Client http = server.client();
      if (k == 0) {
        // One client hangs up after its first event; nobody else notices.
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.body = json{{"prompt", "hang up"}, {"max_tokens", 500}, {"stream", true}}.dump();
        req.set_header("Content-Type", "application/json");
        req.content_receiver = [](const char*, size_t, uint64_t, uint64_t) { return false; };
        (void)http.send(req);
      }
      // Every case twice: a cold or restored first pass, a restored second.
      for (size_t i; (i = next.fetch_add(1)) < 2 * cases.size();) {
        const Case& c = cases[i % cases.size()];
        const std::string got = outcome(send(http, c, false), c.stream);
        if (got != alone[i % cases.size()]) {
          mismatches++;
          std::lock_guard<std::mutex> lock(mu);
          if (first.empty())
            first = "case " + std::to_string(i % cases.size()) + ": " + got + "\nalone: " + alone[i % cases.size()];
        }
      }
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(mismatches.load(), 0) << first;

  auto bank = server.client().Get("/v1/bank");
  ASSERT_TRUE(bank);
  const json stats = json::parse(bank->body);
  EXPECT_GE(stats["engine"]["peak_batch"].get<int>(), 2) << "no step ever ran two sequences";
  EXPECT_GT(stats["engine"]["cached_tokens"].get<int64_t>(), 0) << "nothing was restored";
  EXPECT_EQ(server.stop(), 0);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace sb::testing
