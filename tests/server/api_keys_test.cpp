// Tenants (server/protocols/namespace.h): the --api-keys-file format and its errors,
// constant-time key lookup, and namespaces that never run together.
#include "server/protocols/namespace.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace sb {
namespace {

class KeysFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sb_api_keys_XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& text, mode_t mode = 0600) {
    const std::string path = dir_ + "/keys";
    std::filesystem::remove(path);
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    return path;
  }
  Status load(const std::string& text, ApiKeys* out, mode_t mode = 0600) { return ApiKeys::load_file(write(text, mode), out); }
  std::string dir_;
};

TEST_F(KeysFile, TenantsAdminsCommentsAndRotation) {
  ApiKeys keys;
  ASSERT_TRUE(load("# tenants of this server\n"
                   "\n"
                   "alice  alice-key-0123456789\n"
                   "bob\tbob-key-0123456789abc\r\n"
                   "ops ops-key-0123456789ab admin\n"
                   "alice alice-new-key-0123456789\n",
                   &keys)
                  .is_ok());
  EXPECT_EQ(keys.size(), 4u);
  const Tenant* a = keys.find("alice-key-0123456789");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->name, "alice");
  EXPECT_FALSE(a->admin);
  EXPECT_EQ(keys.find("alice-new-key-0123456789")->name, "alice") << "a tenant's second key (rotation)";
  EXPECT_EQ(keys.find("bob-key-0123456789abc")->name, "bob");
  EXPECT_TRUE(keys.find("ops-key-0123456789ab")->admin);
  EXPECT_EQ(keys.find("alice-key-012345678"), nullptr);
  EXPECT_EQ(keys.find(""), nullptr);
  EXPECT_EQ(keys.find("alice"), nullptr);
  EXPECT_TRUE(keys.has_tenant("bob"));
  EXPECT_FALSE(keys.has_tenant("carol"));
}

TEST_F(KeysFile, EveryMalformedFileIsOneClearError) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"alice\n", "keys:1: expected 'TENANT KEY' or 'TENANT KEY admin'"},
      {"# c\nalice alice-key-0123456789 root\n", "keys:2: expected 'TENANT KEY' or 'TENANT KEY admin'"},
      {"alice alice-key-0123456789 admin extra\n", "keys:1: expected"},
      {"al/ce alice-key-0123456789\n", "keys:1: tenant names are 1 to 64"},
      {"alice short\n", "keys:1: keys are 16 to 256 printable characters"},
      {"alice alice-key-0123456789\nbob alice-key-0123456789\n",
       "keys:2: this key is already given on line 1 (to tenant alice)"},
      {"# only comments\n\n", "holds no keys"},
      {"", "holds no keys"},
  };
  for (const auto& c : cases) {
    ApiKeys keys;
    const Status s = load(c.text, &keys);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.text;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
  }
  ApiKeys keys;
  Status s = load("alice alice-key-0123456789\n", &keys, 0644);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("mode 0644); chmod 600 it"), std::string::npos) << s.message();
  s = load("alice alice-key-0123456789\n", &keys, 0620);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << "group-writable";
  EXPECT_EQ(ApiKeys::load_file(dir_ + "/missing", &keys).code(), Code::kIoError);
}

TEST(Namespace, TenantsAndSaltsNeverRunTogether) {
  const Tenant alice{"alice", false}, bob{"bob", false}, spelled{"t5:alices1:x", false};
  const std::string a = request_namespace(&alice, false, "");
  EXPECT_EQ(a, "t5:alice");
  EXPECT_NE(a, request_namespace(&bob, false, ""));
  EXPECT_NE(request_namespace(&alice, true, "x"), a);
  EXPECT_NE(request_namespace(&alice, true, ""), a) << "an empty salt is still a salt";
  EXPECT_EQ(request_namespace(nullptr, false, ""), "");
  // A salt that spells a tenant's namespace, or a tenant named like one, stays apart.
  EXPECT_NE(request_namespace(nullptr, true, a), a);
  EXPECT_NE(request_namespace(&spelled, false, ""), request_namespace(&alice, true, "x"));
  // One key: the tenant "default", an admin.
  const ApiKeys one = ApiKeys::single("sekret");
  ASSERT_NE(one.find("sekret"), nullptr);
  EXPECT_EQ(one.find("sekret")->name, "default");
  EXPECT_TRUE(one.find("sekret")->admin);
  EXPECT_EQ(one.find("sekreT"), nullptr);
}

}  // namespace
}  // namespace sb
