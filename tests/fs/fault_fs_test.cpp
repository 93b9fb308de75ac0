// The POSIX file system's error mapping and lock, and FaultFs's faults and
// crash simulation, which every crash test of the bank relies on.
#include "tests/util/fault_fs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "tests/util/temp_dir.h"

namespace sb {
namespace {

namespace fsys = std::filesystem;

std::string read(const std::string& p) {
  std::string s;
  EXPECT_TRUE(read_whole_file(posix_fs(), p, &s).is_ok());
  return s;
}

Status write_synced(Fs* fs, const std::string& path, const std::string& data, bool sync) {
  std::unique_ptr<WritableFile> f;
  SB_RETURN_IF_ERROR(fs->new_writable(path, &f));
  SB_RETURN_IF_ERROR(f->append(data.data(), data.size()));
  if (sync) SB_RETURN_IF_ERROR(f->sync());
  return f->close();
}

TEST(PosixFs, MapsErrorsToCodes) {
  testing::TempDir d;
  Fs* fs = posix_fs();
  FileInfo info;
  EXPECT_EQ(fs->stat(d.path() + "/missing", &info).code(), Code::kNotFound);
  std::unique_ptr<ReadableFile> r;
  EXPECT_EQ(fs->open_readable(d.path() + "/missing", true, &r).code(), Code::kNotFound);
  EXPECT_EQ(fs->rename(d.path() + "/missing", d.path() + "/x").code(), Code::kNotFound);
  EXPECT_TRUE(fs->mkdir(d.path() + "/sub").is_ok());
  EXPECT_TRUE(fs->mkdir(d.path() + "/sub").is_ok());  // exists: fine
  ASSERT_TRUE(write_whole_file(fs, d.path() + "/file", "abc").is_ok());
  EXPECT_FALSE(fs->mkdir(d.path() + "/file").is_ok());  // exists, not a directory
  std::vector<std::string> names;
  ASSERT_TRUE(fs->list(d.path(), &names).is_ok());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"file", "sub"}));
}

TEST(PosixFs, DirectReadsReturnTheBytesAndStopAtTheEnd) {
  testing::TempDir d;
  std::string data(10000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(write_whole_file(posix_fs(), d.path() + "/f", data).is_ok());
  std::unique_ptr<ReadableFile> r;
  ASSERT_TRUE(posix_fs()->open_readable(d.path() + "/f", true, &r).is_ok());
  void* buf = nullptr;
  ASSERT_EQ(posix_memalign(&buf, kDirectAlignment, 16384), 0);
  size_t got = 0;
  ASSERT_TRUE(r->read_at(0, buf, 16384, &got).is_ok());
  EXPECT_EQ(got, data.size());
  EXPECT_EQ(std::string(static_cast<char*>(buf), got), data);
  std::free(buf);
}

TEST(PosixFs, LockIsExclusiveAcrossOpenFiles) {
  testing::TempDir d;
  std::unique_ptr<FileLock> a, b, c;
  ASSERT_TRUE(posix_fs()->lock(d.path() + "/LOCK", true, &a).is_ok());
  Status s = posix_fs()->lock(d.path() + "/LOCK", true, &b);
  EXPECT_NE(s.message().find("held by another process"), std::string::npos) << s.to_string();
  EXPECT_FALSE(posix_fs()->lock(d.path() + "/LOCK", false, &b).is_ok());
  a.reset();
  ASSERT_TRUE(posix_fs()->lock(d.path() + "/LOCK", false, &b).is_ok());
  ASSERT_TRUE(posix_fs()->lock(d.path() + "/LOCK", false, &c).is_ok());  // shared
  EXPECT_FALSE(posix_fs()->lock(d.path() + "/LOCK", true, &a).is_ok());
}

TEST(FaultFs, KillFailsThatOperationAndEveryLaterOne) {
  testing::TempDir d;
  FaultFs fs;
  fs.kill_at(3);  // create, append, then the sync dies
  std::unique_ptr<WritableFile> f;
  ASSERT_TRUE(fs.new_writable(d.path() + "/a", &f).is_ok());
  ASSERT_TRUE(f->append("xy", 2).is_ok());
  EXPECT_FALSE(f->sync().is_ok());
  EXPECT_TRUE(fs.killed());
  FileInfo info;
  EXPECT_FALSE(fs.stat(d.path() + "/a", &info).is_ok());  // reads die too
  EXPECT_FALSE(fs.list(d.path(), nullptr).is_ok());
  f->close().is_ok();
  fs.clear_faults();
  EXPECT_TRUE(fs.stat(d.path() + "/a", &info).is_ok());
}

TEST(FaultFs, CrashLosesUnsyncedBytesAndNames) {
  testing::TempDir d;
  FaultFs fs;
  const std::string dir = d.path();
  ASSERT_TRUE(write_synced(&fs, dir + "/durable", "keep", true).is_ok());
  // Appended after the last sync: cut off.
  std::unique_ptr<WritableFile> f;
  ASSERT_TRUE(fs.new_writable(dir + "/grow", &f).is_ok());
  ASSERT_TRUE(f->append("12345", 5).is_ok());
  ASSERT_TRUE(f->sync().is_ok());
  ASSERT_TRUE(fs.sync_dir(dir).is_ok());
  ASSERT_TRUE(f->append("678", 3).is_ok());
  ASSERT_TRUE(f->close().is_ok());
  // Renamed into a synced directory: survives.
  ASSERT_TRUE(fs.mkdir(dir + "/sub").is_ok());
  ASSERT_TRUE(fs.sync_dir(dir).is_ok());
  ASSERT_TRUE(write_synced(&fs, dir + "/sub/x", "xx", true).is_ok());
  ASSERT_TRUE(fs.rename(dir + "/sub/x", dir + "/sub/y").is_ok());
  ASSERT_TRUE(fs.sync_dir(dir + "/sub").is_ok());
  // Synced data, name never synced: gone.
  ASSERT_TRUE(write_synced(&fs, dir + "/new", "data", true).is_ok());
  // Synced file renamed, directory not synced: back under its old name,
  // which itself was never synced, so gone as well.
  ASSERT_TRUE(write_synced(&fs, dir + "/t", "tt", true).is_ok());
  ASSERT_TRUE(fs.rename(dir + "/t", dir + "/final").is_ok());
  // A new directory whose parent was never synced goes with its files.
  ASSERT_TRUE(fs.mkdir(dir + "/lost").is_ok());
  ASSERT_TRUE(write_synced(&fs, dir + "/lost/x", "x", true).is_ok());
  ASSERT_TRUE(fs.sync_dir(dir + "/lost").is_ok());

  fs.simulate_crash(CrashMode::kLoseUnsynced, 1);
  EXPECT_EQ(read(dir + "/durable"), "keep");
  EXPECT_FALSE(fsys::exists(dir + "/new"));
  EXPECT_FALSE(fsys::exists(dir + "/lost"));
  EXPECT_FALSE(fsys::exists(dir + "/t"));
  EXPECT_FALSE(fsys::exists(dir + "/final"));
  EXPECT_EQ(read(dir + "/grow"), "12345");
  EXPECT_EQ(read(dir + "/sub/y"), "xx");
}

TEST(FaultFs, TornCrashKeepsNamesAndPartOfTheUnsyncedTail) {
  testing::TempDir d;
  FaultFs fs;
  const std::string tail(4000, 'z');
  ASSERT_TRUE(write_synced(&fs, d.path() + "/synced", "abc", true).is_ok());
  ASSERT_TRUE(write_synced(&fs, d.path() + "/torn", "head" + tail, false).is_ok());
  fs.simulate_crash(CrashMode::kTornKeepNames, 7);
  EXPECT_EQ(read(d.path() + "/synced"), "abc");
  std::string torn = read(d.path() + "/torn");
  EXPECT_LT(torn.size(), 4004u);  // seed 7 keeps part of the tail, not all
  EXPECT_NE(torn, ("head" + tail).substr(0, torn.size()));  // and garbles some of it
}

TEST(FaultFs, FailAtFailsExactlyOnce) {
  testing::TempDir d;
  FaultFs fs;
  fs.fail_at(2);
  FileInfo info;
  EXPECT_EQ(fs.mkdir(d.path() + "/a").code(), Code::kOk);
  EXPECT_EQ(fs.stat(d.path() + "/a", &info).code(), Code::kIoError);
  EXPECT_TRUE(fs.fail_hit());
  EXPECT_TRUE(fs.stat(d.path() + "/a", &info).is_ok());
}

TEST(FaultFs, BrokenSyncAndFullDiskLastUntilCleared) {
  testing::TempDir d;
  FaultFs fs;
  fs.set_sync_broken(true);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(write_synced(&fs, d.path() + "/a", "x", true).is_ok());
  EXPECT_FALSE(fs.sync_dir(d.path()).is_ok());
  fs.set_sync_broken(false);
  EXPECT_TRUE(write_synced(&fs, d.path() + "/a", "x", true).is_ok());
  fs.set_disk_full(true);
  EXPECT_EQ(write_synced(&fs, d.path() + "/b", "x", false).code(), Code::kResourceExhausted);
  fs.set_disk_full(false);
  EXPECT_TRUE(write_synced(&fs, d.path() + "/b", "x", false).is_ok());
}

}  // namespace
}  // namespace sb
