// The end-to-end tests' one comparison: a request served through the bank
// against the same request with X-Cache-Mode: bypass on the same server,
// choices printed identically (tokens, text, logprob digits), and the
// restore record's invariants. Plus the small prompt builders they share.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace sb::testing {

inline nlohmann::json post(httplib::Client& c, const std::string& path, const nlohmann::json& body, bool bypass) {
  httplib::Headers h;
  if (bypass) h.emplace("X-Cache-Mode", "bypass");
  auto r = c.Post(path.c_str(), h, body.dump(), "application/json");
  if (!r) {
    ADD_FAILURE() << "no response from " << path;
    return nlohmann::json::object();
  }
  EXPECT_EQ(r->status, 200) << r->body;
  return nlohmann::json::parse(r->body);
}

// Checks a bank response against the bypass response of the same request.
inline void expect_equal_to_bypass(const nlohmann::json& served, const nlohmann::json& cold,
                                   bool expect_no_check_failures = true) {
  EXPECT_EQ(cold["restore"]["mode"], "bypass");
  // Same tokens, same text, same logprob digits: the choices print identically.
  EXPECT_EQ(served["choices"].dump(), cold["choices"].dump());
  EXPECT_EQ(served["usage"]["completion_tokens"], cold["usage"]["completion_tokens"]);
  const nlohmann::json& r = served["restore"];
  EXPECT_EQ(served["usage"]["prompt_tokens_details"]["cached_tokens"], r["restore_point"]);
  EXPECT_LE(r["restore_point"].get<int64_t>(), r["common_prefix_tokens"].get<int64_t>());
  if (expect_no_check_failures) {
    EXPECT_EQ(r["check_failures"], 0);
  }
}

// Sends the request twice (bank, then bypass) and checks they agree.
// Returns the bank response.
inline nlohmann::json served_equals_bypass(httplib::Client& c, const std::string& path, const nlohmann::json& body,
                                           bool expect_no_check_failures = true) {
  nlohmann::json served = post(c, path, body, false);
  nlohmann::json cold = post(c, path, body, true);
  expect_equal_to_bypass(served, cold, expect_no_check_failures);
  return served;
}

inline std::vector<int32_t> ids(int n, int start, int stride) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(start + (i * stride) % 20000);
  return v;
}

inline std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace sb::testing
