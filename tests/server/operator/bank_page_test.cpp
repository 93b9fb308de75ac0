// The /bank page in a real browser (tools/server/bank_page.test.mjs: Debian's
// chromium, headless, through playwright-core) against the real binary after
// a known workload: cold and restored requests, a diverged one, another
// namespace, a pin. The script checks what the page shows against the admin
// API, that it follows new traffic, that its pin button pins, and that it
// fits a phone; its screenshots are kept under the build directory
// (test-artifacts/).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "tests/server/operator/bank_http_util.h"

namespace sb::testing {
namespace {

TEST(BankPage, ShowsWhatTheAdminApiSaysInARealBrowser) {
  GeneratedModel model;
  ServeProcess server(model.serve_args(model.root + "/bank",
                                       {"--api-key", "page-key", "--snapshot-every", "64", "--ssd-bank", "64M"}));
  auto c = server.client();
  const httplib::Headers key = {{"Authorization", "Bearer page-key"}};
  std::string manual;
  for (int i = 0; i < 24; ++i)
    manual += "You are the support assistant of a bakery. Answer in one short sentence, and quote the price list. ";
  auto ask = [&](const std::string& prompt, const std::string& salt = "", const char* mode = nullptr) {
    json b = {{"prompt", prompt}, {"max_tokens", 2}};
    if (!salt.empty()) b["cache_salt"] = salt;
    httplib::Headers h = key;
    if (mode) h.emplace("X-Cache-Mode", mode);
    return complete(c, b, h);
  };
  ask(manual + "Do you sell rye bread?");                          // cold
  ask(manual + "When do you open on Sundays?");                    // restored
  std::string edited = manual;
  edited.replace(edited.find("bakery", 1500), 6, "bistro");
  ask(edited + "Do you sell rye bread?");                          // diverged inside a block
  ask("Summarise the delivery terms of the bakery for a new customer. " + manual.substr(0, 400));  // another chain
  ask(manual + "Do you sell rye bread?", "tenant-b");              // another namespace
  ask(manual + "Do you sell rye bread?", "", "bypass");
  Reply pin = send(c, "POST", "/v1/bank/pins", {{"prompt", manual}, {"ttl_s", 3600}}, key);
  ASSERT_EQ(pin.status, 200) << pin.body.dump();
  wait_for_ssd(c, key);

  const char* src = std::getenv("SB_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "SB_SOURCE_DIR is not set (run through ctest)";
  const std::string cmd = "SB_BASE_URL=http://127.0.0.1:" + std::to_string(server.port) +
                          " SB_API_KEY=page-key SB_ARTIFACT_DIR=" SB_ARTIFACT_DIR " node --test " + std::string(src) +
                          "/tools/server/bank_page.test.mjs 2>&1";
  std::string out;
  EXPECT_EQ(run_shell(cmd, &out), 0) << out;
  EXPECT_NE(out.find("# fail 0"), std::string::npos) << out;
  EXPECT_NE(out.find("# pass 1"), std::string::npos) << out;
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace sb::testing
