// Agent frameworks against the real binary: the Vercel AI SDK and LangChain
// JS (tools/server/frameworks.test.mjs, run by node's test runner) on a
// server over a generated tiny random-weight model with the real Qwen3
// tokenizer and chat template.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/server/serve_process.h"

namespace sb::testing {
namespace {

TEST(Frameworks, AiSdkAndLangChainGetValidStructuredOutputsAndToolCalls) {
  char tmpl[] = "/tmp/sb_frameworks_XXXXXX";
  std::string root = mkdtemp(tmpl);
  std::string model = root + "/model";
  const char* tok = std::getenv("SB_TOKENIZER_DIR");
  const char* src = std::getenv("SB_SOURCE_DIR");
  ASSERT_TRUE(tok && src) << "run through ctest";
  ASSERT_EQ(run_command({SB_STATEBANK_BIN, "gen-model", "--arch", "qwen3_next", "--preset", "tiny", "--seed", "5",
                         "--tokenizer", tok, model}),
            0);
  {
    ServeProcess server({SB_STATEBANK_BIN, "serve", "--model", model, "--port", "0", "--bank-dir", root + "/bank",
                         "--block-tokens", "64", "--threads", "2", "--ram-bank", "256M"});
    std::string cmd = "SB_BASE_URL=http://127.0.0.1:" + std::to_string(server.port) + " node --test " + src +
                      "/tools/server/frameworks.test.mjs 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    int rc = pclose(p);
    std::printf("%s\n", out.c_str());
    EXPECT_NE(out.find("# fail 0"), std::string::npos) << out;
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(server.stop(), 0);
  }
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace sb::testing
