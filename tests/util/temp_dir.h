// Temporary directories for tests: the one helper every test uses.
//
// TempDir: a fresh, empty directory under $TMPDIR (else /tmp), removed with
// its contents when the object is destroyed. in_memory puts it under
// /dev/shm where that exists, for tests whose durability comes from FaultFs's
// model rather than from the disk (fsync is free there).
// process_temp_dir(): one directory per test process, made on first use and
// removed at exit; caches that outlive a test (generated checkpoints) live
// there.
// Thread safety: a TempDir belongs to one test; process_temp_dir() may be
// called from any thread.
#pragma once

#include <string>

namespace sb::testing {

class TempDir {
 public:
  explicit TempDir(bool in_memory = false);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Where an SSD bank goes in the tests that need one (not made yet).
  std::string bank() const { return file("bank"); }

 private:
  std::string path_;
};

const std::string& process_temp_dir();

// Whole-file helpers for tests that write or inspect files.
std::string read_file(const std::string& path);  // empty when unreadable
void write_file(const std::string& path, const std::string& bytes);

}  // namespace sb::testing
