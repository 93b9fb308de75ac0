// RedisTestCluster: a private Redis Cluster for one test, 3 masters and 3
// replicas of Debian's redis-server on free loopback ports, joined by
// `redis-cli --cluster create`; stopped and removed with the object.
//
// Its nodes time out after 500 ms (cluster-node-timeout), so a killed
// master's replica takes over within about two seconds; a replica's data is
// always good enough to take over (cluster-replica-validity-factor 0); and
// the slots of the other masters keep serving while one has no owner
// (cluster-require-full-coverage no: what docs/bank.md recommends).
//
// The test's view goes through hiredis's blocking API (tests/util/redis_server.h),
// never through the code under test.
#pragma once

#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tests/util/eventually.h"
#include "tests/util/redis_server.h"

namespace sb::testing {

class RedisTestCluster {
 public:
  // One line of CLUSTER NODES.
  struct NodeInfo {
    std::string id;
    int port = 0;
    bool master = false, failed = false;
    std::string master_id;  // a replica's master
    int slots = 0;          // how many slots it owns
  };

  RedisTestCluster() {
    for (int i = 0; i < 6; ++i)
      nodes_.push_back(std::make_unique<RedisServer>(std::vector<std::string>{
          "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "500",
          "--cluster-require-full-coverage", "no", "--cluster-replica-validity-factor", "0", "--cluster-port",
          std::to_string(RedisServer::free_port())}));
    std::string cmd = cli() + " --cluster create";
    for (const auto& n : nodes_) cmd += " 127.0.0.1:" + std::to_string(n->port());
    cmd += " --cluster-replicas 1 --cluster-yes > " + nodes_[0]->dir() + "/create.log 2>&1";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("redis-cli --cluster create failed: " + cmd);
    // Replicas attach by gossip after the slots are assigned: a test that
    // kills a master needs its replica known.
    if (!eventually([&] { return settled() && replicated(); }))
      throw std::runtime_error("the redis cluster did not settle");
  }

  RedisServer& node(size_t i) { return *nodes_[i]; }
  size_t size() const { return nodes_.size(); }
  // redis-cluster:// naming two of the nodes (the rest is learnt from them).
  std::string url() const {
    return "redis-cluster://127.0.0.1:" + std::to_string(nodes_[0]->port()) + ",127.0.0.1:" +
           std::to_string(nodes_[1]->port());
  }

  // The cluster as a live node sees it.
  std::vector<NodeInfo> nodes_info() const {
    std::vector<NodeInfo> out;
    for (const auto& n : nodes_) {
      if (!n->running()) continue;
      const RedisValue v = n->command({"CLUSTER", "NODES"});
      if (!v.ok()) continue;
      std::istringstream lines(v.str);
      std::string line;
      while (std::getline(lines, line)) {
        std::istringstream f(line);
        NodeInfo info;
        std::string addr, flags, ping, pong, epoch, link, range;
        f >> info.id >> addr >> flags >> info.master_id >> ping >> pong >> epoch >> link;
        info.port = std::atoi(addr.substr(addr.find(':') + 1).c_str());
        info.master = flags.find("master") != std::string::npos;
        info.failed = flags.find("fail") != std::string::npos;
        while (f >> range) {
          if (range.front() == '[') continue;  // a slot being migrated
          const size_t dash = range.find('-');
          info.slots += dash == std::string::npos ? 1 : std::atoi(range.c_str() + dash + 1) - std::atoi(range.c_str()) + 1;
        }
        out.push_back(info);
      }
      return out;
    }
    return out;
  }
  // Index of the node on `port`, or -1.
  int index_of(int port) const {
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i]->port() == port) return static_cast<int>(i);
    return -1;
  }
  // Indices of the live masters that own slots.
  std::vector<int> masters() const {
    std::vector<int> out;
    for (const auto& n : nodes_info())
      if (n.master && !n.failed && n.slots > 0 && nodes_[static_cast<size_t>(index_of(n.port))]->running())
        out.push_back(index_of(n.port));
    return out;
  }
  std::string id_of(size_t i) const { return nodes_[i]->command({"CLUSTER", "MYID"}).str; }
  // Keys a node holds (DBSIZE).
  long long keys_on(size_t i) const { return nodes_[i]->command({"DBSIZE"}).integer; }
  // Every slot owned by a live master, and every live node agrees on it.
  bool settled() const {
    int slots = 0;
    for (const auto& n : nodes_info())
      if (n.master && !n.failed && n.slots > 0 && nodes_[static_cast<size_t>(index_of(n.port))]->running())
        slots += n.slots;
    if (slots != 16384) return false;
    for (const auto& n : nodes_)
      if (n->running() && n->command({"CLUSTER", "INFO"}).str.find("cluster_state:ok") == std::string::npos)
        return false;
    return true;
  }
  // Every master has a replica, as a live node sees it.
  bool replicated() const {
    for (int m : masters())
      if (replica_of(static_cast<size_t>(m)) < 0) return false;
    return true;
  }
  // The live master holding the most keys.
  size_t busiest_master() const {
    const auto m = masters();
    size_t best = static_cast<size_t>(m.at(0));
    for (int i : m)
      if (keys_on(static_cast<size_t>(i)) > keys_on(best)) best = static_cast<size_t>(i);
    return best;
  }
  // The node replicating master `i`, or -1.
  int replica_of(size_t i) const {
    const std::string id = id_of(i);
    for (const auto& n : nodes_info())
      if (n.master_id == id) return index_of(n.port);
    return -1;
  }
  // How many slots node `i` owns.
  int slots_of(size_t i) const {
    for (const auto& n : nodes_info())
      if (index_of(n.port) == static_cast<int>(i)) return n.slots;
    return 0;
  }
  // Another live master than `i`.
  size_t other_master(size_t i) const {
    for (int m : masters())
      if (static_cast<size_t>(m) != i) return static_cast<size_t>(m);
    return i;
  }
  // Moves `slots` slots from node `from` to node `to` with redis-cli
  // --cluster reshard (MIGRATE of their keys, ASK then MOVED for clients);
  // redis-cli's exit code.
  int reshard(size_t from, size_t to, int slots) const {
    const std::string cmd = cli() + " --cluster reshard 127.0.0.1:" + std::to_string(nodes_[from]->port()) +
                            " --cluster-from " + id_of(from) + " --cluster-to " + id_of(to) + " --cluster-slots " +
                            std::to_string(slots) + " --cluster-yes > " + nodes_[0]->dir() + "/reshard.log 2>&1";
    return std::system(cmd.c_str());
  }

 private:
  static std::string cli() {
    if (const char* b = std::getenv("SB_REDIS_CLI"); b && *b) return b;
    return "redis-cli";
  }
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace sb::testing
