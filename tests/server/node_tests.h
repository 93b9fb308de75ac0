// Runs a node --test script of tools/server (a real npm client's tests)
// against a server, prints its output, checks that no test failed and
// returns node's exit status.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace sb::testing {

inline int run_node_tests(const std::string& env, const std::string& script) {
  const char* src = std::getenv("SB_SOURCE_DIR");
  if (!src) {
    ADD_FAILURE() << "SB_SOURCE_DIR is not set (run through ctest)";
    return -1;
  }
  std::string cmd = env + " node --test " + std::string(src) + "/tools/server/" + script + " 2>&1";
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

}  // namespace sb::testing
