// Agent frameworks against the real binary: the Vercel AI SDK and LangChain
// JS (tools/server/frameworks.test.mjs, run by node's test runner) on a
// server over a generated tiny random-weight model with the real Qwen3
// tokenizer and chat template.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/server/node_tests.h"
#include "tests/server/serve_process.h"
#include "tests/util/temp_dir.h"

namespace sb::testing {
namespace {

TEST(Frameworks, AiSdkAndLangChainGetValidStructuredOutputsAndToolCalls) {
  TempDir root;
  std::string model = root.file("model");
  const char* tok = std::getenv("SB_TOKENIZER_DIR");
  ASSERT_TRUE(tok) << "run through ctest";
  ASSERT_EQ(run_command({SB_STATEBANK_BIN, "gen-model", "--arch", "qwen3_next", "--preset", "tiny", "--seed", "5",
                         "--tokenizer", tok, model}),
            0);
  {
    ServeProcess server({SB_STATEBANK_BIN, "serve", "--model", model, "--port", "0", "--bank-dir", root.bank(),
                         "--block-tokens", "64", "--threads", "2", "--ram-bank", "256M"});
    EXPECT_EQ(run_node_tests("SB_BASE_URL=http://127.0.0.1:" + std::to_string(server.port), "frameworks.test.mjs"), 0);
    EXPECT_EQ(server.stop(), 0);
  }
}

}  // namespace
}  // namespace sb::testing
