// Helpers for the operator-view tests over HTTP against the real binary
// (miss reasons, the admin API, the /bank page): a generated hybrid
// checkpoint per test suite, requests with headers, the operator's record
// of a request, a metric's value, and waiting for the SSD write queue.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/serve_process.h"
#include "tests/util/models.h"
#include "tests/util/temp_dir.h"

namespace sb::testing {

using nlohmann::json;

// A tiny Qwen3-Next checkpoint (Gated DeltaNet: its prefixes need
// snapshots) from the fixture cache, and a directory for the suite's banks.
class GeneratedModel {
 public:
  GeneratedModel() : model(tiny_checkpoint(Arch::kQwen3Next, 3)), root(dir_.path()) {}
  // `statebank serve` on a free port with 64-token blocks and one thread.
  std::vector<std::string> serve_args(const std::string& bank, std::vector<std::string> extra = {}) const {
    std::vector<std::string> a = {SB_STATEBANK_BIN, "serve",          "--model", model, "--port", "0",
                                  "--bank-dir",     bank,             "--block-tokens", "64", "--threads", "1"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

 private:
  TempDir dir_;

 public:
  const std::string model;  // the checkpoint's directory
  const std::string root;   // a fresh directory for banks, removed with this object
};

struct Reply {
  int status = 0;
  json body;
  std::string request_id;
};

inline Reply send(httplib::Client& c, const std::string& method, const std::string& path, const json& body = nullptr,
                  httplib::Headers headers = {}) {
  httplib::Result r = method == "GET"    ? c.Get(path.c_str(), headers)
                      : method == "DELETE" ? c.Delete(path.c_str(), headers)
                                           : c.Post(path.c_str(), headers, body.dump(), "application/json");
  Reply out;
  if (!r) {
    ADD_FAILURE() << "no response from " << method << " " << path;
    return out;
  }
  out.status = r->status;
  out.body = json::parse(r->body, nullptr, false);
  out.request_id = r->get_header_value("X-Request-Id");
  return out;
}

// A completion that must succeed; returns its response.
inline Reply complete(httplib::Client& c, const json& body, httplib::Headers headers = {}) {
  Reply r = send(c, "POST", "/v1/completions", body, std::move(headers));
  EXPECT_EQ(r.status, 200) << r.body.dump();
  return r;
}

// Token ids that no other call with another `start` repeats.
inline std::vector<int32_t> ids(int n, int start, int stride = 7) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(start + (i * stride) % 20000);
  return v;
}

// The operator's restore record of a request (GET /v1/bank/requests).
inline json operator_record(httplib::Client& c, const std::string& request_id) {
  Reply r = send(c, "GET", "/v1/bank/requests");
  for (const json& q : r.body["requests"])
    if (q["id"] == request_id) return q["restore"];
  ADD_FAILURE() << "request " << request_id << " is not in /v1/bank/requests";
  return json::object();
}

// The value of one series in /metrics ("name{labels}"), or -1.
inline double metric(httplib::Client& c, const std::string& series) {
  auto r = c.Get("/metrics");
  if (!r) return -1;
  const std::string& text = r->body;
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

// Waits until the SSD tier has written everything queued (a condition, not
// a time: the deadline only ends a test that would otherwise hang).
inline void wait_for_ssd(httplib::Client& c, const httplib::Headers& headers = {}) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    Reply r = send(c, "GET", "/v1/bank", nullptr, headers);
    if (r.status != 200) {
      ADD_FAILURE() << "GET /v1/bank: " << r.status;
      return;
    }
    if (r.body.contains("ssd") && r.body["ssd"]["queued"] == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "the SSD write queue did not drain";
}

}  // namespace sb::testing
