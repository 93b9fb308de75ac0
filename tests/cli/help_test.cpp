// `statebank COMMAND --help`: every command prints its usage on stdout and
// exits 0; a bad flag still prints one line (and the usage) on stderr and
// exits 2.
#include <gtest/gtest.h>

#include <string>

#include "tests/cli/statebank_cli.h"

namespace sb::testing {
namespace {

TEST(CliHelp, EveryCommandPrintsItsUsage) {
  TempDir dir;
  for (const std::string command : {"serve", "run", "gen-model", "quantize", "tokenize", "detokenize", "bank",
                                    "bench agent", "bench agents", "bench load", "bench spec"}) {
    const Outcome help = run_statebank(dir, command + " --help");
    EXPECT_EQ(help.exit_code, 0) << command << ": " << help.err;
    EXPECT_EQ(help.out.rfind("usage: statebank " + command + " ", 0), 0u) << command << ": " << help.out;
    EXPECT_EQ(help.err, "") << command;
    const Outcome bad = run_statebank(dir, command + " --no-such-flag");
    EXPECT_EQ(bad.exit_code, 2) << command;
    EXPECT_EQ(bad.out, "") << command;
    EXPECT_NE(bad.err.find("unknown flag --no-such-flag"), std::string::npos) << command << ": " << bad.err;
  }
  const Outcome top = run_statebank(dir, "--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_EQ(top.out.rfind("usage: statebank <command>", 0), 0u) << top.out;
}

}  // namespace
}  // namespace sb::testing
