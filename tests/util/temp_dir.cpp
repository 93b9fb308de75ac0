#include "tests/util/temp_dir.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

namespace sb::testing {
namespace {

std::string make_temp_dir(bool in_memory) {
  const char* base = std::getenv("TMPDIR");
  std::string root = base && *base ? base : "/tmp";
  if (in_memory && std::filesystem::is_directory("/dev/shm")) root = "/dev/shm";
  std::string tmpl = root + "/sb_test_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  // A test that cannot make a directory cannot run at all.
  if (!::mkdtemp(buf.data())) std::abort();
  return buf.data();
}

}  // namespace

TempDir::TempDir(bool in_memory) : path_(make_temp_dir(in_memory)) {}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

const std::string& process_temp_dir() {
  // Destroyed (and so removed) at exit, after every test.
  static const TempDir dir;
  return dir.path();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  std::string out(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  return out;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace sb::testing
