// What every command prints on the way out (cli/commands.h).
#include "cli/commands.h"

#include <cstdio>

namespace sb {

int fail(const char* command, const std::string& message) {
  std::fprintf(stderr, "statebank %s: %s\n", command, message.c_str());
  return 2;
}

int print_usage(const char* usage) {
  std::printf("%s\n", usage);
  return 0;
}

}  // namespace sb
