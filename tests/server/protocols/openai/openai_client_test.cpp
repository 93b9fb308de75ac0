// The official `openai` npm client (a client nobody here wrote) against the
// HTTP layer over the fake backend: tools/server/openai_client.test.mjs run by
// node's test runner, once without and once with an API key.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/server/node_tests.h"
#include "tests/server/test_server.h"

namespace sb::testing {
namespace {

TEST(OpenAIClient, WithoutKey) {
  TestServer ts;
  EXPECT_EQ(run_node_tests("SB_FAKE=1 SB_MODEL=fake-model SB_BASE_URL=" + ts.base_url(), "openai_client.test.mjs"), 0);
}

TEST(OpenAIClient, WithKey) {
  ServerOptions o;
  o.keys = ApiKeys::single("test-key-123");
  TestServer ts(o);
  EXPECT_EQ(run_node_tests("SB_FAKE=1 SB_API_KEY=test-key-123 SB_BASE_URL=" + ts.base_url(), "openai_client.test.mjs"), 0);
}

}  // namespace
}  // namespace sb::testing
