// Qwen Code (@qwen-code/qwen-code, pinned in tools/npm) against the real
// binary serving the demo model, set up with only its three environment
// variables (OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL), as its own
// documentation says, and the operator's --max-tokens-cap: two turns (the
// second with --continue), each exits 0, and the second is served from the
// bank. A reply the cap cuts ends with finish_reason "stop": before, Qwen
// Code read "length" as its own limit, retried with max_tokens 64000 and got
// a 400 (docs/interface.md, "A reply the server's limit cuts").
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/server/serve_process.h"
#include "tests/util/temp_dir.h"

namespace sb::testing {
namespace {

using json = nlohmann::json;

TEST(QwenCode, TwoTurnsWithItsThreeVariablesTheSecondFromTheBank) {
  const char* src = std::getenv("SB_SOURCE_DIR");
  ASSERT_TRUE(src) << "run through ctest";
  TempDir root;
  setenv("XDG_CACHE_HOME", root.file("cache").c_str(), 1);
  ServeProcess server({SB_STATEBANK_BIN, "serve", "--model", "demo", "--port", "0", "--bank-dir", root.bank(),
                       "--threads", "2", "--ram-bank", "1G", "--max-tokens-cap", "16"});
  const std::string home = root.file("home"), work = root.file("work");
  std::filesystem::create_directories(home);
  std::filesystem::create_directories(work);
  const std::string qwen = "cd " + work + " && env -i PATH=\"$PATH\" HOME=" + home +
                           " OPENAI_API_KEY=unused OPENAI_BASE_URL=http://127.0.0.1:" + std::to_string(server.port) +
                           "/v1 OPENAI_MODEL=demo timeout 300 " + std::string(src) +
                           "/tools/npm/node_modules/.bin/qwen ";
  std::string first, second;
  ASSERT_EQ(run_shell(qwen + "'say hi' </dev/null 2>&1", &first), 0) << first;
  ASSERT_EQ(run_shell(qwen + "--continue 'and then?' </dev/null 2>&1", &second), 0) << second;
  // The server's newest chat request: turn 2 (or a helper request after it),
  // its prompt's system prompt and tools restored from the bank.
  httplib::Client c = server.client();
  auto r = c.Get("/v1/bank/requests?limit=20");
  ASSERT_TRUE(r);
  const json requests = json::parse(r->body)["requests"];
  int64_t restored = 0, longest = 0;
  for (const json& q : requests) {
    if (q["endpoint"] != "/v1/chat/completions") continue;
    restored = std::max(restored, q["restore"]["restore_point"].get<int64_t>());
    longest = std::max(longest, q["prompt_tokens"].get<int64_t>());
  }
  std::printf("Qwen Code: %zu requests; longest prompt %lld tokens, most restored %lld\n", requests.size(),
              static_cast<long long>(longest), static_cast<long long>(restored));
  // Qwen Code's system prompt and tools are about 10,000 tokens: turn 2 gets most of its prompt from the bank.
  EXPECT_GT(longest, 4096) << r->body.substr(0, 2000);
  EXPECT_GE(restored, longest * 3 / 4) << r->body.substr(0, 2000);
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace sb::testing
