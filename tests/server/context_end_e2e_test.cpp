// Issue 47, finding 7: generation ran past the model's context length (a
// 500-token prompt with max_tokens 300 on a 512-token model returned 800
// tokens). Against the real binary on a checkpoint whose config says 512
// positions: each protocol stops at the context's end with its "length"
// ending, and a prompt that leaves no room for a token is a 400 in each
// protocol's error shape.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/server/serve_process.h"

namespace sb::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kContext = 512;

class ContextEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = make_temp_dir("sb_context_end");
    const std::string model = root_ + "/model";
    ASSERT_EQ(gen_model(model, "qwen3_next", "tiny", 4), 0) << kGenModelFailed;
    std::ifstream in(model + "/config.json");
    json cfg = json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
    cfg["max_position_embeddings"] = kContext;
    std::ofstream(model + "/config.json", std::ios::trunc) << cfg.dump();
    server_ = new ServeProcess(
        {SB_STATEBANK_BIN, "serve", "--model", model, "--port", "0", "--ssd", "off", "--threads", "1", "--ram-bank", "64M"});
  }
  static void TearDownTestSuite() {
    if (server_) {
      EXPECT_EQ(server_->stop(), 0);
    }
    delete server_;
    fs::remove_all(root_);
  }
  static json post(const std::string& path, const json& body, int want_status) {
    auto c = server_->client();
    auto r = c.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(r) << path;
    if (!r) return json::object();
    EXPECT_EQ(r->status, want_status) << path << " " << r->body.substr(0, 300);
    return json::parse(r->body, nullptr, false);
  }
  static std::string model_id() {
    auto c = server_->client();
    auto r = c.Get("/v1/models");
    return r ? json::parse(r->body)["data"][0]["id"].get<std::string>() : "";
  }
  static std::string root_;
  static ServeProcess* server_;
};
std::string ContextEnd::root_;
ServeProcess* ContextEnd::server_ = nullptr;

std::vector<int> ids(int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(1000 + (i * 37) % 5000);
  return v;
}

std::string words(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += "apple ";
  return s;
}

TEST_F(ContextEnd, CompletionsStopAtTheContextEndWithLength) {
  json r = post("/v1/completions", {{"prompt", ids(500)}, {"max_tokens", 300}, {"temperature", 0}}, 200);
  EXPECT_EQ(r["usage"]["prompt_tokens"], 500);
  EXPECT_EQ(r["usage"]["completion_tokens"], kContext - 500);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  // Within the context, max_tokens is the client's as before.
  json small = post("/v1/completions", {{"prompt", ids(500)}, {"max_tokens", 5}, {"temperature", 0}}, 200);
  EXPECT_EQ(small["usage"]["completion_tokens"], 5);
}

TEST_F(ContextEnd, ChatStopsAtTheContextEndWithLength) {
  json r = post("/v1/chat/completions",
                {{"messages", {{{"role", "user"}, {"content", words(300)}}}}, {"max_tokens", 400}, {"temperature", 0}},
                200);
  const int64_t prompt = r["usage"]["prompt_tokens"];
  EXPECT_LT(prompt, kContext);
  EXPECT_EQ(r["usage"]["completion_tokens"], kContext - prompt);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
}

TEST_F(ContextEnd, MessagesStopAtTheContextEndWithMaxTokens) {
  json r = post("/v1/messages",
                {{"model", model_id()}, {"messages", {{{"role", "user"}, {"content", words(300)}}}}, {"max_tokens", 400},
                 {"temperature", 0}},
                200);
  // input_tokens counts what was not read from the bank.
  const int64_t prompt = r["usage"]["input_tokens"].get<int64_t>() +
                         r["usage"].value("cache_read_input_tokens", int64_t{0}) +
                         r["usage"].value("cache_creation_input_tokens", int64_t{0});
  EXPECT_EQ(r["usage"]["output_tokens"], kContext - prompt);
  EXPECT_EQ(r["stop_reason"], "max_tokens");
}

TEST_F(ContextEnd, APromptThatLeavesNoRoomIsA400InEachProtocolsShape) {
  json c = post("/v1/completions", {{"prompt", ids(kContext)}, {"max_tokens", 1}}, 400);
  EXPECT_EQ(c["error"]["code"], "context_length_exceeded");
  json chat = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", words(600)}}}}}, 400);
  EXPECT_EQ(chat["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(chat["error"]["param"], "messages");
  json m = post("/v1/messages",
                {{"model", model_id()}, {"messages", {{{"role", "user"}, {"content", words(600)}}}}, {"max_tokens", 10}}, 400);
  EXPECT_EQ(m["type"], "error");
  EXPECT_EQ(m["error"]["type"], "invalid_request_error");
  EXPECT_NE(m["error"]["message"].get<std::string>().find("context length of 512"), std::string::npos) << m.dump();
  json resp = post("/v1/responses", {{"input", words(600)}}, 400);
  EXPECT_EQ(resp["error"]["code"], "context_length_exceeded");
}

}  // namespace
}  // namespace sb::testing
