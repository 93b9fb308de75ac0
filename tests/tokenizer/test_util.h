// Helpers shared by the tokenizer tests: environment, files, subprocesses.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace sb::test {

inline std::string env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) ADD_FAILURE() << name << " is not set (run the tests through ctest)";
  return v ? v : "";
}

inline std::string tokenizer_dir() { return env("SB_TOKENIZER_DIR"); }
inline std::string source_dir() { return env("SB_SOURCE_DIR"); }

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "cannot open " << path;
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  ASSERT_TRUE(f.good()) << "cannot write " << path;
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

// Runs a shell command and returns its stdout; `status` gets the exit status.
inline std::string run_command(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    *status = -1;
    return out;
  }
  std::array<char, 1 << 16> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  *status = pclose(p);
  return out;
}

inline std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/sb_tok_" + std::to_string(getpid()) + "_" + name;
}

// One Qwen3 tokenizer per test binary: loading tokenizer.json takes a while.
inline const Tokenizer& qwen3() {
  static std::unique_ptr<Tokenizer> tok = [] {
    std::unique_ptr<Tokenizer> t;
    Status st = Tokenizer::load(tokenizer_dir(), &t);
    if (!st) {
      ADD_FAILURE() << st.to_string();
      std::abort();
    }
    return t;
  }();
  return *tok;
}

}  // namespace sb::test
