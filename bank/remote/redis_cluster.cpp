#include "bank/remote/redis_cluster.h"

#include <hiredis.h>

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace sb {
namespace {

// CRC16/XMODEM (polynomial 0x1021, initial value 0), the cluster's key hash.
uint16_t crc16(std::string_view bytes) {
  uint16_t crc = 0;
  for (unsigned char c : bytes) {
    crc ^= static_cast<uint16_t>(c) << 8;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021) : crc << 1;
  }
  return crc;
}

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

// "MOVED 3999 127.0.0.1:6381" / "ASK ...": the slot and the node named.
bool parse_redirect(std::string_view text, int* slot, std::string* host, int* port) {
  const size_t a = text.find(' '), b = a == std::string_view::npos ? a : text.find(' ', a + 1);
  if (b == std::string_view::npos) return false;
  const std::string_view slot_text = text.substr(a + 1, b - a - 1), where = text.substr(b + 1);
  const size_t colon = where.rfind(':');
  if (colon == std::string_view::npos) return false;
  auto number = [](std::string_view t, int* v) {
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), *v);
    return ec == std::errc() && end == t.data() + t.size();
  };
  if (!number(slot_text, slot) || *slot < 0 || *slot >= kRedisClusterSlots) return false;
  if (!number(where.substr(colon + 1), port) || *port < 1 || *port > 65535) return false;
  std::string_view h = where.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  *host = std::string(h);
  return true;
}

}  // namespace

int redis_cluster_slot(std::string_view key) {
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return crc16(key) % kRedisClusterSlots;
}

struct RedisCluster::Node {
  Node(RedisCluster* cluster, RedisPool::Server server)
      : host(server.host),
        port(server.port),
        pool(std::move(server), true, [cluster, this](const Status& why) { cluster->tripped(this, why); }) {}
  std::string host;  // numeric
  int port = 0;
  RedisPool pool;
  RedisClock::time_point next_probe{};  // guarded by the cluster's mu_
};

struct RedisCluster::Group {
  Node* node = nullptr;
  std::vector<size_t> items;  // command indices
  std::vector<bool> asking;   // per item: send ASKING first
  // Filled by run_group: commands to send again, with the node an ASK named (null: by slot).
  std::vector<std::pair<size_t, Node*>> retry;
  bool failed = false;  // the exchange with the node failed
};

RedisCluster::RedisCluster(RedisClusterOptions options) : options_(std::move(options)) {}

Status RedisCluster::open(RedisClusterOptions options, std::unique_ptr<RedisCluster>* out) {
  if (options.seeds.empty()) return Status::invalid("a redis cluster needs at least one node");
  if (options.max_idle_connections < 1) options.max_idle_connections = 1;
  std::unique_ptr<RedisCluster> c(new RedisCluster(std::move(options)));
  std::vector<Node*> seeds;
  for (const auto& s : c->options_.seeds) {
    std::string numeric;
    SB_RETURN_IF_ERROR(resolve_redis_host(s.host, &numeric));
    std::lock_guard<std::mutex> l(c->mu_);
    seeds.push_back(c->node_at(numeric, s.port));
  }
  Status last = Status::io_error("no node answered");
  for (Node* n : seeds) {
    last = c->read_slots(n);
    if (last.is_ok()) break;
    if (last.code() == Code::kInvalidArgument) return last;  // a refusal will not heal by retrying
  }
  if (!last.is_ok())
    c->log("no cluster node answered (" + last.message() + "); serving without it, retrying every " +
           redis_millis(c->options_.retry_interval));
  c->maintainer_ = std::thread([p = c.get()] { p->maintain_loop(); });
  *out = std::move(c);
  return Status::ok();
}

RedisCluster::~RedisCluster() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (maintainer_.joinable()) maintainer_.join();
}

void RedisCluster::log(const std::string& message) const {
  redis_log(options_.log, "remote cluster", message);
}

RedisCluster::Node* RedisCluster::node_at(const std::string& host, int port) {
  for (auto& n : nodes_)
    if (n->host == host && n->port == port) return n.get();
  nodes_.push_back(
      std::make_unique<Node>(this, RedisPool::Server{host, port, 0, options_.password, options_.max_idle_connections}));
  return nodes_.back().get();
}

void RedisCluster::tripped(Node* node, const Status& why) {
  {
    std::lock_guard<std::mutex> l(mu_);
    node->next_probe = RedisClock::now() + options_.retry_interval;
    stale_ = true;
  }
  cv_.notify_all();
  log("node " + node->pool.name() + " unavailable: " + why.message() +
      "; its slots miss at once until it answers again or the map names another owner (retrying every " +
      redis_millis(options_.retry_interval) + ")");
}

void RedisCluster::run_group(Group& g, std::span<const RedisCommand> commands, RedisDeadline deadline,
                             std::vector<RedisReplyPtr>* replies) {
  static const RedisCommand kAsking = {"ASKING"};
  std::vector<RedisCommand> batch;
  std::vector<size_t> reply_at;
  for (size_t k = 0; k < g.items.size(); ++k) {
    if (g.asking[k]) batch.push_back(kAsking);
    reply_at.push_back(batch.size());
    batch.push_back(commands[g.items[k]]);
  }
  std::vector<RedisReplyPtr> got;
  if (!g.node->pool.call(batch, deadline, &got).is_ok()) {
    // The node is gone (now tripped): its slots may have a new owner already.
    g.failed = true;
    for (size_t i : g.items) g.retry.emplace_back(i, nullptr);
    return;
  }
  for (size_t k = 0; k < g.items.size(); ++k) {
    RedisReplyPtr& r = got[reply_at[k]];
    if (r->type != REDIS_REPLY_ERROR) {
      (*replies)[g.items[k]] = std::move(r);
      continue;
    }
    const std::string_view text(r->str, r->len);
    const bool moved = starts_with(text, "MOVED "), ask = starts_with(text, "ASK ");
    if (moved || ask) {
      int slot = 0, port = 0;
      std::string host;
      std::string numeric;
      if (parse_redirect(text, &slot, &host, &port) &&
          (host.empty() ? (numeric = g.node->host, true) : resolve_redis_host(host, &numeric).is_ok())) {
        std::lock_guard<std::mutex> l(mu_);
        Node* to = node_at(numeric, port);
        if (moved) {
          owner_[static_cast<size_t>(slot)] = to;
          stale_ = true;  // a moved slot rarely moves alone
          ++stats_.moved;
        } else {
          ++stats_.ask;
        }
        g.retry.emplace_back(g.items[k], ask ? to : nullptr);
        continue;
      }
    }
    if (starts_with(text, "CLUSTERDOWN") || starts_with(text, "TRYAGAIN") || starts_with(text, "READONLY")) {
      std::lock_guard<std::mutex> l(mu_);
      ++stats_.unrouted;
      stale_ = true;
      continue;
    }
    if (starts_with(text, "LOADING") || starts_with(text, "MASTERDOWN") || starts_with(text, "NOAUTH")) {
      g.node->pool.trip(Status::io_error("redis: " + std::string(text)));
      continue;
    }
    (*replies)[g.items[k]] = std::move(r);  // the command's own error (WRONGTYPE, OOM): the caller's to judge
  }
}

void RedisCluster::exchange(std::span<const RedisCommand> commands, std::vector<RedisReplyPtr>* replies) {
  replies->clear();
  replies->resize(commands.size());
  const RedisDeadline deadline = RedisClock::now() + options_.timeout;
  std::vector<std::pair<size_t, Node*>> pending;
  for (size_t i = 0; i < commands.size(); ++i) pending.emplace_back(i, nullptr);
  bool kick = false, refreshed = false;
  for (int hop = 0; !pending.empty(); ++hop) {
    std::vector<Group> groups;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (hop > kMaxRedirects || (hop > 0 && RedisClock::now() >= deadline)) {  // no hop may trip a node for lack of time
        stats_.unrouted += pending.size();
        break;
      }
      for (const auto& [i, ask] : pending) {
        Node* n = ask ? ask : owner_[static_cast<size_t>(redis_cluster_slot(commands[i].at(1)))];
        if (!n) {
          ++stats_.unrouted;
          kick = stale_ = true;
          continue;
        }
        if (!n->pool.up()) {
          ++stats_.skipped_calls;
          kick = true;  // the map may name its successor by now
          continue;
        }
        auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.node == n; });
        if (g == groups.end()) g = groups.insert(groups.end(), Group{n, {}, {}, {}, false});
        g->items.push_back(i);
        g->asking.push_back(ask != nullptr);
      }
    }
    // Nodes are asked side by side: a slow node costs its own commands, not the others' time.
    std::vector<std::thread> others;
    for (size_t k = 1; k < groups.size(); ++k)
      others.emplace_back([&, k] { run_group(groups[k], commands, deadline, replies); });
    if (!groups.empty()) run_group(groups[0], commands, deadline, replies);
    for (auto& t : others) t.join();
    pending.clear();
    bool node_failed = false;
    for (auto& g : groups) {
      if (!g.retry.empty()) kick = true;
      node_failed = node_failed || g.failed;
      pending.insert(pending.end(), g.retry.begin(), g.retry.end());
    }
    // A master that just died has usually been replaced by its replica
    // already (this replica had no reason to call it before): one map read,
    // then its commands go once more, to the new owner or nowhere.
    if (node_failed && !refreshed && RedisClock::now() < deadline) {
      refreshed = true;
      (void)refresh();
    } else if (node_failed) {
      std::erase_if(pending, [&](const auto& p) {
        for (const auto& g : groups)
          if (g.failed && std::find(g.items.begin(), g.items.end(), p.first) != g.items.end()) return true;
        return false;
      });
    }
  }
  if (kick) cv_.notify_all();
}

Status RedisCluster::read_slots(Node* node) {
  static const RedisCommand kSlots = {"CLUSTER", "SLOTS"};
  std::vector<RedisReplyPtr> got;
  SB_RETURN_IF_ERROR(node->pool.call(std::span<const RedisCommand>(&kSlots, 1), RedisClock::now() + options_.timeout,
                                     &got));
  const redisReply* r = got[0].get();
  if (r->type != REDIS_REPLY_ARRAY)
    return Status::io_error("redis node " + node->pool.name() + " answered CLUSTER SLOTS with " +
                            (r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "no list") +
                            " (is it a cluster node?)");
  struct Range {
    long long from, to;
    std::string host;
    int port;
  };
  std::vector<Range> ranges;
  for (size_t i = 0; i < r->elements; ++i) {
    const redisReply* e = r->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[0]->type != REDIS_REPLY_INTEGER ||
        e->element[1]->type != REDIS_REPLY_INTEGER || e->element[2]->type != REDIS_REPLY_ARRAY ||
        e->element[2]->elements < 2 || e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
        e->element[2]->element[1]->type != REDIS_REPLY_INTEGER)
      return Status::io_error("redis node " + node->pool.name() + ": malformed CLUSTER SLOTS reply");
    const redisReply* m = e->element[2];
    std::string host(m->element[0]->str, m->element[0]->len);
    if (host.empty() || host == "?") host = node->host;  // "the address you reached me at"
    std::string numeric;
    SB_RETURN_IF_ERROR(resolve_redis_host(host, &numeric));
    const long long from = e->element[0]->integer, to = e->element[1]->integer;
    if (from < 0 || to >= kRedisClusterSlots || from > to)
      return Status::io_error("redis node " + node->pool.name() + ": CLUSTER SLOTS names slots out of range");
    ranges.push_back({from, to, numeric, static_cast<int>(m->element[1]->integer)});
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    owner_.fill(nullptr);
    for (const auto& range : ranges) {
      Node* n = node_at(range.host, range.port);
      for (long long s = range.from; s <= range.to; ++s) owner_[static_cast<size_t>(s)] = n;
    }
    stale_ = false;
    ++stats_.refreshes;
  }
  return Status::ok();
}

bool RedisCluster::stale_locked() const {
  if (stale_) return true;
  for (Node* n : owner_)
    if (!n || !n->pool.up()) return true;
  return false;
}

Status RedisCluster::refresh() {
  std::vector<Node*> candidates;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& n : nodes_)
      if (n->pool.up()) candidates.push_back(n.get());
  }
  Status last = Status::io_error("no cluster node is reachable");
  for (Node* n : candidates)
    if ((last = read_slots(n)).is_ok()) break;
  return last;
}

void RedisCluster::maintain_loop() {
  std::unique_lock<std::mutex> l(mu_);
  RedisClock::time_point last_read{};
  while (!stop_) {
    cv_.wait_for(l, options_.retry_interval);
    if (stop_) return;
    std::vector<Node*> due;
    const auto now = RedisClock::now();
    for (auto& n : nodes_)
      if (!n->pool.up() && now >= n->next_probe) due.push_back(n.get());
    l.unlock();
    for (Node* n : due) {
      const Status s = n->pool.probe(RedisClock::now() + options_.timeout);
      {
        std::lock_guard<std::mutex> g(mu_);
        if (s.is_ok())
          stale_ = true;  // whatever it is now (a master again, a replica), the map says
        else
          n->next_probe = RedisClock::now() + options_.retry_interval;
      }
      if (s.is_ok()) log("node " + n->pool.name() + " answers again");
    }
    l.lock();
    if (!stale_locked()) continue;
    // Every command skipped for a dead owner wakes this loop: the map is
    // read at most ten times an interval however many there are.
    if (cv_.wait_until(l, last_read + options_.retry_interval / 10, [&] { return stop_; })) return;
    last_read = RedisClock::now();
    l.unlock();
    (void)refresh();  // a failure: tried again next interval
    l.lock();
  }
}

RedisClusterStats RedisCluster::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  RedisClusterStats s = stats_;
  for (const auto& n : nodes_) s += n->pool.stats();
  std::vector<const Node*> owners;
  s.slots_covered = 0;
  bool all_up = true;
  for (const Node* n : owner_) {
    if (!n) continue;
    ++s.slots_covered;
    all_up = all_up && n->pool.up();
    if (std::find(owners.begin(), owners.end(), n) == owners.end()) owners.push_back(n);
  }
  s.masters = owners.size();
  s.masters_down = static_cast<uint64_t>(std::count_if(owners.begin(), owners.end(), [](const Node* n) { return !n->pool.up(); }));
  s.available = all_up && s.slots_covered == kRedisClusterSlots;
  return s;
}

}  // namespace sb
