// The remote tier on a real Redis Cluster (3 masters, 3 replicas of Debian's
// redis-server, tests/util/redis_cluster.h): keys go to their slot's owner
// (the slot function agrees with the server's CLUSTER KEYSLOT); a restore
// equals a cold prefill bit for bit; a killed master costs misses for its
// slots, never a wrong byte, and the tier serves them again once a replica
// is promoted; moving slots (redis-cli --cluster reshard) while lookups run
// changes no restore.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>

#include "bank/format.h"
#include "bank/ram_tier.h"
#include "bank/remote/redis_tier.h"
#include "tests/bank/bank_lookup_util.h"
#include "tests/bank/remote_test_util.h"
#include "tests/util/redis_cluster.h"

namespace sb {
namespace {

using namespace sb::testing;
using std::chrono::milliseconds;

constexpr char kSecret[] = "redis-cluster-test-secret-0123456789";

void publish_remote(RedisTier& remote, const StateSchema& schema, const std::vector<int32_t>& tokens) {
  Bank writer({&remote});
  publish_chain(writer, schema, tokens, {3, 6, 9});
  ASSERT_TRUE(remote.flush().is_ok());
}

// A lookup through a fresh RAM tier, so every object comes from the cluster.
Lookup restore_from(RedisTier& remote, const StateSchema& schema, const std::vector<int32_t>& tokens) {
  RamTier ram(1 << 24);
  Bank bank({&ram, &remote});
  return lookup_and_verify(bank, schema, tokens);
}

TEST(RedisClusterSlot, MatchesTheClusterSpecification) {
  EXPECT_EQ(redis_cluster_slot("123456789"), 0x31C3);  // CRC16/XMODEM's check value
  EXPECT_EQ(redis_cluster_slot("foo"), 12182);
  EXPECT_EQ(redis_cluster_slot("{user1000}.following"), redis_cluster_slot("user1000"));
  EXPECT_EQ(redis_cluster_slot("{user1000}.followers"), redis_cluster_slot("user1000"));
  EXPECT_EQ(redis_cluster_slot("foo{}{bar}"), redis_cluster_slot("foo{}{bar}"));
  EXPECT_NE(redis_cluster_slot("foo{}{bar}"), redis_cluster_slot("bar"));  // an empty tag: the whole key
  EXPECT_EQ(redis_cluster_slot("foo{{bar}}zap"), redis_cluster_slot("{bar"));
}

TEST(RedisClusterUrl, ParsesSeedsAndRefusesWhatAClusterHasNot) {
  RedisAddress a;
  ASSERT_TRUE(parse_redis_url("redis-cluster://10.0.0.1:7000,[::1]:7001,cache-2:7002", &a).is_ok());
  EXPECT_TRUE(a.cluster);
  ASSERT_EQ(a.seeds.size(), 3u);
  EXPECT_EQ(a.seeds[1].host, "::1");
  EXPECT_EQ(a.seeds[2].port, 7002);
  EXPECT_EQ(a.url(), "redis-cluster://10.0.0.1:7000,[::1]:7001,cache-2:7002");
  auto why = [](const std::string& url) {
    RedisAddress x;
    Status s = parse_redis_url(url, &x);
    EXPECT_FALSE(s.is_ok()) << url;
    return s.message();
  };
  EXPECT_NE(why("redis-cluster://10.0.0.1").find("port"), std::string::npos);
  EXPECT_NE(why("redis-cluster://10.0.0.1:7000/1").find("database 0"), std::string::npos);
  EXPECT_NE(why("redis-cluster://10.0.0.1:7000,").find("host"), std::string::npos);
  EXPECT_NE(why("redis-cluster://u:p@10.0.0.1:7000").find("--remote-password-file"), std::string::npos);
  EXPECT_EQ(why("redis-cluster://u:secretpw@10.0.0.1:7000").find("secretpw"), std::string::npos);
}

// A fresh 3+3 cluster per test and the tier on it.
class RedisClusterTier : public ::testing::Test {
 protected:
  RedisTestCluster cluster;
  const StateSchema schema = synthetic_schema();
  std::unique_ptr<RedisTier> remote = open_test_remote(cluster.url(), kSecret, schema, milliseconds(2000));
};

TEST_F(RedisClusterTier, KeysGoToTheirSlotsOwnersAndRestoreBitIdentical) {
  const auto tokens = random_tokens(11, 10 * kB);
  publish_remote(*remote, schema, tokens);

  // 10 blocks and 3 snapshots, spread over the masters, each where the server's own hash puts it.
  long long total = 0;
  int masters_with_keys = 0;
  for (int m : cluster.masters()) {
    const auto names = cluster.node(static_cast<size_t>(m)).keys("statebank:*");
    total += static_cast<long long>(names.size());
    masters_with_keys += names.empty() ? 0 : 1;
    for (const auto& n : names)
      EXPECT_EQ(cluster.node(static_cast<size_t>(m)).command({"CLUSTER", "KEYSLOT", n}).integer,
                redis_cluster_slot(n));
  }
  EXPECT_EQ(total, 13);
  EXPECT_GE(masters_with_keys, 2);

  const auto r = restore_from(*remote, schema, tokens);
  EXPECT_EQ(r.plan.restore_point, 9 * kB);
  EXPECT_STREQ(r.plan.mode().name(), "remote");
  EXPECT_EQ(r.plan.check_failures, 0);
  const RedisStats s = remote->redis_stats();
  EXPECT_TRUE(s.cluster);
  EXPECT_TRUE(s.available);
  EXPECT_EQ(s.nodes.masters, 3u);
  EXPECT_EQ(s.nodes.slots_covered, 16384u);
  EXPECT_EQ(s.nodes.moved, 0u);
}

// Negative control: the cold comparison sees a value that was swapped for
// another key's (bypassing the MAC by resealing it with the secret).
TEST_F(RedisClusterTier, TheColdComparisonSeesAResealedForeignValue) {
  const auto tokens = random_tokens(12, 4 * kB);
  publish_remote(*remote, schema, tokens);
  // Block 2's name, holding block 2 with other numbers, sealed correctly: every check passes.
  const Key key = chain_keys(root_key(kBankFormatVersion, "fp", "", kB), tokens, kB, 2)[2];
  ObjectRef block;
  ASSERT_TRUE(remote->get(ObjectKind::kBlock, key, &block).is_ok());
  const auto image = forged_image(*block, schema);
  const std::string name = remote->redis_key(ObjectKind::kBlock, key);
  bool written = false;
  for (int m : cluster.masters())
    if (cluster.node(static_cast<size_t>(m)).command({"EXISTS", name}).integer == 1)
      written = cluster.node(static_cast<size_t>(m)).command({"SET", name, RedisTier::seal(kSecret, name, image)}).str ==
                "OK";
  ASSERT_TRUE(written);
  EXPECT_NONFATAL_FAILURE(restore_from(*remote, schema, tokens), "restored state differs from cold");
}

TEST_F(RedisClusterTier, AKilledMasterCostsMissesUntilItsReplicaIsPromoted) {
  // Breakers probed and the map re-read on schedule only every minute: what
  // ends the misses sooner is the lookups themselves asking for the map.
  const auto tier = open_test_remote(cluster.url(), kSecret, schema, milliseconds(2000), {}, std::chrono::minutes(1));
  const auto tokens = random_tokens(13, 10 * kB);
  publish_remote(*tier, schema, tokens);

  // The master holding most of the chain, once its replica holds as much.
  const size_t victim = cluster.busiest_master();
  const int replica = cluster.replica_of(victim);
  ASSERT_GE(replica, 0);
  ASSERT_TRUE(eventually([&] { return cluster.keys_on(static_cast<size_t>(replica)) == cluster.keys_on(victim); }));
  ASSERT_GT(cluster.keys_on(victim), 0);

  cluster.node(victim).kill();
  // Until the replica takes over: misses for the victim's slots, a cold-equal restore of what the rest hold.
  auto r = restore_from(*tier, schema, tokens);
  EXPECT_LT(r.plan.restore_point, 9 * kB);
  EXPECT_EQ(r.plan.check_failures, 0);
  EXPECT_GE(tier->redis_stats().trips, 1u);

  ASSERT_TRUE(eventually([&] { return cluster.settled(); }));
  ASSERT_TRUE(eventually([&] {
    (void)restore_from(*tier, schema, tokens);
    return tier->redis_stats().available;
  }));
  r = restore_from(*tier, schema, tokens);
  EXPECT_EQ(r.plan.restore_point, 9 * kB);  // the promoted replica had every object
  EXPECT_STREQ(r.plan.mode().name(), "remote");
  EXPECT_EQ(r.plan.check_failures, 0);

  // Writes reach the new owner too.
  const auto more = random_tokens(14, 10 * kB);
  publish_remote(*tier, schema, more);
  EXPECT_EQ(restore_from(*tier, schema, more).plan.restore_point, 9 * kB);
  const RedisStats s = tier->redis_stats();
  EXPECT_EQ(s.nodes.masters, 3u);
  EXPECT_EQ(s.nodes.masters_down, 0u);
  EXPECT_EQ(s.mac_failures, 0u);
}

TEST_F(RedisClusterTier, MovingSlotsDuringLookupsChangesNoRestore) {
  std::vector<std::vector<int32_t>> chains;
  for (int i = 0; i < 6; ++i) {
    chains.push_back(random_tokens(20 + static_cast<uint64_t>(i), 10 * kB));
    publish_remote(*remote, schema, chains.back());
  }
  // Every slot of the master holding most keys moves to another master while lookups run.
  ASSERT_EQ(cluster.masters().size(), 3u);
  const size_t from = cluster.busiest_master(), to = cluster.other_master(from);
  const int slots = cluster.slots_of(from);
  auto reshard = std::async(std::launch::async, [&] { return cluster.reshard(from, to, slots); });
  int lookups = 0;
  const auto write_more = random_tokens(40, 10 * kB);
  while (reshard.wait_for(milliseconds(0)) != std::future_status::ready || lookups < 6) {
    const auto& tokens = chains[static_cast<size_t>(lookups) % chains.size()];
    const auto r = restore_from(*remote, schema, tokens);
    EXPECT_EQ(r.plan.restore_point, 9 * kB) << "lookup " << lookups;
    EXPECT_EQ(r.plan.check_failures, 0);
    ++lookups;
  }
  ASSERT_EQ(reshard.get(), 0);
  EXPECT_EQ(cluster.keys_on(from), 0);
  // After the move: every chain restores whole from its new owner, and a stale route was corrected.
  publish_remote(*remote, schema, write_more);
  chains.push_back(write_more);
  for (const auto& tokens : chains) EXPECT_EQ(restore_from(*remote, schema, tokens).plan.restore_point, 9 * kB);
  const RedisStats s = remote->redis_stats();
  std::printf("lookups during the move: %d; MOVED followed: %llu, ASK followed: %llu, map refreshes: %llu\n", lookups,
              static_cast<unsigned long long>(s.nodes.moved), static_cast<unsigned long long>(s.nodes.ask),
              static_cast<unsigned long long>(s.nodes.refreshes));
  EXPECT_GT(s.nodes.moved + s.nodes.refreshes, 1u);
  EXPECT_EQ(s.mac_failures, 0u);
}

}  // namespace
}  // namespace sb
