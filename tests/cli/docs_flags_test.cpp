// docs/interface.md and the commands' `--help` name the same flags: every
// flag a command's usage lists is documented, and every flag the page names
// is one some command accepts. So neither can drift from the other silently.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "tests/cli/statebank_cli.h"

namespace sb::testing {
namespace {

const char* const kCommands[] = {"serve",     "run",          "gen-model",  "quantize",  "tokenize", "detokenize",
                                 "bank",      "bench agent",  "bench agents", "bench load", "bench spec"};

std::set<std::string> flags_in(const std::string& text) {
  static const std::regex flag(R"((^|[^A-Za-z0-9_-])(--[a-z][a-z0-9]*(-[a-z0-9]+)*))");
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), flag); it != std::sregex_iterator(); ++it) {
    out.insert((*it)[2]);
  }
  return out;
}

std::set<std::string> flags_of_every_command() {
  TempDir dir;
  std::set<std::string> all;
  for (const std::string command : kCommands) {
    const Outcome help = run_statebank(dir, command + " --help");
    EXPECT_EQ(help.exit_code, 0) << command;
    const std::set<std::string> own = flags_in(help.out);
    EXPECT_FALSE(own.empty()) << command << " lists no flag: " << help.out;
    all.insert(own.begin(), own.end());
  }
  return all;
}

TEST(DocsFlags, EveryFlagOfEveryCommandIsDocumented) {
  const std::set<std::string> documented = flags_in(read_file(SB_INTERFACE_DOC));
  for (const std::string& flag : flags_of_every_command()) {
    EXPECT_TRUE(documented.count(flag)) << flag << " is in a command's --help but not in docs/interface.md";
  }
}

TEST(DocsFlags, EveryDocumentedFlagExists) {
  std::set<std::string> accepted = flags_of_every_command();
  accepted.insert("--help");
  for (const std::string& flag : flags_in(read_file(SB_INTERFACE_DOC))) {
    EXPECT_TRUE(accepted.count(flag)) << flag << " is named in docs/interface.md but no command accepts it";
  }
}

}  // namespace
}  // namespace sb::testing
