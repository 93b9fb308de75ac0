// The bank's events (--kv-events), end to end: a real `statebank serve`
// publishes vLLM-format KV events over ZMQ to a replay consumer written
// here (libzmq SUB, msgpack-cxx), which rebuilds the replica's index of
// stored blocks and snapshots from the events alone. After a workload that
// evicts from RAM and SSD, and after a flush, the prefixes it derives (chain
// end, tokens, restorable tokens) equal GET /v1/bank/prefixes. The time from
// a store to its arrival is printed, not asserted.
#include <gtest/gtest.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <msgpack.hpp>
#include <mutex>
#include <set>
#include <thread>

#include "bank/key.h"
#include "tests/server/remote_replicas.h"

namespace sb::testing {
namespace {

using nlohmann::json;

// The replay consumer: what a router would keep.
class EventIndex {
 public:
  struct Block {
    Key parent;
    int64_t position = 0;
    uint32_t tokens = 0;
    std::set<std::string> media;
  };
  EventIndex() {
    context_ = zmq_ctx_new();
    socket_ = zmq_socket(context_, ZMQ_SUB);
    zmq_setsockopt(socket_, ZMQ_SUBSCRIBE, "", 0);
    const int timeout_ms = 50;
    zmq_setsockopt(socket_, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    if (zmq_bind(socket_, "tcp://127.0.0.1:*") != 0) throw std::runtime_error("zmq_bind failed");
    char endpoint[256];
    size_t len = sizeof endpoint;
    zmq_getsockopt(socket_, ZMQ_LAST_ENDPOINT, endpoint, &len);
    endpoint_ = endpoint;
    thread_ = std::thread([this] { run(); });
  }
  ~EventIndex() {
    stop_ = true;
    thread_.join();
    zmq_close(socket_);
    zmq_ctx_term(context_);
  }
  const std::string& endpoint() const { return endpoint_; }
  uint64_t batches() const {
    std::lock_guard<std::mutex> l(mu_);
    return batches_;
  }
  uint64_t gaps() const {
    std::lock_guard<std::mutex> l(mu_);
    return gaps_;
  }
  std::vector<double> latencies_ms() const {
    std::lock_guard<std::mutex> l(mu_);
    return latencies_ms_;
  }
  size_t size() const {
    std::lock_guard<std::mutex> l(mu_);
    return blocks_.size() + snapshots_.size();
  }
  // (chain end hex, tokens, restorable tokens) of every prefix, as
  // Bank::prefixes derives them from the tiers' own indexes.
  std::set<std::tuple<std::string, int64_t, int64_t>> prefixes() const {
    std::lock_guard<std::mutex> l(mu_);
    std::set<Key> continued;
    for (const auto& [k, b] : blocks_) continued.insert(b.parent);
    std::set<std::tuple<std::string, int64_t, int64_t>> out;
    for (const auto& [leaf, tail] : blocks_) {
      if (continued.count(leaf)) continue;
      int64_t restorable = 0;
      bool rooted = false;
      std::vector<Key> path;
      for (Key at = leaf;;) {
        auto it = blocks_.find(at);
        if (it == blocks_.end() || path.size() > blocks_.size()) break;
        path.push_back(at);
        if (it->second.position == 0) {
          rooted = true;
          break;
        }
        at = it->second.parent;
      }
      if (rooted)
        for (const Key& k : path)
          if (snapshots_.count(k)) restorable = std::max(restorable, blocks_.at(k).position + blocks_.at(k).tokens);
      out.insert({leaf.hex(), tail.position + tail.tokens, restorable});
    }
    return out;
  }

 private:
  static Key key_of(const msgpack::object& o) {
    Key k;
    if (o.type != msgpack::type::BIN || o.via.bin.size != k.bytes.size()) throw std::runtime_error("a hash is not 32 bytes");
    std::memcpy(k.bytes.data(), o.via.bin.ptr, k.bytes.size());
    return k;
  }
  static std::map<std::string, msgpack::object> fields(const msgpack::object& o) {
    if (o.type != msgpack::type::MAP) throw std::runtime_error("not a map");
    std::map<std::string, msgpack::object> out;
    for (uint32_t i = 0; i < o.via.map.size; ++i) out[o.via.map.ptr[i].key.as<std::string>()] = o.via.map.ptr[i].val;
    return out;
  }
  void apply(const msgpack::object& batch, double now) {
    auto b = fields(batch);
    latencies_ms_.push_back((now - b.at("ts").as<double>()) * 1000);
    const msgpack::object& events = b.at("events");
    for (uint32_t i = 0; i < events.via.array.size; ++i) {
      auto e = fields(events.via.array.ptr[i]);
      const std::string type = e.at("type").as<std::string>();
      if (type == "AllBlocksCleared") {
        blocks_.clear();
        snapshots_.clear();
        continue;
      }
      const std::string medium = e.at("medium").as<std::string>();
      const msgpack::object& hashes = e.at("block_hashes");
      for (uint32_t h = 0; h < hashes.via.array.size; ++h) {
        const Key k = key_of(hashes.via.array.ptr[h]);
        if (type == "BlockStored") {
          Block& blk = blocks_[k];
          blk.parent = key_of(e.at("parent_block_hash"));
          blk.position = e.at("statebank_position").as<int64_t>();
          blk.tokens = e.at("block_size").as<uint32_t>();
          const auto ids = e.at("token_ids").as<std::vector<int32_t>>();
          EXPECT_TRUE(ids.empty() || ids.size() == blk.tokens);
          blk.media.insert(medium);
        } else if (type == "BlockRemoved") {
          auto it = blocks_.find(k);
          if (it != blocks_.end() && it->second.media.erase(medium) && it->second.media.empty()) blocks_.erase(it);
        }
      }
    }
    for (const char* name : {"statebank_snapshots_stored", "statebank_snapshots_removed"}) {
      auto it = b.find(name);
      if (it == b.end()) continue;
      for (uint32_t i = 0; i < it->second.via.array.size; ++i) {
        const msgpack::object& s = it->second.via.array.ptr[i];
        const Key k = key_of(s.via.array.ptr[0]);
        const std::string medium = s.via.array.ptr[1].as<std::string>();
        if (std::string(name) == "statebank_snapshots_stored") {
          snapshots_[k].insert(medium);
        } else if (auto at = snapshots_.find(k); at != snapshots_.end() && at->second.erase(medium) && at->second.empty()) {
          snapshots_.erase(at);
        }
      }
    }
  }
  void run() {
    while (!stop_) {
      std::vector<std::string> frames;
      int more = 1;
      while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, socket_, 0) < 0) {
          zmq_msg_close(&m);
          break;
        }
        frames.emplace_back(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
        size_t len = sizeof more;
        zmq_getsockopt(socket_, ZMQ_RCVMORE, &more, &len);
        zmq_msg_close(&m);
      }
      if (frames.empty()) continue;
      const double now =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
      std::lock_guard<std::mutex> l(mu_);
      EXPECT_EQ(frames.size(), 3u);
      if (frames.size() != 3) continue;
      uint64_t seq = 0;
      for (unsigned char c : frames[1]) seq = seq << 8 | c;
      if (batches_ > 0 && seq != last_seq_ + 1) ++gaps_;
      last_seq_ = seq;
      ++batches_;
      msgpack::object_handle oh = msgpack::unpack(frames[2].data(), frames[2].size());
      apply(oh.get(), now);
    }
  }

  void* context_;
  void* socket_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::map<Key, Block> blocks_;
  std::map<Key, std::set<std::string>> snapshots_;
  uint64_t batches_ = 0, gaps_ = 0, last_seq_ = 0;
  std::vector<double> latencies_ms_;
  std::thread thread_;
};

std::set<std::tuple<std::string, int64_t, int64_t>> listed_prefixes(const ServeProcess& server) {
  auto c = server.client();
  auto r = c.Get("/v1/bank/prefixes?limit=10000");
  std::set<std::tuple<std::string, int64_t, int64_t>> out;
  if (!r) return out;
  const json body = json::parse(r->body);
  for (const auto& p : body["prefixes"])
    out.insert({p["chain"].get<std::string>(), p["tokens"].get<int64_t>(), p["restorable_tokens"].get<int64_t>()});
  return out;
}

json flush_all(const ServeProcess& server) {
  auto c = server.client();
  auto r = c.Post("/v1/bank/flush", R"({"all": true})", "application/json");
  return r ? json::parse(r->body) : json();
}

TEST(ServeEvents, AReplayConsumersIndexEqualsTheListedPrefixesThroughEvictionsAndAFlush) {
  const std::string root = make_temp_dir("sb_serve_events");
  const std::string model = root + "/model";
  ASSERT_EQ(gen_model(model, "qwen3_next", "tiny", 5), 0) << kGenModelFailed;
  EventIndex index;
  ServeProcess server({SB_STATEBANK_BIN, "serve", "--model", model, "--port", "0", "--bank-dir", root + "/bank",
                       "--block-tokens", "64", "--snapshot-every", "128", "--threads", "1", "--ram-bank", "512K",
                       "--ssd-bank", "2M", "--kv-events", index.endpoint()});
  auto c = server.client();

  // ZMQ drops what a PUB sends before the subscription reaches it: turns
  // until one batch arrived, then a flush, so the index starts from nothing.
  int warm_up = 0;  // a new prefix each time: only stores make events
  ASSERT_TRUE(eventually([&] {
    served_equals_bypass(c, "/v1/completions", completion(concat(prefix(100 + warm_up++), tail(0))));
    return index.batches() > 0;
  }));
  flush_all(server);
  ASSERT_TRUE(eventually([&] { return index.size() == 0 && listed_prefixes(server).empty(); }));

  // Enough prefixes to evict from RAM and from SSD.
  for (int p = 1; p <= 30; ++p) served_equals_bypass(c, "/v1/completions", completion(concat(prefix(p), tail(p))));
  for (int p = 1; p <= 3; ++p) served_equals_bypass(c, "/v1/completions", completion(concat(prefix(p), tail(20 + p))));
  // The SSD tier writes (and so evicts) in the background.
  EXPECT_TRUE(eventually([&] { return bank_of(server)["ssd"]["queued"] == 0; }));
  const json bank = bank_of(server);
  EXPECT_GT(bank["ram"]["evictions"].get<int64_t>(), 0) << bank.dump();
  EXPECT_GT(bank["ssd"]["evictions"].get<int64_t>(), 0) << bank.dump();
  const auto listed = listed_prefixes(server);
  EXPECT_FALSE(listed.empty());
  EXPECT_TRUE(eventually([&] { return index.prefixes() == listed_prefixes(server); }));
  EXPECT_EQ(index.prefixes(), listed_prefixes(server));
  EXPECT_EQ(index.gaps(), 0u);

  // A flush empties both.
  EXPECT_GT(flush_all(server)["objects"].get<int64_t>(), 0);
  EXPECT_TRUE(eventually([&] { return index.size() == 0; }));
  EXPECT_TRUE(listed_prefixes(server).empty());

  auto lat = index.latencies_ms();
  std::sort(lat.begin(), lat.end());
  ASSERT_FALSE(lat.empty());
  std::printf("event batches %zu; store-to-arrival latency ms: p50 %.2f, p99 %.2f, max %.2f\n", lat.size(),
              lat[lat.size() / 2], lat[std::min(lat.size() - 1, lat.size() * 99 / 100)], lat.back());
  EXPECT_EQ(server.stop(), 0);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace sb::testing
