// Anthropic's Messages route against the real binary serving the demo model:
// the official @anthropic-ai/sdk (tools/server/anthropic_client.test.mjs:
// create, stream, forced tools checked by ajv, count_tokens, errors,
// chat-vs-Messages tokens, bank == bypass, 200 mutated bodies), and the real
// Claude Code CLI (tools/server/claude_code.test.mjs: `claude -p`, then a
// second turn with --continue whose prefix comes from the bank, then a new
// session whose first turn restores the system prompt and tools).
#include <gtest/gtest.h>

#include <string>

#include "tests/server/node_tests.h"
#include "tests/server/serve_process.h"
#include "tests/util/temp_dir.h"

namespace sb::testing {
namespace {

const char* kKey = "messages-test-key-1";
const char* kAlias = "claude-statebank-test";

std::string node_env(const ServeProcess& server, const char* block_tokens) {
  return "SB_BASE_URL=http://127.0.0.1:" + std::to_string(server.port) + " SB_API_KEY=" + kKey + " SB_MODEL=" + kAlias +
         " SB_BLOCK_TOKENS=" + block_tokens;
}

TEST(MessagesClient, AnthropicSdk) {
  TempDir root;
  ServeProcess server({SB_STATEBANK_BIN, "serve", "--model", "demo", "--port", "0", "--bank-dir", root.bank(),
                       "--block-tokens", "64", "--threads", "2", "--ram-bank", "256M", "--api-key", kKey,
                       "--served-model-name", kAlias});
  EXPECT_EQ(run_node_tests(node_env(server, "64"), "anthropic_client.test.mjs"), 0);
  EXPECT_EQ(server.stop(), 0);
}

TEST(MessagesClient, ClaudeCodeCli) {
  TempDir root;
  // The demo model's random weights seldom end a turn: the cap keeps each one short.
  ServeProcess server({SB_STATEBANK_BIN, "serve", "--model", "demo", "--port", "0", "--bank-dir", root.bank(),
                       "--threads", "2", "--ram-bank", "1G", "--api-key", kKey, "--served-model-name", kAlias,
                       "--max-tokens-cap", "8"});
  EXPECT_EQ(run_node_tests(node_env(server, "256"), "claude_code.test.mjs"), 0);
  // Claude Code marks its system prompt and last message with cache_control: their prefixes are pinned.
  auto c = server.client();
  auto pins = c.Get("/v1/bank/pins", {{"x-api-key", kKey}});
  ASSERT_TRUE(pins);
  EXPECT_FALSE(nlohmann::json::parse(pins->body)["pins"].empty()) << pins->body;
  EXPECT_EQ(server.stop(), 0);
}

TEST(MessagesClient, IgnoreCacheControlPinsNothing) {
  TempDir root;
  ServeProcess server({SB_STATEBANK_BIN, "serve", "--model", "demo", "--port", "0", "--bank-dir", root.bank(),
                       "--block-tokens", "64", "--threads", "2", "--ram-bank", "256M", "--api-key", kKey,
                       "--ignore-cache-control"});
  auto c = server.client();
  const nlohmann::json body = {
      {"model", "demo"},
      {"max_tokens", 2},
      {"system", {{{"type", "text"}, {"text", std::string(2000, 'a')}, {"cache_control", {{"type", "ephemeral"}}}}}},
      {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  auto r = c.Post("/v1/messages", {{"x-api-key", kKey}}, body.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  auto pins = c.Get("/v1/bank/pins", {{"x-api-key", kKey}});
  ASSERT_TRUE(pins);
  EXPECT_TRUE(nlohmann::json::parse(pins->body)["pins"].empty()) << pins->body;
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace sb::testing
