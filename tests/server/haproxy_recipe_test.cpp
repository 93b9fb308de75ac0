// The routing recipe under test: deploy/local-cluster.sh starts a Redis
// Cluster, 3 `statebank serve` replicas on it and HAProxy with
// deploy/haproxy.cfg. Conversations with an affinity key (OpenAI's `user`,
// the X-Session-Id header) stick to one replica (their next turn restores
// from its RAM); requests without one spread over the replicas; a killed
// replica's conversations continue on another, restored from the cluster
// (mode "remote"), and every reply equals the same request under bypass.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tests/server/remote_replicas.h"

namespace sb::testing {
namespace {

using nlohmann::json;

std::map<std::string, int> read_table(const std::string& path) {
  std::map<std::string, int> out;
  std::ifstream in(path);
  std::string name;
  int value;
  while (in >> name >> value) out[name] = value;
  return out;
}

class LocalCluster {
 public:
  // Starts the recipe on a port range of its own (nodes, bus, replicas, proxy:
  // 26 ports). The ranges lie below the kernel's ephemeral ports (32768 and
  // up), which the other tests' servers and every outgoing connection draw
  // from; a range still found busy is given up for the next one.
  explicit LocalCluster(const std::string& model) : dir_(make_temp_dir("sb_haproxy_recipe")) {
    for (int attempt = 0; attempt < 3 && !started_; ++attempt) {
      if (attempt > 0) stop();
      cluster_ = dir_ + "/attempt" + std::to_string(attempt);
      const int base = 10000 + static_cast<int>((getpid() + attempt * 233) % 700) * 30;
      const std::string cmd = "STATEBANK=" + std::string(SB_STATEBANK_BIN) + " " + SB_SOURCE_DIR +
                              "/deploy/local-cluster.sh start " + cluster_ + " --replicas 3 --model " + model +
                              " --base-port " + std::to_string(base) +
                              " -- --block-tokens 64 --snapshot-every 128 --threads 1 --ram-bank 256M"
                              " --remote-timeout-ms 5000 >> " + dir_ + "/start.log 2>&1";
      started_ = std::system(cmd.c_str()) == 0;
    }
    ports_ = read_table(cluster_ + "/ports");
    pids_ = read_table(cluster_ + "/pids");
  }
  ~LocalCluster() {
    stop();
    std::filesystem::remove_all(dir_);
  }
  bool started() const { return started_; }
  std::string start_log() const {
    std::ifstream in(dir_ + "/start.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  httplib::Client client(const std::string& name) const {
    httplib::Client c("127.0.0.1", ports_.at(name));
    c.set_read_timeout(120);
    return c;
  }
  json bank(const std::string& replica) const {
    auto c = client(replica);
    auto r = c.Get("/v1/bank");
    return r ? json::parse(r->body) : json::object();
  }
  int64_t requests(const std::string& replica) const {
    const json b = bank(replica);
    return b.contains("engine") ? b["engine"]["requests"].get<int64_t>() : -1;
  }
  void kill(const std::string& name) const { ::kill(pids_.at(name), SIGKILL); }

 private:
  void stop() const {
    const std::string cmd = std::string(SB_SOURCE_DIR) + "/deploy/local-cluster.sh stop " + cluster_;
    (void)std::system(cmd.c_str());
  }

  std::string dir_;      // start.log and one folder per attempt
  std::string cluster_;  // the last attempt's folder
  bool started_ = false;
  std::map<std::string, int> ports_, pids_;
};

// One turn of conversation `conv` through the proxy, keyed by `user` (even
// conversations) or by X-Session-Id (odd ones); equal to bypass.
json turn(httplib::Client& proxy, int conv, int t) {
  json body = completion(concat(prefix(conv), tail(t)));
  const std::string key = "conversation-" + std::to_string(conv);
  if (conv % 2 == 0) {
    body["user"] = key;
    return served_equals_bypass(proxy, "/v1/completions", body);
  }
  proxy.set_default_headers({{"X-Session-Id", key}});
  json out = served_equals_bypass(proxy, "/v1/completions", body);
  proxy.set_default_headers({});
  return out;
}

TEST(HaproxyRecipe, ConversationsStickToAReplicaAndSurviveItsLoss) {
  const std::string model_dir = make_temp_dir("sb_haproxy_model");
  ASSERT_EQ(gen_model(model_dir + "/m", "qwen3_next", "tiny", 3), 0) << kGenModelFailed;
  LocalCluster cluster(model_dir + "/m");
  ASSERT_TRUE(cluster.started()) << cluster.start_log();
  auto proxy = cluster.client("haproxy");
  const std::vector<std::string> replicas = {"replica1", "replica2", "replica3"};

  // Requests without a key spread over the replicas.
  for (int i = 0; i < 9; ++i) served_equals_bypass(proxy, "/v1/completions", completion(concat(prefix(50 + i), tail(1))));
  int used = 0;
  for (const auto& r : replicas) used += cluster.requests(r) > 0 ? 1 : 0;
  EXPECT_GE(used, 2);

  // Keyed conversations: the second turn restores from the same replica's RAM.
  constexpr int kConversations = 8;
  std::map<std::string, int64_t> before;
  for (const auto& r : replicas) before[r] = cluster.requests(r);
  for (int c = 0; c < kConversations; ++c) EXPECT_EQ(turn(proxy, c, 1)["restore"]["mode"], "cold");
  for (int c = 0; c < kConversations; ++c) {
    json second = turn(proxy, c, 2);
    EXPECT_EQ(second["restore"]["mode"], "ram") << "conversation " << c;
    EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"], 384);
  }
  // Kill the replica that served the most of them, once its writes reached the cluster.
  std::string victim = replicas[0];
  for (const auto& r : replicas)
    if (cluster.requests(r) - before[r] > cluster.requests(victim) - before[victim]) victim = r;
  ASSERT_GT(cluster.requests(victim) - before[victim], 0);
  for (const auto& r : replicas)
    ASSERT_TRUE(eventually([&] { return cluster.bank(r)["remote"]["queued"] == 0; }));
  cluster.kill(victim);

  // Every conversation continues: the victim's from the cluster, the others from RAM.
  int remote = 0;
  for (int c = 0; c < kConversations; ++c) {
    json third = turn(proxy, c, 3);
    const std::string mode = third["restore"]["mode"];
    EXPECT_TRUE(mode == "ram" || mode == "remote") << "conversation " << c << ": " << mode;
    EXPECT_EQ(third["usage"]["prompt_tokens_details"]["cached_tokens"], 384) << "conversation " << c;
    remote += mode == "remote" ? 1 : 0;
  }
  EXPECT_GT(remote, 0);
  std::filesystem::remove_all(model_dir);
}

}  // namespace
}  // namespace sb::testing
