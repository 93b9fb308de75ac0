// The operator's API over HTTP (docs/interface.md, "The operator's view")
// against the real binary: the admin key, stored prefixes with their text,
// pins (a pinned prompt survives a RAM squeeze that evicts the rest), bad
// requests, and flushes.
#include <gtest/gtest.h>

#include <memory>

#include "tests/server/operator/bank_http_util.h"

namespace sb::testing {
namespace {

class BankAdminHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = std::make_unique<GeneratedModel>(); }
  static void TearDownTestSuite() { model_.reset(); }
  static std::unique_ptr<GeneratedModel> model_;
};
std::unique_ptr<GeneratedModel> BankAdminHttp::model_;

json body(const json& prompt, const std::string& salt = "") {
  json b = {{"prompt", prompt}, {"max_tokens", 2}};
  if (!salt.empty()) b["cache_salt"] = salt;
  return b;
}

const httplib::Headers kKey = {{"Authorization", "Bearer admin-key-1"}};

TEST_F(BankAdminHttp, ListsPinsAndFlushesWithTheAdminKey) {
  ServeProcess server(model_->serve_args(model_->root + "/bank_api", {"--api-key", "admin-key-1"}));
  auto c = server.client();
  // Without the key every operator route is refused; the page is public.
  for (const char* path : {"/v1/bank", "/v1/bank/prefixes", "/v1/bank/requests", "/v1/bank/pins"})
    EXPECT_EQ(send(c, "GET", path).status, 401) << path;
  EXPECT_EQ(send(c, "POST", "/v1/bank/flush", {{"all", true}}).status, 401);
  EXPECT_EQ(send(c, "POST", "/v1/bank/pins", {{"chain", std::string(64, '0')}, {"ttl_s", 5}}).status, 401);
  EXPECT_EQ(send(c, "DELETE", "/v1/bank/pins/" + std::string(64, '0')).status, 401);
  auto page = c.Get("/bank");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("<title>statebank"), std::string::npos);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'none'"), std::string::npos);
  EXPECT_EQ(c.Get("/bank/bank.js")->status, 200);
  EXPECT_EQ(c.Get("/bank/nothing.js")->status, 404);

  std::string text;
  for (int i = 0; i < 12; ++i) text += "The bank keeps the model state of shared prefixes. ";
  complete(c, body(text, "docs"), kKey);
  complete(c, body(ids(300, 1000)), kKey);
  Reply listed = send(c, "GET", "/v1/bank/prefixes?text=1", nullptr, kKey);
  ASSERT_EQ(listed.status, 200) << listed.body.dump();
  EXPECT_EQ(listed.body["total"], 2);
  EXPECT_EQ(listed.body["block_tokens"], 64);
  const json* docs = nullptr;
  for (const json& p : listed.body["prefixes"])
    if (p["text"].is_string() && p["text"].get<std::string>().rfind("The bank keeps", 0) == 0) docs = &p;
  ASSERT_NE(docs, nullptr) << listed.body.dump();
  // A namespace from the key's tenant (--api-key: "default") and the salt,
  // never the key itself.
  EXPECT_EQ((*docs)["namespace"].get<std::string>().rfind("t7:default", 0), 0u);
  EXPECT_NE((*docs)["namespace"].get<std::string>().find("s4:docs"), std::string::npos);
  EXPECT_EQ((*docs)["namespace"].get<std::string>().find("admin-key-1"), std::string::npos);
  EXPECT_GT((*docs)["tiers"]["ram"]["bytes"].get<int64_t>(), 0);
  const std::string docs_chain = (*docs)["chain"];

  // Pin the text prompt as a completion with this key and salt sees it.
  Reply pin = send(c, "POST", "/v1/bank/pins", {{"prompt", text}, {"cache_salt", "docs"}, {"ttl_s", 600}}, kKey);
  ASSERT_EQ(pin.status, 200) << pin.body.dump();
  EXPECT_EQ(pin.body["chain"], docs_chain);
  EXPECT_EQ(pin.body["tokens"], (*docs)["tokens"]);
  EXPECT_GT(pin.body["tiers"]["ram"]["objects"].get<int>(), 0);
  EXPECT_GT(pin.body["ttl_left_ms"].get<int64_t>(), 590000);
  Reply pins = send(c, "GET", "/v1/bank/pins", nullptr, kKey);
  ASSERT_EQ(pins.body["pins"].size(), 1u);
  EXPECT_EQ(pins.body["pins"][0]["id"], docs_chain);
  listed = send(c, "GET", "/v1/bank/prefixes?sort=bytes", nullptr, kKey);
  for (const json& p : listed.body["prefixes"])
    EXPECT_EQ(p["pinned_until_ms"].is_null(), p["chain"] != docs_chain) << p.dump();

  // Bad requests: one clear 400 each.
  for (const json& bad : {json{{"prompt", text}}, json{{"prompt", text}, {"chain", docs_chain}, {"ttl_s", 5}},
                          json{{"chain", "xyz"}, {"ttl_s", 5}}, json{{"prompt", text}, {"ttl_s", 999999999}},
                          json{{"prompt", "short"}, {"ttl_s", 5}}, json{{"prompt", {1, -5}}, {"ttl_s", 5}},
                          json{{"prompt", text}, {"ttl_s", 5}, {"namespace", "x"}, {"cache_salt", "y"}},
                          json{{"chain", docs_chain}, {"ttl_s", 5}, {"cache_salt", "y"}}}) {
    Reply r = send(c, "POST", "/v1/bank/pins", bad, kKey);
    EXPECT_EQ(r.status, 400) << bad.dump() << " " << r.body.dump();
    EXPECT_TRUE(r.body.contains("error"));
  }
  EXPECT_EQ(send(c, "POST", "/v1/bank/pins", {{"chain", std::string(64, 'a')}, {"ttl_s", 5}}, kKey).status, 404);
  EXPECT_EQ(send(c, "GET", "/v1/bank/prefixes?sort=age", nullptr, kKey).status, 400);
  EXPECT_EQ(send(c, "GET", "/v1/bank/prefixes?limit=-1", nullptr, kKey).status, 400);
  EXPECT_EQ(send(c, "POST", "/v1/bank/flush", json::object(), kKey).status, 400);
  EXPECT_EQ(send(c, "POST", "/v1/bank/flush", {{"all", false}}, kKey).status, 400);
  EXPECT_EQ(send(c, "DELETE", "/v1/bank/pins/nope", nullptr, kKey).status, 404);

  // Flushing the salted namespace takes its prefix and its pin, nothing else.
  Reply flushed = send(c, "POST", "/v1/bank/flush", {{"cache_salt", "docs"}}, kKey);
  ASSERT_EQ(flushed.status, 200) << flushed.body.dump();
  EXPECT_GT(flushed.body["objects"].get<int>(), 0);
  EXPECT_EQ(flushed.body["pins"], 1);
  listed = send(c, "GET", "/v1/bank/prefixes", nullptr, kKey);
  EXPECT_EQ(listed.body["total"], 1);
  EXPECT_TRUE(send(c, "GET", "/v1/bank/pins", nullptr, kKey).body["pins"].empty());
  Reply again = complete(c, body(text, "docs"), kKey);
  EXPECT_EQ(again.body["restore"]["restore_point"], 0);
  // Everything.
  flushed = send(c, "POST", "/v1/bank/flush", {{"all", true}}, kKey);
  ASSERT_EQ(flushed.status, 200);
  EXPECT_EQ(send(c, "GET", "/v1/bank/prefixes", nullptr, kKey).body["total"], 0);
  Reply stats = send(c, "GET", "/v1/bank", nullptr, kKey);
  for (const json& t : stats.body["tiers"]) EXPECT_EQ(t["bytes"], 0) << t.dump();
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(BankAdminHttp, APinnedPromptSurvivesARamSqueezeThatEvictsTheRest) {
  // RAM only, room for about two 300-token prompts.
  ServeProcess server(model_->serve_args(model_->root + "/bank_squeeze", {"--ssd", "off", "--ram-bank", "400K"}));
  auto c = server.client();
  const auto pinned = ids(300, 1000), unpinned = ids(300, 2000);
  complete(c, body(pinned));
  complete(c, body(unpinned));
  Reply pin = send(c, "POST", "/v1/bank/pins", {{"prompt", pinned}, {"ttl_s", 3600}});
  ASSERT_EQ(pin.status, 200) << pin.body.dump();
  EXPECT_EQ(pin.body["tokens"], 256);
  for (int i = 0; i < 6; ++i) complete(c, body(ids(300, 3000 + 1000 * i)));
  EXPECT_GT(send(c, "GET", "/v1/bank").body["ram"]["evictions"].get<int>(), 0);
  // The pinned prompt restores all it can; the other one of its age is gone.
  Reply r = complete(c, body(pinned));
  EXPECT_EQ(r.body["restore"]["restore_point"], 256);
  EXPECT_EQ(r.body["restore"]["mode"], "ram");
  r = complete(c, body(unpinned));
  EXPECT_EQ(r.body["restore"]["restore_point"], 0);
  // Unpinned, it goes the way of the others.
  ASSERT_EQ(send(c, "DELETE", "/v1/bank/pins/" + pin.body["id"].get<std::string>()).status, 200);
  for (int i = 0; i < 6; ++i) complete(c, body(ids(300, 11000 + 1000 * i)));
  r = complete(c, body(pinned));
  EXPECT_EQ(r.body["restore"]["restore_point"], 0);
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace sb::testing
