// End to end over HTTP with the real binary and a generated checkpoint:
// conversations that share a long prefix, a server restart in the middle
// (the SSD tier carries the bank across), and every response equal, token
// for token and logprob digit for digit, to the same request with
// X-Cache-Mode: bypass; cached_tokens > 0 wherever a prefix was shared.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/server/bypass_compare.h"
#include "tests/server/serve_process.h"
#include "tests/util/temp_dir.h"

namespace sb::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class ServeE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    root_ = dir_->path();
    model_ = root_ + "/model";
    const char* tok = std::getenv("SB_TOKENIZER_DIR");
    ASSERT_NE(tok, nullptr) << "SB_TOKENIZER_DIR is not set (run through ctest)";
    ASSERT_EQ(run_command({SB_STATEBANK_BIN, "gen-model", "--arch", "qwen3_next", "--preset", "tiny", "--seed", "3",
                           "--tokenizer", tok, model_}),
              0);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  static std::vector<std::string> serve_args(const std::string& bank) {
    return {SB_STATEBANK_BIN, "serve",          "--model",       model_, "--port",      "0",   "--bank-dir",
            bank,             "--block-tokens", "64",            "--snapshot-every", "128", "--threads", "1",
            "--ram-bank",     "256M"};
  }

  static TempDir* dir_;  // the suite's, made in SetUpTestSuite
  static std::string root_, model_;
};
TempDir* ServeE2E::dir_ = nullptr;
std::string ServeE2E::root_, ServeE2E::model_;

TEST_F(ServeE2E, RestartKeepsEveryResponseEqualToBypass) {
  const std::string bank = root_ + "/bank";
  const auto prefix = ids(400, 1000, 7);  // the shared part: several 64-token blocks
  auto completion = [](const std::vector<int32_t>& prompt) {
    return json{{"prompt", prompt}, {"max_tokens", 8}, {"logprobs", 5}, {"temperature", 0}};
  };
  std::string system(1500, ' ');
  for (size_t i = 0; i < system.size(); ++i) system[i] = "statebank keeps model state for shared prefixes. "[i % 50];
  json chat1 = {{"messages", {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", "Hello there."}}}},
                {"max_tokens", 6},
                {"logprobs", true},
                {"top_logprobs", 3}};
  json first_chat;
  {
    ServeProcess server(serve_args(bank));
    auto c = server.client();
    json a = served_equals_bypass(c, "/v1/completions", completion(concat(prefix, ids(30, 50, 3))));
    EXPECT_EQ(a["restore"]["mode"], "cold");
    json b = served_equals_bypass(c, "/v1/completions", completion(concat(prefix, ids(30, 90, 5))));
    EXPECT_GT(b["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
    EXPECT_EQ(b["restore"]["mode"], "ram");
    first_chat = served_equals_bypass(c, "/v1/chat/completions", chat1);
    // Streaming gives the same text as the whole response.
    json body = completion(concat(prefix, ids(30, 90, 5)));
    body["stream"] = true;
    auto r = c.Post("/v1/completions", body.dump(), "application/json");
    ASSERT_TRUE(r);
    std::string text;
    size_t pos = 0;
    while ((pos = r->body.find("data: {", pos)) != std::string::npos) {
      size_t end = r->body.find("\n\n", pos);
      text += json::parse(r->body.substr(pos + 6, end - pos - 6))["choices"][0]["text"].get<std::string>();
      pos = end;
    }
    EXPECT_EQ(text, b["choices"][0]["text"]);
    EXPECT_EQ(server.stop(), 0);  // SIGTERM: finishes, flushes the SSD queue, exits 0
  }
  {
    ServeProcess server(serve_args(bank));
    auto c = server.client();
    // A new conversation on the shared prefix: served from the SSD tier.
    json d = served_equals_bypass(c, "/v1/completions", completion(concat(prefix, ids(30, 170, 11))));
    EXPECT_GT(d["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
    EXPECT_EQ(d["restore"]["mode"], "ssd");
    EXPECT_GT(d["restore"]["bytes_read"].get<int64_t>(), 0);
    // The first conversation again.
    json a = served_equals_bypass(c, "/v1/completions", completion(concat(prefix, ids(30, 50, 3))));
    EXPECT_GT(a["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
    // The chat's next turn: the history with the previous reply, then a new user message.
    json chat2 = chat1;
    chat2["messages"].push_back({{"role", "assistant"}, {"content", first_chat["choices"][0]["message"]["content"]}});
    chat2["messages"].push_back({{"role", "user"}, {"content", "And one more thing."}});
    json e = served_equals_bypass(c, "/v1/chat/completions", chat2);
    EXPECT_GT(e["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
    auto metrics = c.Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->body.find("statebank_restores_total{mode=\"ssd\"} 0\n"), std::string::npos) << metrics->body;
    EXPECT_NE(metrics->body.find("statebank_ssd_read_bytes_total "), std::string::npos);
    EXPECT_EQ(server.stop(), 0);
  }
}

TEST_F(ServeE2E, BadInputAgainstTheRealModelKeepsServing) {
  auto args = serve_args(root_ + "/bank_bad");
  args.insert(args.end(), {"--max-body-bytes", "64K", "--max-prompt-tokens", "1000", "--audit", "1"});
  ServeProcess server(args);
  auto c = server.client();
  auto error_of = [&](const httplib::Result& r, int status) {
    EXPECT_TRUE(r);
    if (!r) return json::object();
    EXPECT_EQ(r->status, status) << r->body;
    json j = json::parse(r->body, nullptr, false);
    EXPECT_TRUE(j.contains("error")) << r->body;
    return j.value("error", json::object());
  };
  // The tiny checkpoint has 151936 embedding rows.
  EXPECT_EQ(error_of(c.Post("/v1/completions", json{{"prompt", {1, 151936}}}.dump(), "application/json"), 400)["param"],
            "prompt[1]");
  EXPECT_EQ(error_of(c.Post("/v1/completions", json{{"prompt", "x"}, {"model", "nope"}}.dump(), "application/json"), 404)["code"],
            "model_not_found");
  EXPECT_EQ(error_of(c.Post("/v1/completions", "{\"prompt\": [1,", "application/json"), 400)["code"], "invalid_json");
  EXPECT_EQ(error_of(c.Post("/v1/completions", std::string(100000, ' '), "application/json"), 413)["code"],
            "body_too_large");
  EXPECT_EQ(error_of(c.Post("/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", 5}}}}}.dump(),
                            "application/json"),
                     400)["param"],
            "messages[0].content");
  EXPECT_EQ(error_of(c.Post("/v1/completions", json{{"prompt", std::vector<int>(1001, 5)}}.dump(), "application/json"), 413)["code"],
            "context_length_exceeded");
  json ok = post(c, "/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 2}}, false);
  EXPECT_EQ(ok["choices"].size(), 1u);
  // --audit 1: every restored request is recomputed cold and compared.
  const auto shared = ids(300, 3000, 17);
  post(c, "/v1/completions", {{"prompt", concat(shared, {11, 12})}, {"max_tokens", 3}}, false);
  json again = post(c, "/v1/completions", {{"prompt", concat(shared, {13, 14})}, {"max_tokens", 3}}, false);
  EXPECT_GT(again["restore"]["restore_point"].get<int64_t>(), 0);
  // The audit runs in the background once the server is idle.
  const std::string metrics = wait_for_metrics_line(c, "statebank_audits_total 1\n");
  ASSERT_FALSE(metrics.empty()) << "/metrics did not answer";
  EXPECT_NE(metrics.find("statebank_audits_total 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("statebank_audit_mismatches_total 0\n"), std::string::npos) << metrics;
  EXPECT_EQ(server.stop(), 0);
}

// /tokenize gives the ids its completion route runs (the real tokenizer and
// chat template), and /detokenize gives their text back.
TEST_F(ServeE2E, TokenizeGivesTheIdsTheCompletionRoutesRun) {
  ServeProcess server(serve_args(root_ + "/bank_tokens"));
  auto c = server.client();
  const std::string text = "Grüße aus Zürich: 東京 🚀 and tabs\tand\nlines";
  const json tokenized = post(c, "/tokenize", {{"prompt", text}}, false);
  const std::vector<int32_t> prompt_ids = tokenized["tokens"];
  ASSERT_GT(prompt_ids.size(), 10u);
  EXPECT_EQ(tokenized["count"], prompt_ids.size());
  EXPECT_EQ(tokenized["max_model_len"], 32768);  // the tiny preset's context length
  // The text and its ids as prompts: the same reply, bit for bit.
  const json by_text =
      post(c, "/v1/completions", {{"prompt", text}, {"max_tokens", 4}, {"logprobs", 3}, {"temperature", 0}}, true);
  const json by_ids = post(c, "/v1/completions",
                           {{"prompt", prompt_ids}, {"max_tokens", 4}, {"logprobs", 3}, {"temperature", 0}}, true);
  EXPECT_EQ(by_ids["choices"].dump(), by_text["choices"].dump());
  EXPECT_EQ(by_text["usage"]["prompt_tokens"], prompt_ids.size());
  EXPECT_EQ(post(c, "/detokenize", {{"tokens", prompt_ids}}, false)["prompt"], text);
  // A chat body: the rendered template's ids, as many as the chat completion's prompt.
  const json chat = {
      {"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", text}}}},
      {"max_tokens", 2}};
  const json rendered = post(c, "/tokenize", chat, false);
  EXPECT_EQ(rendered["count"], post(c, "/v1/chat/completions", chat, true)["usage"]["prompt_tokens"]);
  const std::string shown = post(c, "/detokenize", {{"tokens", rendered["tokens"]}}, false)["prompt"];
  EXPECT_NE(shown.find("<|im_start|>user\n" + text + "<|im_end|>"), std::string::npos) << shown;
  EXPECT_EQ(shown.substr(shown.size() - 22), "<|im_start|>assistant\n") << shown;
  // Ids outside the vocabulary: a 400 naming the one at fault.
  auto bad = c.Post("/detokenize", json{{"tokens", {1, 151936}}}.dump(), "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  EXPECT_EQ(json::parse(bad->body)["error"]["param"], "tokens[1]");
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(ServeE2E, OfficialClientAgainstTheRealModel) {
  ServeProcess server(serve_args(root_ + "/bank_client"));
  std::string cmd = "SB_BASE_URL=http://127.0.0.1:" + std::to_string(server.port) + " node --test " +
                    std::string(std::getenv("SB_SOURCE_DIR")) + "/tools/server/openai_client.test.mjs 2>&1";
  std::string out;
  EXPECT_EQ(run_shell(cmd, &out), 0) << out;
  EXPECT_NE(out.find("# fail 0"), std::string::npos) << out;
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(ServeE2E, SigtermFinishesTheStreamThatRuns) {
  ServeProcess server(serve_args(root_ + "/bank_sigterm"));
  std::atomic<bool> started{false};
  std::string body;
  std::thread client([&] {
    httplib::Client c("127.0.0.1", server.port);
    c.set_read_timeout(300);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = json{{"prompt", ids(100, 700, 3)}, {"max_tokens", 150}, {"stream", true}}.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      body.append(data, n);
      started = true;
      return true;
    };
    c.send(req);
  });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(server.stop(), 0);  // SIGTERM while tokens stream; waits for the exit
  client.join();
  ASSERT_NE(body.find("data: [DONE]"), std::string::npos) << body.substr(0, 300);
  EXPECT_NE(body.find("\"finish_reason\":\"length\""), std::string::npos);
  EXPECT_NE(body.find("\"completion_tokens\":150"), std::string::npos);
}

// --sampling-defaults model: a checkpoint's generation_config.json samples
// the requests that leave the fields out; a seeded one still equals its
// bypass bit for bit, and equals the request that spells the same values.
TEST_F(ServeE2E, SamplingDefaultsFromGenerationConfigKeepTheBankPromise) {
  const std::string model = root_ + "/sampled";
  fs::copy(model_, model, fs::copy_options::recursive);
  std::ofstream(model + "/generation_config.json") << R"({"do_sample": true, "temperature": 0.9, "top_k": 20,
    "top_p": 0.95, "repetition_penalty": 1.1})";
  std::string system(1200, ' ');
  for (size_t i = 0; i < system.size(); ++i) system[i] = "a system prompt every turn shares. "[i % 35];
  const json messages = {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", "Tell me."}}};
  const json seeded = {{"messages", messages}, {"max_tokens", 8}, {"seed", 11}, {"logprobs", true}};
  json spelled = seeded;
  spelled.update({{"temperature", 0.9}, {"top_k", 20}, {"top_p", 0.95}, {"repetition_penalty", 1.1}});
  json greedy = seeded;
  greedy["temperature"] = 0;
  for (const char* mode : {"model", "greedy"}) {
    SCOPED_TRACE(mode);
    std::vector<std::string> args = serve_args(root_ + "/bank-sampled-" + mode);
    args[3] = model;
    args.insert(args.end(), {"--sampling-defaults", mode});
    ServeProcess server(args);
    httplib::Client c = server.client();
    post(c, "/v1/chat/completions", seeded, false);  // stores the prefix
    const json served = served_equals_bypass(c, "/v1/chat/completions", seeded);
    EXPECT_GT(served["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0) << served.dump();
    const json as_spelled = post(c, "/v1/chat/completions", spelled, true);
    const json as_greedy = post(c, "/v1/chat/completions", greedy, true);
    if (std::string(mode) == "model") {
      EXPECT_EQ(served["choices"].dump(), as_spelled["choices"].dump());
      EXPECT_NE(served["choices"].dump(), as_greedy["choices"].dump()) << "the defaults changed nothing";
    } else {
      EXPECT_EQ(served["choices"].dump(), as_greedy["choices"].dump());
    }
  }
  // A generation_config.json no request could ask for stops the server with the file named.
  std::ofstream(model + "/generation_config.json") << R"({"temperature": 9})";
  std::string out;
  const int rc = run_shell(std::string(SB_STATEBANK_BIN) + " serve --port 0 --ssd off --model " + model + " 2>&1", &out);
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  EXPECT_NE(out.find("generation_config.json: temperature"), std::string::npos) << out;
}

TEST(ServeCli, RefusesAnOpenHostWithoutAKey) {
  // Checked before the model loads: no checkpoint needed.
  EXPECT_EQ(run_command({SB_STATEBANK_BIN, "serve", "--model", "/nonexistent", "--host", "0.0.0.0"}), 2);
  EXPECT_EQ(run_command({SB_STATEBANK_BIN, "serve", "--model", "/nonexistent", "--ssd", "sometimes"}), 2);
  EXPECT_EQ(run_command({SB_STATEBANK_BIN, "serve", "--model", "/nonexistent"}), 2);  // no checkpoint there
}

TEST(ServeCli, RefusesAnItlRatioThatLeavesNoRoomForAPrefill) {
  for (const char* ratio : {"1", "0.5", "-2", "x"}) {
    std::string out;
    const int rc = run_shell(std::string(SB_STATEBANK_BIN) + " serve --model /nonexistent --itl-ratio " + ratio + " 2>&1",
                             &out);
    EXPECT_EQ(WEXITSTATUS(rc), 2) << ratio;
    EXPECT_NE(out.find("--itl-ratio"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace sb::testing
