// Issue 17 end to end, with the real binary over HTTP:
//  - tenants (--api-keys-file): two keys never restore each other's
//    prefixes (cached_tokens 0 across keys), each restores its own; the
//    admin routes need an admin key;
//  - the shared namespace (--shared-namespace): both tenants restore the
//    public prefix from it, neither reads the other's continuation, and every
//    response equals bypass;
//  - the audit (--audit 1) also audits a request that a stop string ended.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "tests/server/serve_process.h"

namespace sb::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const char* kAlice = "alice-key-0123456789";
const char* kBob = "bob-key-0123456789abc";
const char* kPublic = "public-key-0123456789";
const char* kOps = "ops-key-0123456789abcd";

class HardeningE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/sb_hardening_e2e_XXXXXX";
    root_ = mkdtemp(tmpl);
    model_ = root_ + "/model";
    ASSERT_EQ(gen_model(model_, "qwen3_next", "tiny", 5), 0)
        << "gen-model failed (is SB_TOKENIZER_DIR set? run through ctest)";
    keys_ = root_ + "/keys";
    std::ofstream(keys_) << "alice " << kAlice << "\nbob " << kBob << "\npublic " << kPublic << "\nops " << kOps
                         << " admin\n";
    chmod(keys_.c_str(), 0600);
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static std::vector<std::string> serve_args(const std::string& bank) {
    return {SB_STATEBANK_BIN, "serve",          "--model", model_, "--port",           "0",   "--bank-dir",
            bank,             "--block-tokens", "64",      "--snapshot-every", "128", "--threads", "1",
            "--ram-bank",     "256M"};
  }
  static std::string root_, model_, keys_;
};
std::string HardeningE2E::root_, HardeningE2E::model_, HardeningE2E::keys_;

std::vector<int32_t> ids(int n, int start, int stride) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(start + (i * stride) % 20000);
  return v;
}
std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
std::vector<std::string> concat_args(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
json completion(const std::vector<int32_t>& prompt) {
  return json{{"prompt", prompt}, {"max_tokens", 5}, {"logprobs", 3}, {"temperature", 0}};
}

httplib::Headers auth(const char* key, bool bypass = false) {
  httplib::Headers h;
  if (key) h.emplace("Authorization", std::string("Bearer ") + key);
  if (bypass) h.emplace("X-Cache-Mode", "bypass");
  return h;
}

json post(httplib::Client& c, const char* key, const json& body, bool bypass = false) {
  auto r = c.Post("/v1/completions", auth(key, bypass), body.dump(), "application/json");
  if (!r) {
    ADD_FAILURE() << "no response";
    return json::object();
  }
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body);
}

// Served through the bank as `key`, compared with bypass; returns cached_tokens.
int64_t cached(httplib::Client& c, const char* key, const std::vector<int32_t>& prompt) {
  json served = post(c, key, completion(prompt));
  json cold = post(c, key, completion(prompt), true);
  EXPECT_EQ(served["choices"].dump(), cold["choices"].dump());
  EXPECT_EQ(served["restore"]["check_failures"], 0);
  return served["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
}

int status_of(httplib::Client& c, const std::string& path, const char* key) {
  auto r = c.Get(path.c_str(), auth(key));
  return r ? r->status : -1;
}

TEST_F(HardeningE2E, TwoKeysNeverRestoreEachOthersPrefixes) {
  ServeProcess server(concat_args(serve_args(root_ + "/bank_tenants"), {"--api-keys-file", keys_}));
  auto c = server.client();
  const auto prompt = ids(3 * 64 + 20, 700, 13);
  EXPECT_EQ(cached(c, kAlice, prompt), 0);
  EXPECT_EQ(cached(c, kAlice, prompt), 3 * 64) << "alice restores her own prefix";
  EXPECT_EQ(cached(c, kBob, prompt), 0) << "bob never restores alice's";
  EXPECT_EQ(cached(c, kBob, prompt), 3 * 64) << "bob restores his own";
  // A cache_salt subdivides a tenant: a salted request is a stranger too.
  json salted = completion(prompt);
  salted["cache_salt"] = "project-x";
  EXPECT_EQ(post(c, kAlice, salted)["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

  // Keys and the admin routes.
  EXPECT_EQ(status_of(c, "/v1/models", nullptr), 401);
  EXPECT_EQ(status_of(c, "/v1/models", "not-a-key-0123456789"), 401);
  EXPECT_EQ(status_of(c, "/v1/models", kBob), 200);
  EXPECT_EQ(status_of(c, "/v1/bank", kAlice), 403);
  EXPECT_EQ(status_of(c, "/metrics", kBob), 403);
  EXPECT_EQ(status_of(c, "/v1/bank", kOps), 200);
  EXPECT_EQ(status_of(c, "/metrics", kOps), 200);
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(HardeningE2E, BothTenantsRestoreTheSharedNamespaceAndNothingElse) {
  ServeProcess server(concat_args(serve_args(root_ + "/bank_shared"),
                                  {"--api-keys-file", keys_, "--shared-namespace", "public"}));
  auto c = server.client();
  const auto system = ids(3 * 64 + 10, 3000, 17);  // the public prefix: three full blocks
  // The operator's tenant publishes it.
  EXPECT_EQ(cached(c, kPublic, system), 0);
  // Both tenants restore it, each with their own question.
  const auto alice_prompt = concat(system, ids(2 * 64 + 30, 5000, 7));
  EXPECT_EQ(cached(c, kAlice, alice_prompt), 3 * 64);
  EXPECT_EQ(cached(c, kBob, concat(system, ids(40, 9000, 3))), 3 * 64);
  // Alice's continuation lives in her namespace: she restores past the
  // public part; bob, sending her exact prompt, gets only the public part.
  EXPECT_EQ(cached(c, kAlice, alice_prompt), 5 * 64);
  EXPECT_EQ(cached(c, kBob, alice_prompt), 3 * 64);
  // The shared tenant itself does not read alice's continuation either.
  EXPECT_EQ(cached(c, kPublic, alice_prompt), 3 * 64);
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(HardeningE2E, ARequestEndedByAStopStringIsAudited) {
  ServeProcess server(concat_args(serve_args(root_ + "/bank_audit"), {"--audit", "1"}));
  auto c = server.client();
  const auto prompt = ids(2 * 64 + 9, 1200, 11);
  json body = completion(prompt);
  body["max_tokens"] = 12;
  const json first = post(c, nullptr, body);  // publishes; cold: not audited
  const std::string text = first["choices"][0]["text"].get<std::string>();
  ASSERT_GE(text.size(), 4u) << text;
  // A stop string from the middle of what the model says.
  body["stop"] = json::array({text.substr(text.size() / 2, 1)});
  const json stopped = post(c, nullptr, body);
  ASSERT_GT(stopped["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
  ASSERT_EQ(stopped["choices"][0]["finish_reason"], "stop");
  ASSERT_LT(stopped["usage"]["completion_tokens"].get<int64_t>(), 12) << "the stop string ended generation";
  // The audit runs in the background once the server is idle.
  const std::string metrics = wait_for_metrics_line(c, "statebank_audits_total 1\n");
  ASSERT_FALSE(metrics.empty()) << "/metrics did not answer";
  EXPECT_NE(metrics.find("statebank_audits_total 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("statebank_audit_mismatches_total 0\n"), std::string::npos) << metrics;
  EXPECT_EQ(server.stop(), 0);
}

// Issue 34, finding 6: a streamed restored request under --audit 1. Its job
// is cancelled and freed once its stream closes; the audit used to call the
// job's cancelled() (use after free), recompute 0 tokens and quarantine the
// good chain. Now: audited, equal, nothing quarantined, the chain restores.
TEST_F(HardeningE2E, AStreamedRestoredRequestIsAuditedEqualAndQuarantinesNothing) {
  ServeProcess server(concat_args(serve_args(root_ + "/bank_audit_stream"), {"--audit", "1"}));
  auto c = server.client();
  const auto prompt = ids(3 * 64 + 5, 1500, 13);
  const json body = completion(prompt);
  post(c, nullptr, body);  // publishes; cold: not audited
  json streamed = body;
  streamed["stream"] = true;
  auto r = c.Post("/v1/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  ASSERT_NE(r->body.find("[DONE]"), std::string::npos) << r->body;
  const std::string metrics = wait_for_metrics_line(c, "statebank_audits_total 1\n");
  ASSERT_FALSE(metrics.empty()) << "/metrics did not answer";
  EXPECT_NE(metrics.find("statebank_audits_total 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("statebank_audit_mismatches_total 0\n"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("statebank_audit_mismatches_total 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("statebank_bank_quarantined_total{tier=\"ram\"} 0\n"), std::string::npos) << metrics;
  // Nothing was quarantined: the next request restores the chain.
  const json after = post(c, nullptr, body);
  EXPECT_GT(after["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(server.stop(), 0);
}

TEST(ServeCliKeys, BadKeyFilesAndSharedNamespaceAreRefusedBeforeLoading) {
  char tmpl[] = "/tmp/sb_keys_cli_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string keys = dir + "/keys";
  std::ofstream(keys) << "alice " << kAlice << "\n";
  chmod(keys.c_str(), 0644);
  EXPECT_EQ(run_command({SB_STATEBANK_BIN, "serve", "--model", "/nonexistent", "--api-keys-file", keys}), 2)
      << "readable by others";
  chmod(keys.c_str(), 0600);
  EXPECT_EQ(run_command({SB_STATEBANK_BIN, "serve", "--model", "/nonexistent", "--api-keys-file", keys,
                         "--shared-namespace", "nobody"}),
            2);
  EXPECT_EQ(run_command({SB_STATEBANK_BIN, "serve", "--model", "/nonexistent", "--api-key", kAlice,
                         "--api-keys-file", keys}),
            2);
  EXPECT_EQ(run_command({SB_STATEBANK_BIN, "serve", "--model", "/nonexistent", "--shared-namespace", "alice"}), 2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb::testing
