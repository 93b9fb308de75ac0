// Two `statebank serve` replicas sharing prefixes through a real Redis
// Cluster (3 masters, 3 replicas of Debian's redis-server, started here:
// tests/util/redis_cluster.h). Every reply is compared with the same request
// under X-Cache-Mode: bypass, bit for bit, while the cluster is healthy,
// while a master is killed under traffic and its replica takes over, and
// while redis-cli --cluster reshard moves a master's slots under traffic.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>

#include "tests/server/remote_replicas.h"
#include "tests/util/redis_cluster.h"

namespace sb::testing {
namespace {

using nlohmann::json;

class ServeCluster : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = make_temp_dir("sb_serve_cluster");
    model_ = root_ + "/model";
    ASSERT_EQ(gen_model(model_, "qwen3_next", "tiny", 3), 0) << kGenModelFailed;
    secret_ = root_ + "/remote.secret";
    std::ofstream(secret_) << "cluster-replicas-secret-0123456789\n";
    ASSERT_EQ(chmod(secret_.c_str(), 0600), 0);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(root_); }

  std::unique_ptr<ServeProcess> replica(const std::string& name, const RedisTestCluster& cluster) {
    return std::make_unique<ServeProcess>(std::vector<std::string>{
        SB_STATEBANK_BIN, "serve", "--model", model_, "--port", "0", "--bank-dir", root_ + "/" + name,
        "--block-tokens", "64", "--snapshot-every", "128", "--threads", "1", "--ram-bank", "256M", "--remote",
        cluster.url(), "--remote-timeout-ms", "5000", "--remote-secret-file", secret_});
  }

  static std::string root_, model_, secret_;
};
std::string ServeCluster::root_, ServeCluster::model_, ServeCluster::secret_;

// Serves prefix(p) + tail(t) on `c`, equal to bypass; the reply.
json turn(httplib::Client& c, int p, int t) {
  return served_equals_bypass(c, "/v1/completions", completion(concat(prefix(p), tail(t))));
}

// Keeps `server` busy with turns over prefixes [from, to) until `stop`, each
// compared with bypass; how many ran.
int traffic(const ServeProcess& server, int from, int to, const std::atomic<bool>& stop) {
  auto c = server.client();
  int n = 0;
  for (; !stop.load() || n < to - from; ++n) turn(c, from + n % (to - from), 100 + n);
  return n;
}

TEST_F(ServeCluster, ReplicasShareThroughAKilledMasterAndASlotMove) {
  RedisTestCluster cluster;
  auto b_started = std::async(std::launch::async, [&] { return replica("b", cluster); });
  auto a = replica("a", cluster);
  auto b = b_started.get();
  auto ca = a->client(), cb = b->client();

  // Healthy: B restores what A prefilled, the objects spread over the masters.
  EXPECT_EQ(turn(ca, 1, 1)["restore"]["mode"], "cold");
  wait_written(*a);
  json on_b = turn(cb, 1, 2);
  EXPECT_EQ(on_b["restore"]["mode"], "remote");
  EXPECT_EQ(on_b["usage"]["prompt_tokens_details"]["cached_tokens"], 384);
  json r = remote_of(*b);
  EXPECT_EQ(r["cluster_masters"], 3);
  EXPECT_EQ(r["available"], 1);

  // Prefixes 2..9 prefilled on A; B has seen none of them.
  for (int p = 2; p <= 9; ++p) turn(ca, p, 1);
  wait_written(*a);
  ASSERT_EQ(cluster.masters().size(), 3u);
  const size_t victim = cluster.busiest_master();
  const int replica_of_victim = cluster.replica_of(victim);
  ASSERT_GE(replica_of_victim, 0);
  ASSERT_TRUE(eventually([&] { return cluster.keys_on(static_cast<size_t>(replica_of_victim)) == cluster.keys_on(victim); }));

  // A master killed while both replicas serve: misses, never a different reply.
  {
    std::atomic<bool> stop{false};
    auto on_a = std::async(std::launch::async, [&] { return traffic(*a, 20, 24, stop); });
    auto on_b_traffic = std::async(std::launch::async, [&] { return traffic(*b, 2, 5, stop); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cluster.node(victim).kill();
    const bool promoted = eventually([&] { return cluster.settled(); });
    stop = true;
    on_a.get();
    on_b_traffic.get();
    ASSERT_TRUE(promoted);
  }
  // The tier recovers once the replica is promoted: B restores whole what A
  // wrote before the kill (the replica held it) and after it. Each replica
  // sees the promotion at its own map refresh (up to a retry interval apart),
  // and until A's, A's writes to the dead master's slots are skipped: both
  // must see it before A writes what B is to restore.
  ASSERT_TRUE(eventually([&] { return remote_of(*b)["available"] == 1 && remote_of(*a)["available"] == 1; }));
  json recovered = turn(cb, 6, 2);
  EXPECT_EQ(recovered["restore"]["mode"], "remote");
  EXPECT_EQ(recovered["usage"]["prompt_tokens_details"]["cached_tokens"], 384) << recovered["restore"].dump() << remote_of(*b).dump();
  turn(ca, 10, 1);
  wait_written(*a);
  json after = turn(cb, 10, 2);
  EXPECT_EQ(after["restore"]["mode"], "remote");
  EXPECT_EQ(after["usage"]["prompt_tokens_details"]["cached_tokens"], 384);
  r = remote_of(*b);
  EXPECT_GE(r["trips"].get<int>(), 1);
  EXPECT_EQ(r["cluster_masters_down"], 0);
  EXPECT_EQ(r["mac_failures"], 0);

  // Every slot of a master moved to another while both replicas serve.
  ASSERT_EQ(cluster.masters().size(), 3u);
  const size_t from = cluster.busiest_master(), to = cluster.other_master(from);
  const int slots = cluster.slots_of(from);
  {
    std::atomic<bool> stop{false};
    auto on_a = std::async(std::launch::async, [&] { return traffic(*a, 30, 34, stop); });
    auto on_b_traffic = std::async(std::launch::async, [&] { return traffic(*b, 30, 34, stop); });
    const int moved = cluster.reshard(from, to, slots);
    stop = true;
    EXPECT_EQ(moved, 0);
    std::printf("turns during the slot move: A %d, B %d\n", on_a.get(), on_b_traffic.get());
  }
  EXPECT_EQ(cluster.keys_on(from), 0);
  // What A wrote before the move, B restores whole from the slots' new owner.
  for (int p : {7, 8, 9}) {
    json moved = turn(cb, p, 3);
    EXPECT_EQ(moved["restore"]["mode"], "remote") << "prefix " << p;
    EXPECT_EQ(moved["usage"]["prompt_tokens_details"]["cached_tokens"], 384) << "prefix " << p;
  }
  r = remote_of(*b);
  std::printf("B: MOVED %d, ASK %d, map refreshes %d\n", r["cluster_moved"].get<int>(), r["cluster_ask"].get<int>(),
              r["cluster_refreshes"].get<int>());
  EXPECT_EQ(r["mac_failures"], 0);
  EXPECT_EQ(r["check_failures"], 0);
  EXPECT_EQ(a->stop(), 0);
  EXPECT_EQ(b->stop(), 0);
}

}  // namespace
}  // namespace sb::testing
