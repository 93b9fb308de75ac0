// The official `openai` npm client (a client nobody here wrote) against the
// HTTP layer over the fake backend: tools/server/openai_client.test.mjs run by
// node's test runner, once without and once with an API key.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/server/test_server.h"

namespace sb::testing {
namespace {

int run_node_tests(const std::string& env) {
  const char* src = std::getenv("SB_SOURCE_DIR");
  if (!src) {
    ADD_FAILURE() << "SB_SOURCE_DIR is not set (run through ctest)";
    return -1;
  }
  std::string cmd = env + " node --test " + std::string(src) + "/tools/server/openai_client.test.mjs 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int rc = pclose(p);
  std::printf("%s\n", out.c_str());
  EXPECT_NE(out.find("# fail 0"), std::string::npos) << out;
  return rc;
}

TEST(OpenAIClient, WithoutKey) {
  TestServer ts;
  EXPECT_EQ(run_node_tests("SB_FAKE=1 SB_MODEL=fake-model SB_BASE_URL=" + ts.base_url()), 0);
}

TEST(OpenAIClient, WithKey) {
  ServerOptions o;
  o.keys = ApiKeys::single("test-key-123");
  TestServer ts(o);
  EXPECT_EQ(run_node_tests("SB_FAKE=1 SB_API_KEY=test-key-123 SB_BASE_URL=" + ts.base_url()), 0);
}

}  // namespace
}  // namespace sb::testing
