// Shared by the tests of replicas on a remote tier (serve_remote_test on one
// redis-server, serve_cluster_test on a Redis Cluster): the requests they
// send and how they read a replica's remote-tier counters.
#pragma once

#include <string>
#include <vector>

#include "tests/server/bypass_compare.h"
#include "tests/server/serve_process.h"
#include "tests/util/eventually.h"

namespace sb::testing {

inline nlohmann::json completion(const std::vector<int32_t>& prompt) {
  return nlohmann::json{{"prompt", prompt}, {"max_tokens", 6}, {"logprobs", 5}, {"temperature", 0}};
}

// A 400-token shared prefix: with --block-tokens 64 and --snapshot-every 128,
// blocks 1..6 and snapshots at 128, 256 and 384, so a replica restores 384 tokens.
inline std::vector<int32_t> prefix(int seed) { return ids(400, 1000 + 97 * seed, 7 + seed); }
inline std::vector<int32_t> tail(int seed) { return ids(30, 50 + 13 * seed, 3 + seed); }

inline nlohmann::json bank_of(const ServeProcess& server) {
  auto c = server.client();
  auto r = c.Get("/v1/bank");
  if (!r) return nlohmann::json::object();
  return nlohmann::json::parse(r->body);
}

inline nlohmann::json remote_of(const ServeProcess& server) { return bank_of(server)["remote"]; }

// The replica's background writer has sent everything queued so far.
inline void wait_written(const ServeProcess& server) {
  ASSERT_TRUE(eventually([&] { return remote_of(server)["queued"] == 0; }));
}

}  // namespace sb::testing
