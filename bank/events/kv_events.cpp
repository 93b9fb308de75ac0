#include "bank/events/kv_events.h"

#include <zmq.h>

#include <cstdio>
#include <cstring>
#include <msgpack.hpp>

namespace sb {
namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void pack_text(Packer& p, std::string_view s) {
  p.pack_str(static_cast<uint32_t>(s.size()));
  p.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

void pack_key(Packer& p, const Key& k) {
  p.pack_bin(static_cast<uint32_t>(k.bytes.size()));
  p.pack_bin_body(reinterpret_cast<const char*>(k.bytes.data()), static_cast<uint32_t>(k.bytes.size()));
}

}  // namespace

Status KvEventPublisher::open(KvEventsOptions options, std::unique_ptr<KvEventPublisher>* out) {
  if (options.endpoint.rfind("tcp://", 0) != 0 || options.endpoint.rfind(':') <= 6)
    return Status::invalid("--kv-events '" + options.endpoint + "': expected tcp://HOST:PORT (tcp://*:PORT binds)");
  std::unique_ptr<KvEventPublisher> p(new KvEventPublisher(std::move(options)));
  p->context_ = zmq_ctx_new();
  if (!p->context_) return Status::internal("zmq_ctx_new failed");
  p->socket_ = zmq_socket(p->context_, ZMQ_PUB);
  const int hwm = p->options_.high_water_mark, linger = 0;
  zmq_setsockopt(p->socket_, ZMQ_SNDHWM, &hwm, sizeof hwm);
  zmq_setsockopt(p->socket_, ZMQ_LINGER, &linger, sizeof linger);
  const std::string& e = p->options_.endpoint;
  const bool bind = e.find('*') != std::string::npos || e.find("::") != std::string::npos;
  if ((bind ? zmq_bind(p->socket_, e.c_str()) : zmq_connect(p->socket_, e.c_str())) != 0)
    return Status::invalid("--kv-events '" + e + "': cannot " + (bind ? "bind" : "connect") + ": " +
                           zmq_strerror(zmq_errno()));
  p->sender_ = std::thread([q = p.get()] { q->sender_loop(); });
  *out = std::move(p);
  return Status::ok();
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (sender_.joinable()) sender_.join();
  if (socket_) zmq_close(socket_);
  if (context_) zmq_ctx_term(context_);
}

void KvEventPublisher::push(Event e) {
  uint64_t dropped = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (queue_.size() < options_.queue_max)
      queue_.push_back(std::move(e));
    else
      dropped = ++stats_.dropped;
  }
  if (dropped == 0) {
    cv_.notify_one();
  } else if ((dropped & (dropped - 1)) == 0) {  // the 1st, 2nd, 4th, ...: a flood cannot flood the log
    const std::string m = "kv events: the queue is full; " + std::to_string(dropped) +
                          " events dropped so far (subscribers' indexes are stale until later events)";
    if (options_.log)
      options_.log(m);
    else
      std::fprintf(stderr, "statebank %s\n", m.c_str());
  }
}

void KvEventPublisher::stored(TierKind tier, const TierEntry& entry, std::span<const int32_t> tokens) {
  Event e;
  e.type = Event::Type::kStored;
  e.tier = tier;
  e.kind = entry.kind;
  e.key = entry.key;
  e.parent = entry.parent;
  e.position = entry.position;
  e.block_tokens = entry.tokens;
  e.tokens.assign(tokens.begin(), tokens.end());
  e.ts = now_seconds();
  push(std::move(e));
}

void KvEventPublisher::removed(TierKind tier, ObjectKind kind, const Key& key) {
  Event e;
  e.type = Event::Type::kRemoved;
  e.tier = tier;
  e.kind = kind;
  e.key = key;
  e.ts = now_seconds();
  push(std::move(e));
}

void KvEventPublisher::cleared() {
  Event e;
  e.type = Event::Type::kCleared;
  e.ts = now_seconds();
  push(std::move(e));
}

std::string KvEventPublisher::encode(const std::vector<Event>& batch) {
  msgpack::sbuffer buf;
  Packer p(&buf);
  std::vector<const Event*> blocks, snaps_in, snaps_out;
  for (const auto& e : batch) {
    if (e.type != Event::Type::kCleared && e.kind == ObjectKind::kSnapshot)
      (e.type == Event::Type::kStored ? snaps_in : snaps_out).push_back(&e);
    else
      blocks.push_back(&e);
  }
  const bool with_snapshots = !snaps_in.empty() || !snaps_out.empty();
  p.pack_map(with_snapshots ? 4 : 2);
  pack_text(p, "ts");
  p.pack_double(batch.front().ts);
  pack_text(p, "events");
  p.pack_array(static_cast<uint32_t>(blocks.size()));
  for (const Event* e : blocks) {
    switch (e->type) {
      case Event::Type::kStored:
        p.pack_map(9);
        pack_text(p, "type"), pack_text(p, "BlockStored");
        pack_text(p, "block_hashes"), p.pack_array(1), pack_key(p, e->key);
        pack_text(p, "parent_block_hash"), pack_key(p, e->parent);
        pack_text(p, "token_ids"), p.pack_array(static_cast<uint32_t>(e->tokens.size()));
        for (int32_t t : e->tokens) p.pack_int32(t);
        pack_text(p, "block_size"), p.pack_uint32(e->block_tokens);
        pack_text(p, "lora_id"), p.pack_nil();
        pack_text(p, "medium"), pack_text(p, tier_kind_name(e->tier));
        pack_text(p, "lora_name"), p.pack_nil();
        pack_text(p, "statebank_position"), p.pack_int64(e->position);
        break;
      case Event::Type::kRemoved:
        p.pack_map(3);
        pack_text(p, "type"), pack_text(p, "BlockRemoved");
        pack_text(p, "block_hashes"), p.pack_array(1), pack_key(p, e->key);
        pack_text(p, "medium"), pack_text(p, tier_kind_name(e->tier));
        break;
      case Event::Type::kCleared:
        p.pack_map(1);
        pack_text(p, "type"), pack_text(p, "AllBlocksCleared");
        break;
    }
  }
  if (with_snapshots) {
    for (const auto* list : {&snaps_in, &snaps_out}) {
      pack_text(p, list == &snaps_in ? "statebank_snapshots_stored" : "statebank_snapshots_removed");
      p.pack_array(static_cast<uint32_t>(list->size()));
      for (const Event* e : *list) {
        p.pack_array(2);
        pack_key(p, e->key);
        pack_text(p, tier_kind_name(e->tier));
      }
    }
  }
  return std::string(buf.data(), buf.size());
}

void KvEventPublisher::sender_loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty() && stop_) return;
    // A short wait gathers what the same step stores into one batch.
    if (!stop_) cv_.wait_for(l, options_.batch_window, [&] { return stop_; });
    std::vector<Event> batch(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
    queue_.clear();
    const uint64_t seq = stats_.batches;
    l.unlock();
    const std::string payload = encode(batch);
    unsigned char seq_bytes[8];
    for (int i = 0; i < 8; ++i) seq_bytes[i] = static_cast<unsigned char>(seq >> (56 - 8 * i));
    const bool sent = zmq_send(socket_, options_.topic.data(), options_.topic.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
                      zmq_send(socket_, seq_bytes, sizeof seq_bytes, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
                      zmq_send(socket_, payload.data(), payload.size(), ZMQ_DONTWAIT) >= 0;
    l.lock();
    ++stats_.batches;
    if (sent)
      stats_.events += batch.size();
    else
      ++stats_.send_failures;
  }
}

KvEventsStats KvEventPublisher::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

}  // namespace sb
