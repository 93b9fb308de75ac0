// Runs the built `statebank` binary (SB_STATEBANK_BIN, set by CMake) with
// its output captured in files of a test's temporary directory.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "tests/util/models.h"
#include "tests/util/temp_dir.h"

namespace sb::testing {

struct Outcome {
  int exit_code = -1;
  std::string out, err;
};

// `args` is shell text (quote what needs it).
inline Outcome run_statebank(const TempDir& dir, const std::string& args) {
  const std::string cmd =
      "'" SB_STATEBANK_BIN "' " + args + " >'" + dir.file("stdout.txt") + "' 2>'" + dir.file("stderr.txt") + "'";
  const int st = std::system(cmd.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, read_file(dir.file("stdout.txt")), read_file(dir.file("stderr.txt"))};
}

}  // namespace sb::testing
