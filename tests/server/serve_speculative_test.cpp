// Speculative decoding over HTTP (issue 38), the real binary: responses with
// n-gram speculation equal those with it off (choices, logprobs, every
// streamed chunk), greedy and seeded, 4 clients at once; every response
// carries its `speculative` record, /metrics sums them, a bad `speculative`
// field is a 400 naming it, and bad flags stop `serve` with exit code 2.
// `--speculative off` leaves a checkpoint's MTP head unloaded.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "tests/server/serve_process.h"

namespace sb::testing {
namespace {

using nlohmann::json;

// What must be equal: the choices of a response, or of every chunk of a stream.
std::string choices(const std::string& body, bool stream) {
  if (!stream) return json::parse(body)["choices"].dump();
  std::string all;
  for (size_t pos = 0; (pos = body.find("data: ", pos)) != std::string::npos;) {
    const size_t end = body.find("\n\n", pos);
    const std::string data = body.substr(pos + 6, end - pos - 6);
    all += (data == "[DONE]" ? data : json::parse(data)["choices"].dump()) + "\n";
    pos = end;
  }
  return all;
}

// The record of a response: the body's, or a stream's final chunk's.
json record(const std::string& body, bool stream) {
  if (!stream) return json::parse(body)["speculative"];
  const size_t at = body.rfind("\"speculative\":");
  if (at == std::string::npos) return nullptr;
  const size_t start = body.rfind("data: ", at) + 6;
  return json::parse(body.substr(start, body.find("\n\n", start) - start))["speculative"];
}

// A prompt that repeats itself, and a logit bias towards four of its tokens
// so that the random model's output repeats too (n-gram drafts match some).
json body_of(int i, const std::string& mode, bool stream) {
  json prompt = json::array(), bias = json::object();
  for (int rep = 0; rep < 4; ++rep)
    for (int t = 0; t < 20; ++t) prompt.push_back(1000 + (i * 389 + t * 53) % 30000);
  for (int t = 0; t < 4; ++t) bias[std::to_string(prompt[t].get<int>())] = 60;
  json body = {{"prompt", prompt},
               {"max_tokens", 24},
               {"logprobs", 2},
               {"logit_bias", bias},
               {"temperature", 0},
               {"stream", stream},
               {"speculative", {{"mode", mode}, {"draft_max", 4}}}};
  if (i % 2 == 1) body["temperature"] = 0.8, body["seed"] = 50 + i;
  return body;
}

TEST(ServeSpeculative, NgramEqualsOffOverHttpAndIsReported) {
  const std::string root = make_temp_dir("sb_serve_spec");
  ASSERT_EQ(gen_model(root + "/model", "qwen3_next", "tiny", 4), 0) << kGenModelFailed;
  // Bad flags end `serve` with exit code 2 before it listens.
  EXPECT_EQ(run_command({SB_STATEBANK_BIN, "serve", "--model", root + "/model", "--speculative", "mtp"}), 2);
  EXPECT_EQ(run_command({SB_STATEBANK_BIN, "serve", "--model", root + "/model", "--speculative", "eagle"}), 2);
  EXPECT_EQ(run_command({SB_STATEBANK_BIN, "serve", "--model", root + "/model", "--draft-max", "0"}), 2);
  EXPECT_EQ(run_command({SB_STATEBANK_BIN, "serve", "--model", root + "/model", "--mtp-vocab", "-1"}), 2);
  EXPECT_EQ(run_command({SB_STATEBANK_BIN, "serve", "--model", root + "/model", "--speculative-acceptance", "lenient"}),
            2);
  ServeProcess server({SB_STATEBANK_BIN, "serve", "--model", root + "/model", "--port", "0", "--bank-dir",
                       root + "/bank", "--block-tokens", "64", "--threads", "1", "--max-running", "4"});
  std::atomic<int> next{0}, mismatches{0};
  std::atomic<int64_t> drafted{0};
  std::mutex mu;
  std::string first;
  std::vector<std::thread> clients;
  for (int k = 0; k < 4; ++k)
    clients.emplace_back([&] {
      httplib::Client http = server.client();
      for (int i; (i = next.fetch_add(1)) < 12;) {
        const bool stream = i % 3 == 2;
        auto off = http.Post("/v1/completions", body_of(i, "off", stream).dump(), "application/json");
        auto on = http.Post("/v1/completions", body_of(i, "ngram", stream).dump(), "application/json");
        std::string why;
        if (!off || !on || off->status != 200 || on->status != 200) {
          why = "no 200: " + (on ? on->body : std::string("no response"));
        } else if (choices(off->body, stream) != choices(on->body, stream)) {
          why = "ngram " + choices(on->body, stream) + "\noff " + choices(off->body, stream);
        } else {
          const json a = record(on->body, stream), b = record(off->body, stream);
          if (a["mode"] != "ngram" || b["mode"] != "off" || b["drafted"] != 0 || a["decode_tokens"] != 23)
            why = "records " + a.dump() + " / " + b.dump();
          drafted += a["drafted"].get<int64_t>();
        }
        if (!why.empty()) {
          ++mismatches;
          std::lock_guard<std::mutex> lock(mu);
          if (first.empty()) first = "request " + std::to_string(i) + ": " + why;
        }
      }
    });
  for (auto& c : clients) c.join();
  EXPECT_EQ(mismatches.load(), 0) << first;
  EXPECT_GT(drafted.load(), 0);
  httplib::Client http = server.client();
  const std::string metrics = http.Get("/metrics")->body;
  EXPECT_NE(metrics.find("statebank_speculative_drafted_tokens_total " + std::to_string(drafted.load()) + "\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("statebank_decode_tokens_per_step "), std::string::npos);
  // The measured verify-row cost: a share of a step, in (0, 1].
  const size_t at = metrics.find("\nstatebank_speculative_verify_row_cost ");
  ASSERT_NE(at, std::string::npos) << metrics;
  const double row_cost = std::stod(metrics.substr(at + 39));
  EXPECT_GT(row_cost, 0.0);
  EXPECT_LE(row_cost, 1.0);
  // Rejection acceptance, asked per request: a greedy request's tokens are
  // still plain decoding's, and the record says how drafts were judged.
  for (const bool stream : {false, true}) {
    json body = body_of(0, "ngram", stream);
    body["speculative"]["acceptance"] = "rejection";
    auto on = http.Post("/v1/completions", body.dump(), "application/json");
    auto off = http.Post("/v1/completions", body_of(0, "off", stream).dump(), "application/json");
    ASSERT_TRUE(on && off);
    ASSERT_EQ(on->status, 200) << on->body;
    EXPECT_EQ(choices(on->body, stream), choices(off->body, stream));
    EXPECT_EQ(record(on->body, stream)["acceptance_mode"], "rejection");
    EXPECT_EQ(record(off->body, stream)["acceptance_mode"], "exact");
  }
  // A bad field is a 400 naming it.
  for (const json& bad : {json{{"mode", "mtp"}}, json{{"draft_max", 99}}, json{{"depth", 2}}, json("ngram"),
                          json{{"acceptance", "lenient"}}, json{{"acceptance", 1}}}) {
    json body = {{"prompt", "Hi"}, {"max_tokens", 2}, {"speculative", bad}};
    auto r = http.Post("/v1/completions", body.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << bad.dump();
    EXPECT_EQ(json::parse(r->body)["error"]["param"].get<std::string>().rfind("speculative", 0), 0u) << r->body;
  }
  EXPECT_EQ(server.stop(), 0);
  std::filesystem::remove_all(root);
}

// On a checkpoint with an MTP head, `--speculative off` leaves the head
// unloaded: a request's `mtp` is a 400 there, while a default server drafts
// with the head; the head changes no bit of a response.
TEST(ServeSpeculative, OffLeavesTheMtpHeadUnloaded) {
  const std::string root = make_temp_dir("sb_serve_spec");
  ASSERT_EQ(gen_model(root + "/model", "qwen3_next", "tiny", 4, {"--mtp-layers", "1"}), 0) << kGenModelFailed;
  std::string plain;
  for (const char* mode : {"off", "auto"}) {
    SCOPED_TRACE(mode);
    ServeProcess server({SB_STATEBANK_BIN, "serve", "--model", root + "/model", "--port", "0", "--bank-dir",
                         root + "/bank-" + mode, "--block-tokens", "64", "--threads", "1", "--speculative", mode});
    httplib::Client http = server.client();
    json body = body_of(0, "mtp", false);
    auto r = http.Post("/v1/completions", body.dump(), "application/json");
    ASSERT_TRUE(r);
    if (std::string(mode) == "off") {
      EXPECT_EQ(r->status, 400) << r->body;
      EXPECT_NE(r->body.find("MTP head"), std::string::npos) << r->body;
      body.erase("speculative");
      r = http.Post("/v1/completions", body.dump(), "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      EXPECT_EQ(record(r->body, false)["mode"], "off");
      plain = choices(r->body, false);
    } else {
      ASSERT_EQ(r->status, 200) << r->body;
      EXPECT_EQ(record(r->body, false)["mode"], "mtp");
      EXPECT_GT(record(r->body, false)["drafted"].get<int64_t>(), 0);
      EXPECT_EQ(choices(r->body, false), plain);
    }
    EXPECT_EQ(server.stop(), 0);
  }
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace sb::testing
