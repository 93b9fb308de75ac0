#include "bank/remote/redis_tier.h"

#include <hiredis.h>

#include <cstdio>

#include "bank/format.h"
#include "common/hmac.h"

namespace sb {
namespace {

bool is_integer_one(const redisReply* r) { return r && r->type == REDIS_REPLY_INTEGER && r->integer == 1; }

std::string error_text(const redisReply* r) {
  if (!r) return "no reply";
  if (r->type == REDIS_REPLY_ERROR) return std::string(r->str, r->len);
  return "unexpected reply type " + std::to_string(r->type);
}

// The tag of `image` stored under `name`: a domain label, the name's length
// and bytes, then the image (docs/bank-format.md, "Remote values").
Sha256Digest value_tag(std::string_view secret, std::string_view name, const void* image, size_t n) {
  static constexpr char kLabel[] = "statebank remote value v1";
  HmacSha256 h(secret);
  h.update(kLabel, sizeof kLabel);  // with its NUL
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(name.size()) >> (8 * i));
  h.update(len, sizeof len);
  h.update(name.data(), name.size());
  h.update(image, n);
  return h.finish();
}

}  // namespace

std::string RedisTier::seal(std::string_view secret, std::string_view name, std::span<const uint8_t> image) {
  const Sha256Digest tag = value_tag(secret, name, image.data(), image.size());
  std::string value(reinterpret_cast<const char*>(image.data()), image.size());
  value.append(reinterpret_cast<const char*>(tag.data()), tag.size());
  return value;
}

RedisTier::RedisTier(RedisOptions options) : options_(std::move(options)) {
  if (options_.schema) schema_digest_ = schema_digest(*options_.schema);
  if (options_.ttl.count() > 0) ttl_text_ = std::to_string(options_.ttl.count());
}

Status RedisTier::open(RedisOptions options, std::unique_ptr<RedisTier>* out) {
  if (options.timeout.count() <= 0) return Status::invalid("the remote time-out must be positive");
  if (options.ttl.count() < 0) return Status::invalid("the remote ttl must not be negative");
  if (options.secret.empty())
    return Status::invalid("the remote tier needs a secret to authenticate its values (--remote-secret-file)");
  if (options.retry_interval.count() <= 0) options.retry_interval = options.timeout;
  if (options.max_idle_connections < 1) options.max_idle_connections = 1;
  std::unique_ptr<RedisTier> t(new RedisTier(std::move(options)));
  if (t->options_.address.cluster) {
    SB_RETURN_IF_ERROR(t->open_cluster());
    t->worker_ = std::thread([p = t.get()] { p->worker_loop(); });
    *out = std::move(t);
    return Status::ok();
  }
  const RedisAddress& a = t->options_.address;
  RedisPool::Server server{"", a.port, a.db, t->options_.password, t->options_.max_idle_connections};
  SB_RETURN_IF_ERROR(resolve_redis_host(a.host, &server.host));
  t->pool_ = std::make_unique<RedisPool>(std::move(server), false, [p = t.get()](const Status& why) { p->tripped(why); });
  std::unique_ptr<RedisConnection> first;
  Status s = t->pool_->connect(RedisClock::now() + t->options_.timeout, &first);
  // A refusal (password, database) will not heal by retrying: say so now.
  if (s.code() == Code::kInvalidArgument) return s;
  const std::string where = t->options_.address.url();
  if (s.is_ok()) {
    t->pool_->adopt(std::move(first));
    t->log("using " + where + " (time-out " + redis_millis(t->options_.timeout) + ", " +
           (t->ttl_text_.empty() ? std::string("no expiry") : "expiry " + t->ttl_text_ + " s after last use") + ")");
  } else {
    t->next_probe_ = RedisClock::now() + t->options_.retry_interval;
    t->log(where + " is unreachable (" + s.message() + "); serving without it, retrying every " +
           redis_millis(t->options_.retry_interval));
  }
  t->worker_ = std::thread([p = t.get()] { p->worker_loop(); });
  *out = std::move(t);
  return Status::ok();
}

Status RedisTier::open_cluster() {
  RedisClusterOptions c;
  c.seeds = options_.address.seeds;
  c.password = options_.password;
  c.timeout = options_.timeout;
  c.retry_interval = options_.retry_interval;
  c.max_idle_connections = options_.max_idle_connections;
  c.log = options_.log;
  SB_RETURN_IF_ERROR(RedisCluster::open(std::move(c), &cluster_));
  // The breaker is per node (invariant 8): the tier as a whole stays open.
  log("using " + options_.address.url() + " (time-out " + redis_millis(options_.timeout) + " per call, " +
      (ttl_text_.empty() ? std::string("no expiry") : "expiry " + ttl_text_ + " s after last use") + ")");
  return Status::ok();
}

RedisTier::~RedisTier() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void RedisTier::log(const std::string& message) const {
  redis_log(options_.log, "remote", message);
}

std::string RedisTier::redis_key(ObjectKind kind, const Key& key) const {
  return options_.key_prefix + (kind == ObjectKind::kBlock ? "blk:" : "snp:") + key.hex();
}

void RedisTier::trip(const Status& why) const {
  if (cluster_) {  // an error a node gave for one command: that command's miss, not the cluster's
    log("redis cluster: " + why.message());
    return;
  }
  pool_->trip(why);
}

void RedisTier::tripped(const Status& why) {
  {
    std::lock_guard<std::mutex> l(mu_);  // the writer waits on the breaker under mu_
    next_probe_ = RedisClock::now() + options_.retry_interval;
  }
  work_cv_.notify_all();
  log("unavailable: " + why.message() + "; every lookup misses at once until it answers again (retrying every " +
      redis_millis(options_.retry_interval) + ")");
}

Status RedisTier::call(std::span<const RedisCommand> commands, std::vector<RedisReplyPtr>* replies) const {
  if (cluster_) {
    cluster_->exchange(commands, replies);  // a failed command's reply is null
    return Status::ok();
  }
  return pool_->call(commands, RedisClock::now() + options_.timeout, replies);
}

void RedisTier::contains_many(std::span<TierProbe> probes) const {
  for (auto& p : probes) p.present = false;
  if (probes.empty()) return;
  std::vector<std::string> names;
  names.reserve(probes.size());
  for (const auto& p : probes) names.push_back(redis_key(p.kind, p.key));
  std::vector<RedisCommand> commands;
  for (const auto& n : names) commands.push_back({"EXISTS", n});
  std::vector<RedisReplyPtr> replies;
  if (!call(commands, &replies).is_ok()) return;
  for (size_t i = 0; i < probes.size(); ++i) {
    const redisReply* r = replies[i].get();
    if (!r) continue;                    // its cluster node is unavailable: absent
    if (r->type == REDIS_REPLY_ERROR) {  // LOADING, NOAUTH after a restart, ...
      trip(Status::io_error("redis: " + error_text(r)));
      for (auto& p : probes) p.present = false;
      return;
    }
    probes[i].present = is_integer_one(r);
  }
}

bool RedisTier::contains(ObjectKind kind, const Key& key) const {
  TierProbe p{kind, key, false};
  contains_many(std::span<TierProbe>(&p, 1));
  return p.present;
}

Status RedisTier::decode_reply(ObjectKind kind, const Key& key, const redisReply* r, ObjectRef* out) const {
  auto miss = [&](Status s) {
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.tier.misses;
    if (s.code() == Code::kCorruption) ++stats_.tier.check_failures;
    return s;
  };
  const std::string name = redis_key(kind, key);
  if (!r) return miss(Status::io_error("the cluster node holding " + name + " is unavailable"));
  if (r->type == REDIS_REPLY_NIL) return miss(Status::not_found("no " + name + " in the remote tier"));
  if (r->type != REDIS_REPLY_STRING) {
    const std::string e = error_text(r);
    if (e.rfind("WRONGTYPE", 0) == 0) {
      log("bad value " + name + ": not a string; deleting it");
      schedule_delete(kind, key);
      return miss(Status::corruption(name + " holds a value that is not a string"));
    }
    // Any other error is the server's state (LOADING, NOAUTH, an unknown
    // command), not this value's.
    trip(Status::io_error("redis: " + e));
    return miss(Status::io_error("redis: " + e));
  }
  // The MAC first: nothing of a value that another party may have written
  // is looked at before it is known to come from a holder of the secret.
  const auto* bytes = reinterpret_cast<const uint8_t*>(r->str);
  const size_t image_len = r->len >= kTagBytes ? r->len - kTagBytes : 0;
  if (r->len < kTagBytes ||
      !same_tag(value_tag(options_.secret, name, bytes, image_len).data(), bytes + image_len, kTagBytes)) {
    uint64_t n;
    {
      std::lock_guard<std::mutex> l(mu_);
      n = ++stats_.mac_failures;
    }
    if ((n & (n - 1)) == 0)  // the 1st, 2nd, 4th, ...: a flood of bad values cannot flood the log
      log("bad value " + name + " (" + std::to_string(r->len) +
          " bytes): its MAC is missing or wrong (rewritten, or written with another --remote-secret-file); not "
          "installed, deleting it (" + std::to_string(n) + " so far)");
    schedule_delete(kind, key);
    return miss(Status::corruption(name + ": the value's MAC is missing or wrong"));
  }
  auto object = std::make_shared<Object>();
  ObjectHeader h;
  Status s = decode_object(std::span<const uint8_t>(bytes, image_len), &h, object.get());
  if (s.code() == Code::kUnsupported) {
    // A newer statebank's value: not ours to delete.
    return miss(Status::corruption(name + ": " + s.message()));
  }
  if (s.is_ok() && (h.kind != kind || h.key != key)) s = Status::corruption("the value names another object");
  if (s.is_ok() && options_.schema) {
    if (h.schema_digest != schema_digest_)
      s = Status::corruption("the value was written for another state schema (another model)");
    else
      s = check_shapes(*object, *options_.schema);
  }
  if (s.is_ok() && kind == ObjectKind::kBlock && options_.verify_block && !options_.verify_block(*object))
    s = Status::corruption("the block's key does not match its parent and tokens");
  if (!s.is_ok()) {
    log("bad value " + name + " (" + std::to_string(r->len) + " bytes): " + s.message() + "; deleting it");
    schedule_delete(kind, key);
    return miss(Status::corruption(name + ": " + s.message()));
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.tier.hits;
    stats_.tier.bytes_read += r->len;
  }
  *out = std::move(object);
  return Status::ok();
}

void RedisTier::get_many(std::span<TierRead> reads) {
  if (reads.empty()) return;
  std::vector<std::string> names;
  names.reserve(reads.size());
  for (const auto& r : reads) names.push_back(redis_key(r.kind, r.key));
  std::vector<RedisCommand> commands;
  for (const auto& n : names) {
    if (ttl_text_.empty())
      commands.push_back({"GET", n});
    else
      commands.push_back({"GETEX", n, "EX", ttl_text_});  // expiry counts from the last use
  }
  std::vector<RedisReplyPtr> replies;
  Status s = call(commands, &replies);
  if (!s.is_ok()) {
    {
      std::lock_guard<std::mutex> l(mu_);
      stats_.tier.misses += reads.size();
    }
    for (auto& r : reads) {
      r.object = nullptr;
      r.status = Status::io_error("remote tier: " + s.message());
    }
    return;
  }
  for (size_t i = 0; i < reads.size(); ++i) {
    reads[i].object = nullptr;
    reads[i].status = decode_reply(reads[i].kind, reads[i].key, replies[i].get(), &reads[i].object);
  }
}

Status RedisTier::get(ObjectKind kind, const Key& key, ObjectRef* out) {
  TierRead r{kind, key, nullptr, Status()};
  get_many(std::span<TierRead>(&r, 1));
  if (r.status.is_ok()) *out = std::move(r.object);
  return r.status;
}

Status RedisTier::put(const ObjectRef& object, Retention retention) {
  if (!object) return Status::ok();
  const uint64_t bytes = encoded_size(*object);
  std::lock_guard<std::mutex> l(mu_);
  if (!available() || closed_) {
    ++stats_.dropped_puts;
    return Status::exhausted(closed_ ? "the remote tier is closed; object not stored there"
                                     : "the remote tier is unavailable; object not stored there");
  }
  const auto id = std::make_pair(object->kind, object->key);
  if (pending_.count(id)) return Status::ok();
  if (queue_.size() >= options_.queue_max_objects ||
      (!queue_.empty() && queue_bytes_ + bytes > options_.queue_max_bytes)) {
    ++stats_.dropped_puts;
    return Status::exhausted("the remote write queue is full; object not stored there");
  }
  queue_.push_back(Job{object, object->kind, object->key, retention, bytes});
  queue_bytes_ += bytes;
  pending_.insert(id);
  ++enqueued_;
  work_cv_.notify_all();
  return Status::ok();
}

bool RedisTier::quarantine(ObjectKind kind, const Key& key, const std::string& why) {
  // Redis keeps nothing aside: the value is deleted at once (one round trip,
  // bounded by the time-out), so no replica restores it again.
  const std::string name = redis_key(kind, key);
  const RedisCommand del = {"DEL", name};
  std::vector<RedisReplyPtr> replies;
  const Status s = call(std::span<const RedisCommand>(&del, 1), &replies);
  const bool removed = s.is_ok() && replies.size() == 1 && is_integer_one(replies[0].get());
  if (removed) {
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.tier.quarantined;
    ++stats_.deleted;
  }
  if (removed || !s.is_ok())
    log("quarantined " + name + " (" + why + ")" + (s.is_ok() ? "; deleted" : "; not deleted: " + s.message()));
  return removed;
}

void RedisTier::schedule_delete(ObjectKind kind, const Key& key) const {
  std::lock_guard<std::mutex> l(mu_);
  // Unavailable, closed or full: the next reader finds it again.
  if (!available() || closed_ || queue_.size() >= options_.queue_max_objects) return;
  queue_.push_back(Job{nullptr, kind, key, Retention::kBlock, 0});
  ++enqueued_;
  work_cv_.notify_all();
}

void RedisTier::drop_queue() {
  for (const auto& j : queue_)
    if (j.object) ++stats_.dropped_puts;
  finished_ += queue_.size();
  queue_.clear();
  queue_bytes_ = 0;
  pending_.clear();
  done_cv_.notify_all();
}

void RedisTier::worker_loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    if (!available()) {
      // Nothing can be written: drop what waits (put() drops too meanwhile).
      drop_queue();
      if (stop_) return;
      if (RedisClock::now() < next_probe_) {
        work_cv_.wait_until(l, next_probe_, [&] { return stop_; });
        continue;
      }
      l.unlock();
      probe();
      l.lock();
      continue;
    }
    if (queue_.empty()) {
      if (stop_) return;
      work_cv_.wait(l, [&] { return stop_ || !queue_.empty() || !available(); });
      continue;
    }
    std::vector<Job> batch;
    uint64_t bytes = 0;
    while (!queue_.empty() && (batch.empty() || bytes + queue_.front().bytes <= options_.write_batch_bytes)) {
      bytes += queue_.front().bytes;
      queue_bytes_ -= queue_.front().bytes;
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    writing_ = batch.size();
    l.unlock();
    write_batch(batch);
    l.lock();
    writing_ = 0;
    for (const auto& j : batch)
      if (j.object) pending_.erase(std::make_pair(j.kind, j.key));
    finished_ += batch.size();
    done_cv_.notify_all();
  }
}

void RedisTier::probe() {
  Status s = pool_->probe(RedisClock::now() + options_.timeout);
  std::string fresh_failure;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (s.is_ok()) {
      last_logged_.clear();
    } else {
      next_probe_ = RedisClock::now() + options_.retry_interval;
      if (s.message() != last_logged_) fresh_failure = last_logged_ = s.message();
    }
  }
  if (s.is_ok()) log("available again at " + options_.address.url());
  if (!fresh_failure.empty()) log("still unavailable: " + fresh_failure);
}

struct RedisTier::WriteRound {
  std::vector<std::string> images;
  std::vector<RedisCommand> commands;
  std::vector<size_t> image_of;  // per command: index in images, or npos for an EXPIRE
};

void RedisTier::write_batch(std::vector<Job>& jobs) {
  std::vector<std::string> names;
  names.reserve(jobs.size());
  for (const auto& j : jobs) names.push_back(redis_key(j.kind, j.key));
  // Round trip 1: deletions, then which objects Redis lacks. A DEL and an
  // EXISTS of the same name run in this order, so a value deleted here is
  // written again below.
  std::vector<RedisCommand> first;
  std::vector<size_t> puts;
  size_t deletes = 0;
  for (size_t i = 0; i < jobs.size(); ++i)
    if (!jobs[i].object) {
      first.push_back({"DEL", names[i]});
      ++deletes;
    }
  for (size_t i = 0; i < jobs.size(); ++i)
    if (jobs[i].object) {
      first.push_back({"EXISTS", names[i]});
      puts.push_back(i);
    }
  std::vector<RedisReplyPtr> replies;
  if (!call(first, &replies).is_ok()) {
    std::lock_guard<std::mutex> l(mu_);
    stats_.dropped_puts += puts.size();
    return;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    for (size_t i = 0; i < deletes; ++i) stats_.deleted += is_integer_one(replies[i].get()) ? 1 : 0;
  }
  WriteRound round;
  if (!plan_writes(jobs, names, puts, deletes, replies, &round) || round.commands.empty()) return;
  if (!call(round.commands, &replies).is_ok()) {
    std::lock_guard<std::mutex> l(mu_);
    stats_.dropped_puts += round.images.size();
    return;
  }
  count_write_replies(round, replies);
}

bool RedisTier::plan_writes(const std::vector<Job>& jobs, const std::vector<std::string>& names,
                            const std::vector<size_t>& puts, size_t deletes, const std::vector<RedisReplyPtr>& exists,
                            WriteRound* round) {
  round->images.reserve(puts.size());
  uint64_t skipped = 0;
  for (size_t k = 0; k < puts.size(); ++k) {
    const Job& j = jobs[puts[k]];
    const std::string& name = names[puts[k]];
    const redisReply* r = exists[deletes + k].get();
    if (!r) {  // its cluster node is unavailable
      std::lock_guard<std::mutex> l(mu_);
      ++stats_.dropped_puts;
      continue;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      trip(Status::io_error("redis: " + error_text(r)));
      std::lock_guard<std::mutex> l(mu_);
      stats_.dropped_puts += puts.size();
      return false;
    }
    if (is_integer_one(r)) {
      ++skipped;
      if (!ttl_text_.empty()) {
        round->commands.push_back({"EXPIRE", name, ttl_text_});
        round->image_of.push_back(std::string::npos);
      }
      continue;
    }
    round->images.push_back(seal(options_.secret, name, encode_object(*j.object, j.retention, schema_digest_)));
    const std::string_view value(round->images.back());
    if (ttl_text_.empty())
      round->commands.push_back({"SET", name, value});
    else
      round->commands.push_back({"SET", name, value, "EX", ttl_text_});
    round->image_of.push_back(round->images.size() - 1);
  }
  std::lock_guard<std::mutex> l(mu_);
  stats_.skipped_writes += skipped;
  return true;
}

void RedisTier::count_write_replies(const WriteRound& round, const std::vector<RedisReplyPtr>& replies) {
  std::string refused;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (size_t c = 0; c < round.commands.size(); ++c) {
      const redisReply* r = replies[c].get();
      if (round.image_of[c] == std::string::npos) continue;
      if (!r) {
        ++stats_.dropped_puts;  // its cluster node failed
      } else if (r->type == REDIS_REPLY_STATUS) {
        stats_.tier.bytes_written += round.images[round.image_of[c]].size();
      } else {
        ++stats_.write_errors;
        refused = error_text(r);
      }
    }
    if (!refused.empty() && refused == last_logged_) refused.clear();
    if (!refused.empty()) last_logged_ = refused;
  }
  // Refusals such as OOM (maxmemory with noeviction) leave Redis healthy:
  // logged once per distinct message, not a reason to stop using it.
  if (!refused.empty()) log("redis refused a write: " + refused);
}

TierStats RedisTier::stats() const {
  const RedisStats s = redis_stats();
  TierStats t = s.tier;
  t.facts = {{"url", options_.address.url()}};
  t.counts = {{"available", s.available ? 1 : 0},
              {"ttl_s", static_cast<uint64_t>(options_.ttl.count())},
              {"timeout_ms", static_cast<uint64_t>(options_.timeout.count())},
              {"trips", s.trips},
              {"timeouts", s.timeouts},
              {"failures", s.failures},
              {"skipped_calls", s.skipped_calls},
              {"probes", s.probes},
              {"round_trips", s.round_trips},
              {"in_flight", s.in_flight},
              {"wire_bytes_sent", s.wire_bytes_sent},
              {"wire_bytes_received", s.wire_bytes_received},
              {"queued", s.queued},
              {"dropped_puts", s.dropped_puts},
              {"write_errors", s.write_errors},
              {"skipped_writes", s.skipped_writes},
              {"deleted", s.deleted},
              {"mac_failures", s.mac_failures}};
  if (s.cluster) {
    const RedisClusterStats& c = s.nodes;
    t.counts["available"] = c.available ? 1 : 0;
    t.counts.insert({{"cluster_masters", c.masters},
                     {"cluster_masters_down", c.masters_down},
                     {"cluster_slots_covered", c.slots_covered},
                     {"cluster_moved", c.moved},
                     {"cluster_ask", c.ask},
                     {"cluster_refreshes", c.refreshes},
                     {"cluster_unrouted", c.unrouted}});
  }
  return t;
}

RedisStats RedisTier::redis_stats() const {
  std::lock_guard<std::mutex> l(mu_);
  RedisStats s = stats_;
  s.available = available();
  s.queued = writing_ + queue_.size();
  if (pool_) s += pool_->stats();
  if (cluster_) {
    const RedisClusterStats c = cluster_->stats();
    s.cluster = true;
    s.nodes = c;
    s.available = c.available;
    s += c;
  }
  return s;
}

Status RedisTier::flush(RedisDeadline deadline) {
  std::unique_lock<std::mutex> l(mu_);
  const uint64_t target = enqueued_;
  auto done = [&] { return finished_ >= target; };
  if (deadline == RedisDeadline::max())
    done_cv_.wait(l, done);
  else if (!done_cv_.wait_until(l, deadline, done))
    return Status::exhausted("the remote write queue was not written by the deadline");
  return Status::ok();
}

Status RedisTier::close(RedisDeadline deadline) {
  Status s = flush(deadline);
  std::lock_guard<std::mutex> l(mu_);
  if (!closed_) {
    closed_ = true;
    drop_queue();
  }
  return s;
}

}  // namespace sb
