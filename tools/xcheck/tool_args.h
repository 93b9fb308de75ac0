// Argument helpers shared by the cross-check's two small programs,
// tools/xcheck/llama_logits.cpp (built against llama.cpp) and
// tests/runtime/reference_logits.cpp (built with statebank): header-only, as
// they share no library. `tool` is the program name errors start with.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace xcheck {

// One line "NAME: message" on stderr, exit code 2.
[[noreturn]] inline void die(const char* tool, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", tool, message.c_str());
  std::exit(2);
}

// Comma-separated integers ("" gives none); anything else ends the program.
inline std::vector<long long> parse_list(const char* tool, const std::string& flag, const std::string& text) {
  std::vector<long long> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0') die(tool, flag + ": '" + item + "' is not an integer");
    out.push_back(v);
  }
  return out;
}

}  // namespace xcheck
