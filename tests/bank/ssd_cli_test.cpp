// `statebank bank stats|ls|verify|gc` (cli/cmd_bank.cpp) on real bank
// directories: output, exit codes, and what each action changes on disk.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "cli/commands.h"
#include "tests/bank/ssd_test_util.h"

namespace sb {
namespace {

using namespace sb::testing;
namespace fsys = std::filesystem;

struct Result {
  int rc;
  std::string out, err;
};

Result bank(std::vector<std::string> args) {
  args.insert(args.begin(), "bank");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  int rc = cmd_bank(static_cast<int>(argv.size()), argv.data());
  Result r{rc, ::testing::internal::GetCapturedStdout(), ::testing::internal::GetCapturedStderr()};
  return r;
}

class SsdCli : public ::testing::Test {
 protected:
  void SetUp() override {
    chain_ = make_chain(40, 3);
    auto t = open_tier(test_options(d_.bank()));
    for (const auto& o : chain_.all()) ASSERT_TRUE(t->put(o, Retention::kBlock).is_ok());
    ASSERT_TRUE(t->flush().is_ok());
    for (const auto& o : chain_.all()) bytes_ += encoded_size(*o);
    path0_ = t->object_path(ObjectKind::kBlock, chain_.blocks[0]->key);
  }
  TempDir d_;
  TestChain chain_;
  uint64_t bytes_ = 0;
  std::string path0_;
};

TEST_F(SsdCli, StatsCountsObjectsAndBytes) {
  Result r = bank({"stats", "--bank-dir", d_.bank(), "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["objects"], 6);
  EXPECT_EQ(j["blocks"], 3);
  EXPECT_EQ(j["snapshots"], 3);
  EXPECT_EQ(j["bytes"], bytes_);
  EXPECT_EQ(j["quarantine_files"], 0);
  r = bank({"stats", "--bank-dir=" + d_.bank()});
  ASSERT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("6 (3 blocks, 3 snapshots)"), std::string::npos) << r.out;
}

TEST_F(SsdCli, LsListsEveryObjectInEvictionOrder) {
  Result r = bank({"ls", "--bank-dir", d_.bank(), "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 6u);
  std::set<std::string> keys;
  for (const auto& e : j) keys.insert(e["kind"].get<std::string>() + ":" + e["key"].get<std::string>());
  for (const auto& o : chain_.all()) EXPECT_TRUE(keys.count(std::string(kind_tag(o->kind)) + ":" + o->key.hex()));
}

TEST_F(SsdCli, VerifyFindsAndQuarantinesDamage) {
  Result r = bank({"verify", "--bank-dir", d_.bank()});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("checked 6 objects: 6 ok, 0 failed"), std::string::npos) << r.out;
  {
    std::fstream f(path0_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(300);
    f.put('\x7f');
  }
  r = bank({"verify", "--bank-dir", d_.bank(), "--json"});
  EXPECT_EQ(r.rc, 1);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["checked"], 6);
  EXPECT_EQ(j["ok"], 5);
  ASSERT_EQ(j["failed"].size(), 1u);
  EXPECT_EQ(j["failed"][0]["key"], chain_.blocks[0]->key.hex());
  EXPECT_FALSE(fsys::exists(path0_));
  r = bank({"stats", "--bank-dir", d_.bank(), "--json"});
  EXPECT_EQ(nlohmann::json::parse(r.out)["quarantine_files"], 1);
}

TEST_F(SsdCli, GcRemovesTemporariesAndQuarantineAndEnforcesABudget) {
  fsys::copy_file(path0_, path0_ + ".tmp-1-1");
  std::ofstream(d_.bank() + "/v2/quarantine/x.blk.q1-1") << "junk";
  Result r = bank({"gc", "--bank-dir", d_.bank(), "--json", "--budget", "1"});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["temporary_files_removed"], 1);
  EXPECT_EQ(j["quarantine_files_removed"], 1);
  EXPECT_EQ(j["evicted_objects"], 6);
  EXPECT_EQ(j["evicted_bytes"], bytes_);
  EXPECT_EQ(j["objects"], 0);
  EXPECT_FALSE(fsys::exists(path0_ + ".tmp-1-1"));
  EXPECT_FALSE(fsys::exists(path0_));
}

// A bank directory that an older statebank (format version 1: 128-bit keys
// under objects/ and quarantine/) wrote into: reported, never read as
// version 2, and removed by gc; a newer version's directory and foreign
// files are never touched.
TEST_F(SsdCli, AVersionOneBankIsReportedIgnoredAndRemovedByGc) {
  const std::string v1 = d_.bank();
  fsys::create_directories(v1 + "/objects/ab");
  fsys::create_directories(v1 + "/quarantine");
  fsys::create_directories(v1 + "/v3/objects");
  const std::string v1_block = v1 + "/objects/ab/ab0123456789abcdef0123456789abcd.blk";
  // A version-1 header (magic, version 1) on a plausible file.
  std::string bytes(200, '\0');
  bytes.replace(0, 8, "STBANKOB");
  bytes[8] = 1;
  std::ofstream(v1_block, std::ios::binary) << bytes;
  std::ofstream(v1 + "/objects/ab/ab0123456789abcdef0123456789abcd.snp.tmp-7-1") << "half";
  std::ofstream(v1 + "/quarantine/cd0123456789abcdef0123456789abcd.snp.q7-1") << "bad";
  std::ofstream(v1 + "/objects/ab/README") << "mine";
  std::ofstream(v1 + "/v3/objects/future") << "newer";

  std::vector<std::string> lines;
  {
    auto o = test_options(v1);
    o.log = [&](const std::string& m) { lines.push_back(m); };
    auto t = open_tier(o);
    const SsdStats st = t->ssd_stats();
    EXPECT_EQ(st.old_format_files, 3u);
    EXPECT_EQ(st.old_format_bytes, 200u + 4u + 3u);
    EXPECT_EQ(st.tier.blocks + st.tier.snapshots, 6u) << "only version-2 objects are indexed";
    EXPECT_EQ(st.quarantine_files, 0u) << "version-1 quarantine is not this version's";
    EXPECT_TRUE(fsys::exists(v1_block));
  }
  int reported = 0;
  for (const auto& l : lines) reported += l.find("holds a version-1 bank") != std::string::npos;
  EXPECT_EQ(reported, 1) << "one line, not one per file";

  Result r = bank({"stats", "--bank-dir", v1, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["old_format_files"], 3);

  r = bank({"gc", "--bank-dir", v1, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["old_format_files_removed"], 3);
  EXPECT_EQ(j["old_format_bytes_removed"], 207);
  EXPECT_EQ(j["objects"], 6) << "gc of the old bank leaves this one alone";
  EXPECT_FALSE(fsys::exists(v1_block));
  EXPECT_FALSE(fsys::exists(v1 + "/quarantine"));
  EXPECT_TRUE(fsys::exists(v1 + "/objects/ab/README")) << "foreign files stay, and so does their directory";
  EXPECT_TRUE(fsys::exists(v1 + "/v3/objects/future")) << "a newer version's bank is never touched";
  r = bank({"stats", "--bank-dir", v1, "--json"});
  EXPECT_EQ(nlohmann::json::parse(r.out)["old_format_files"], 0);
}

TEST_F(SsdCli, PrefixesListsTheStoredChainAndFlushRemovesItByRoot) {
  Result r = bank({"prefixes", "--bank-dir", d_.bank(), "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["total"], 1);
  const auto& p = j["prefixes"][0];
  EXPECT_EQ(p["chain"], chain_.blocks.back()->key.hex());
  EXPECT_EQ(p["root"], chain_.blocks.front()->parent.hex());
  EXPECT_EQ(p["tokens"], 3 * kTestBlockTokens);
  EXPECT_EQ(p["restorable_tokens"], 3 * kTestBlockTokens);
  EXPECT_EQ(p["bytes"], bytes_);
  r = bank({"prefixes", "--bank-dir", d_.bank()});
  ASSERT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find(chain_.blocks.back()->key.hex()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 prefixes"), std::string::npos) << r.out;

  // Another root: nothing of this chain goes.
  r = bank({"flush", "--bank-dir", d_.bank(), "--root", std::string(64, '0'), "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["objects"], 0);
  r = bank({"flush", "--bank-dir", d_.bank(), "--root", chain_.blocks.front()->parent.hex(), "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["objects"], 6);
  EXPECT_EQ(nlohmann::json::parse(r.out)["bytes"], bytes_);
  EXPECT_FALSE(fsys::exists(path0_));
  r = bank({"stats", "--bank-dir", d_.bank(), "--json"});
  EXPECT_EQ(nlohmann::json::parse(r.out)["objects"], 0);
}

TEST_F(SsdCli, FlushAllEmptiesTheBankAndRefusesUnclearRequests) {
  Result r = bank({"flush", "--bank-dir", d_.bank()});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("exactly one of --all and --root"), std::string::npos) << r.err;
  r = bank({"flush", "--bank-dir", d_.bank(), "--root", "xyz"});
  EXPECT_EQ(r.rc, 2);
  r = bank({"ls", "--bank-dir", d_.bank(), "--all"});
  EXPECT_EQ(r.rc, 2);
  r = bank({"flush", "--bank-dir", d_.bank(), "--all"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("removed 6 objects"), std::string::npos) << r.out;
  r = bank({"prefixes", "--bank-dir", d_.bank(), "--json"});
  EXPECT_EQ(nlohmann::json::parse(r.out)["total"], 0);
}

TEST_F(SsdCli, BadInputEndsWithOneClearLine) {
  Result r = bank({"stats", "--bank-dir", d_.path() + "/nothing"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "statebank bank: no bank directory at " + d_.path() + "/nothing\n");
  r = bank({"verify", "--bank-dir", d_.path() + "/nothing"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_FALSE(fsys::exists(d_.path() + "/nothing"));  // never creates one
  r = bank({"frobnicate", "--bank-dir", d_.bank()});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("unknown action 'frobnicate'"), std::string::npos);
  r = bank({"gc", "--bank-dir", d_.bank(), "--budget", "lots"});
  EXPECT_EQ(r.rc, 2);
  r = bank({"stats", "--budget", "1G", "--bank-dir", d_.bank()});
  EXPECT_EQ(r.rc, 2);
  r = bank({"stats", "--nope"});
  EXPECT_EQ(r.rc, 2);
  r = bank({});
  EXPECT_EQ(r.rc, 2);
  // A bank in use by a writer.
  auto t = open_tier(test_options(d_.bank()));
  r = bank({"stats", "--bank-dir", d_.bank()});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("in use by another statebank process"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace sb
