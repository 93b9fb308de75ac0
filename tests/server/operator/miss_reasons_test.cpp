// Miss reasons over HTTP (bank/miss_reason.h; docs/interface.md): for each
// reason, the real binary and a generated hybrid checkpoint in the situation
// that causes it; the response's restore record names it, the operator's
// record (/v1/bank/requests) agrees, and /metrics counts it.
//
// One server serves most tests (starting one costs seconds on a loaded
// machine): SSD only, so that a damaged file is what a lookup reads, and no
// interval snapshots, so that snapshots sit only where prompts end. Each test
// uses prompts of its own and compares metric counts before and after.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "bank/format.h"
#include "bank/key.h"
#include "tests/server/operator/bank_http_util.h"

namespace sb::testing {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kSsdOnly = {"--ram-bank", "0", "--snapshot-every", "0"};

class MissReasons : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = std::make_unique<GeneratedModel>();
    server_ = std::make_unique<ServeProcess>(model_->serve_args(model_->root + "/bank", kSsdOnly));
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->stop(), 0);
    server_.reset();
    model_.reset();
  }
  void SetUp() override { c_ = std::make_unique<httplib::Client>(server_->client()); }

  // A request whose state is stored before the next one looks.
  Reply store(const json& body) {
    Reply r = complete(*c_, body);
    wait_for_ssd(*c_);
    return r;
  }
  double misses(const std::string& reason) {
    return metric(*c_, "statebank_prefix_misses_total{reason=\"" + reason + "\"}");
  }
  // The response says `reason`, so does the operator's record, and /metrics
  // counted one more.
  void expect_reason(const Reply& r, const std::string& reason, double before) {
    EXPECT_EQ(r.body["restore"]["miss_reason"], reason) << r.body["restore"].dump();
    EXPECT_EQ(operator_record(*c_, r.request_id)["miss_reason"], reason);
    EXPECT_EQ(misses(reason), before + 1);
  }

  static std::unique_ptr<GeneratedModel> model_;
  static std::unique_ptr<ServeProcess> server_;
  std::unique_ptr<httplib::Client> c_;
};
std::unique_ptr<GeneratedModel> MissReasons::model_;
std::unique_ptr<ServeProcess> MissReasons::server_;

json body(const std::vector<int32_t>& prompt, const std::string& salt = "") {
  json b = {{"prompt", prompt}, {"max_tokens", 2}};
  if (!salt.empty()) b["cache_salt"] = salt;
  return b;
}

std::vector<int32_t> head(const std::vector<int32_t>& v, size_t n) { return {v.begin(), v.begin() + n}; }
std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(MissReasons, AFirstRequestIsNoEntryAndItsRepeatHasNone) {
  const auto prompt = ids(300, 1000);
  const double before = misses("no_entry"), full = metric(*c_, "statebank_prefix_hits_total{extent=\"full\"}");
  Reply r = store(body(prompt));
  EXPECT_EQ(r.body["restore"]["restore_point"], 0);
  expect_reason(r, "no_entry", before);
  r = complete(*c_, body(prompt));
  EXPECT_EQ(r.body["restore"]["restore_point"], 256);  // the whole usable prefix: floor(299 / 64) blocks
  EXPECT_TRUE(r.body["restore"]["miss_reason"].is_null()) << r.body["restore"].dump();
  EXPECT_TRUE(operator_record(*c_, r.request_id)["miss_reason"].is_null());
  EXPECT_EQ(metric(*c_, "statebank_prefix_hits_total{extent=\"full\"}"), full + 1);
  EXPECT_EQ(misses("no_entry"), before + 1);
}

TEST_F(MissReasons, APromptThatLeavesAStoredOneSaysAtWhichToken) {
  // A 130-token prompt leaves a snapshot at 128; a longer one that starts
  // with the same 128 tokens restores there and stores two more blocks. A
  // third prompt leaves that one at token 150.
  const auto shared = ids(128, 2000);
  store(body(cat(shared, ids(2, 50))));
  auto second = cat(shared, ids(172, 2500));
  store(body(second));
  second[150] += 1;
  const double before = misses("diverged"), partial = metric(*c_, "statebank_prefix_hits_total{extent=\"partial\"}");
  Reply r = complete(*c_, body(second));
  EXPECT_EQ(r.body["restore"]["restore_point"], 128);
  EXPECT_EQ(r.body["restore"]["diverged_at"], 150);
  expect_reason(r, "diverged", before);
  EXPECT_EQ(operator_record(*c_, r.request_id)["diverged_at"], 150);
  EXPECT_EQ(metric(*c_, "statebank_prefix_hits_total{extent=\"partial\"}"), partial + 1);
}

TEST_F(MissReasons, StoredBlocksWithoutASnapshotAreSnapshotMissing) {
  const auto prompt = ids(300, 4000);  // its only snapshot is at 256
  store(body(prompt));
  const double before = misses("snapshot_missing");
  Reply r = complete(*c_, body(head(prompt, 150)));
  EXPECT_EQ(r.body["restore"]["restore_point"], 0);
  EXPECT_EQ(r.body["restore"]["matched_tokens"], 128);
  expect_reason(r, "snapshot_missing", before);
}

TEST_F(MissReasons, AStoredBlockThatRotsOnDiskIsCheckFailed) {
  const auto prompt = ids(300, 5000);
  store(body(prompt, "rot"));
  // The file of the second block: its name is its chain key, under the
  // namespace's root as /v1/bank/prefixes lists it.
  Key root;
  const Reply listed = send(*c_, "GET", "/v1/bank/prefixes?limit=10000");
  for (const json& p : listed.body["prefixes"])
    if (p["namespace"] == "s3:rot") {
      ASSERT_TRUE(Key::from_hex(p["root"].get<std::string>(), &root));
    }
  const Key k1 = chain_key(root, std::span<const int32_t>(prompt).first(64));
  const Key k2 = chain_key(k1, std::span<const int32_t>(prompt).subspan(64, 64));
  const std::string path =
      model_->root + "/bank/v2/objects/" + k2.hex().substr(0, 2) + "/" + object_file_name(ObjectKind::kBlock, k2);
  ASSERT_TRUE(fs::exists(path)) << path;
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char last = 0;
    f.read(&last, 1);
    last ^= 0x5a;
    f.seekp(-1, std::ios::end);
    f.write(&last, 1);
  }
  const double before = misses("check_failed");
  Reply r = complete(*c_, body(prompt, "rot"));
  EXPECT_EQ(r.body["restore"]["restore_point"], 0);  // the only snapshot (256) sits above the damage
  EXPECT_GE(r.body["restore"]["check_failures"].get<int>(), 1);
  expect_reason(r, "check_failed", before);
}

TEST_F(MissReasons, AnotherNamespaceIsShownToTheOperatorOnly) {
  const auto prompt = ids(300, 6000);
  store(body(prompt, "tenant-a"));
  const double before = misses("other_namespace"), no_entry = misses("no_entry");
  Reply r = complete(*c_, body(prompt, "tenant-b"));
  EXPECT_EQ(r.body["restore"]["restore_point"], 0);
  // Tenant b learns nothing about tenant a: its own namespace has no entry.
  EXPECT_EQ(r.body["restore"]["miss_reason"], "no_entry");
  EXPECT_EQ(r.body["restore"].dump().find("other"), std::string::npos);
  EXPECT_EQ(operator_record(*c_, r.request_id)["miss_reason"], "other_namespace");
  EXPECT_EQ(misses("other_namespace"), before + 1);
  EXPECT_EQ(misses("no_entry"), no_entry);
}

TEST_F(MissReasons, ABypassedRequestIsBypass) {
  const auto prompt = ids(300, 7000);
  store(body(prompt));
  const double before = misses("bypass");
  Reply r = complete(*c_, body(prompt), {{"X-Cache-Mode", "bypass"}});
  EXPECT_EQ(r.body["restore"]["mode"], "bypass");
  expect_reason(r, "bypass", before);
}

TEST_F(MissReasons, AnEchoRequestIsEcho) {
  const auto prompt = ids(65, 7500);  // echo computes logits for every prompt token: keep it short
  store(body(prompt));
  json echo = body(prompt);
  echo["echo"] = true;
  echo["logprobs"] = 0;
  const double before = misses("echo");
  Reply r = complete(*c_, echo);
  EXPECT_EQ(r.body["restore"]["restore_point"], 0);
  expect_reason(r, "echo", before);
}

TEST_F(MissReasons, AReadOnlyRequestMissesAgainAndStillRestoresWhatIsStored) {
  const auto fresh = ids(300, 8000);
  for (int i = 0; i < 2; ++i) {
    const double before = misses("read_only");
    Reply r = complete(*c_, body(fresh), {{"X-Cache-Mode", "read-only"}});
    wait_for_ssd(*c_);
    EXPECT_EQ(r.body["restore"]["restore_point"], 0);
    expect_reason(r, "read_only", before);
  }
  const auto stored = ids(300, 8500);
  store(body(stored));
  Reply r = complete(*c_, body(stored), {{"X-Cache-Mode", "read-only"}});
  EXPECT_EQ(r.body["restore"]["restore_point"], 256);
  EXPECT_TRUE(r.body["restore"]["miss_reason"].is_null());
}

TEST_F(MissReasons, ABlockEvictedFromTheMiddleOfAChainIsEvicted) {
  // Another server: RAM off, an SSD budget one byte short of two
  // conversations, so the second one's last write evicts the first one's
  // oldest object, its first block. Their sizes on disk are measured here.
  const auto first = ids(8 * 64 + 1, 3000), second = ids(3 * 64 + 1, 9000);
  const uint64_t before = send(*c_, "GET", "/v1/bank").body["ssd"]["bytes"].get<uint64_t>();
  store(body(first, "measure"));
  store(body(second, "measure"));
  const uint64_t both = send(*c_, "GET", "/v1/bank").body["ssd"]["bytes"].get<uint64_t>() - before;
  auto args = kSsdOnly;
  args.insert(args.end(), {"--ssd-bank", std::to_string(both - 1)});
  ServeProcess server(model_->serve_args(model_->root + "/bank_evicted", args));
  auto c = server.client();
  complete(c, body(first));
  wait_for_ssd(c);
  complete(c, body(second));
  wait_for_ssd(c);
  EXPECT_EQ(send(c, "GET", "/v1/bank").body["ssd"]["evictions"], 1);
  Reply r = complete(c, body(first));
  EXPECT_EQ(r.body["restore"]["restore_point"], 0);
  EXPECT_EQ(r.body["restore"]["miss_reason"], "evicted") << r.body["restore"].dump();
  EXPECT_EQ(operator_record(c, r.request_id)["miss_reason"], "evicted");
  EXPECT_EQ(metric(c, "statebank_prefix_misses_total{reason=\"evicted\"}"), 1);
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(MissReasons, ABankThatCannotStoreIsReadOnlyForEveryRequest) {
  const std::string dir = model_->root + "/bank_read_only";
  fs::create_directories(dir);
  ServeProcess server(model_->serve_args(dir, {"--ram-bank", "0", "--ssd", "read-only"}));
  auto c = server.client();
  Reply r = complete(c, body(ids(300, 9500)));
  EXPECT_EQ(r.body["restore"]["miss_reason"], "read_only") << r.body["restore"].dump();
  EXPECT_EQ(metric(c, "statebank_prefix_misses_total{reason=\"read_only\"}"), 1);
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace sb::testing
