// Issue 34, findings 1, 2 and 9 (schemas), with the real binary over HTTP:
// a response_format or tool schema whose $ref reaches itself without
// consuming input (directly, through a $defs cycle, through anyOf), or whose
// counts overflow, is a 400 naming where; the server keeps answering
// /health and normal completions, and SIGTERM still stops it. Before, the
// first kind killed the server (SIGSEGV) and the anyOf kind wedged its step
// thread so that SIGTERM no longer stopped it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/server/serve_process.h"

namespace sb::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class HostileSchemaE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/sb_hostile_schema_XXXXXX";
    root_ = mkdtemp(tmpl);
    ASSERT_EQ(gen_model(root_ + "/model", "qwen3_next", "tiny", 3), 0)
        << "gen-model failed (is SB_TOKENIZER_DIR set? run through ctest)";
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static std::string root_;
};
std::string HostileSchemaE2E::root_;

json with_schema(const json& schema) {
  return {{"messages", {{{"role", "user"}, {"content", "Give me JSON."}}}},
          {"max_tokens", 8},
          {"temperature", 0},
          {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}}};
}

json with_tool(const json& parameters) {
  return {{"messages", {{{"role", "user"}, {"content", "Call it."}}}},
          {"max_tokens", 8},
          {"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", parameters}}}}}},
          {"tool_choice", "required"}};
}

void expect_healthy(httplib::Client& c) {
  const auto t0 = std::chrono::steady_clock::now();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  auto r = c.Post("/v1/completions", json{{"prompt", "Hello"}, {"max_tokens", 3}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(HostileSchemaE2E, SelfReachingAndOverflowingSchemasAre400sAndTheServerLivesOn) {
  ServeProcess server({SB_STATEBANK_BIN, "serve", "--model", root_ + "/model", "--port", "0", "--bank-dir",
                       root_ + "/bank", "--threads", "1"});
  auto c = server.client();
  c.set_read_timeout(60);
  const json self = {{"$ref", "#"}};
  const json defs_cycle = {{"$defs", {{"a", {{"$ref", "#/$defs/b"}}}, {"b", {{"$ref", "#/$defs/a"}}}}},
                           {"$ref", "#/$defs/a"}};
  const json any_self = {{"anyOf", {{{"$ref", "#"}}, {{"type", "string"}}}}};
  struct Case {
    json body;
    std::string says;
  };
  const std::vector<Case> cases = {
      {with_schema(self), "reaches itself without consuming input"},
      {with_schema(defs_cycle), "reaches itself without consuming input"},
      {with_schema(any_self), "reaches itself without consuming input"},
      {with_tool(any_self), "reaches itself without consuming input"},
      {with_schema({{"type", "array"}, {"minItems", int64_t{1} << 62}}), "minItems"},
      {with_schema({{"type", "string"}, {"minLength", std::numeric_limits<int64_t>::max()}}), "minLength"},
  };
  for (const Case& k : cases) {
    for (bool stream : {false, true}) {
      json body = k.body;
      body["stream"] = stream;
      auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
      ASSERT_TRUE(r) << "no answer to " << body.dump();
      EXPECT_EQ(r->status, 400) << body.dump() << " -> " << r->body;
      EXPECT_NE(r->body.find(k.says), std::string::npos) << r->body;
    }
    expect_healthy(c);
  }
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace sb::testing
