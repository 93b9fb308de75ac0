// KvEventPublisher: tells routers what this replica's bank holds, as vLLM's
// KV-cache events (docs/bank.md, "Bank events"), so that a prefix-aware
// router (llm-d's precise prefix-cache scorer, NVIDIA Dynamo's KV router)
// can send a prompt where most of it can be restored.
//
// Wire format, as vLLM's vllm/distributed/kv_events.py publishes it: a ZMQ
// PUB socket sends three-frame messages (topic, an 8-byte big-endian
// sequence number counting from 0, a msgpack payload). The payload is an
// EventBatch map {"ts": seconds since the epoch, "events": [...]}; each event
// is a map tagged by "type": BlockStored {block_hashes, parent_block_hash,
// token_ids, block_size, lora_id, medium, lora_name}, BlockRemoved
// {block_hashes, medium}, AllBlocksCleared {}. Block hashes are our 32-byte
// chain keys (msgpack bin); medium is the tier ("ram", "ssd").
//
// The extension (fields vLLM's decoders ignore, since its structs accept
// unknown fields): every BlockStored carries "statebank_position" (the
// block's first token); a batch carries "statebank_snapshots_stored"
// ([[key, medium], ...]) and "statebank_snapshots_removed" for snapshots,
// whose key is the key of the block they end. A prefix's namespace is the
// parent_block_hash of its block at position 0 (the namespace's root K0).
//
// Promises:
//  1. Never blocks the bank: an observer call appends to a bounded queue
//     under a leaf lock; when the queue is full the event is dropped and
//     counted (a router then sees a stale index until later events fix it).
//  2. Events leave in the order the tiers made them, batched by a background
//     thread (a batch waits at most `batch_window` for more).
//  3. ZMQ PUB itself never blocks: a subscriber too slow to keep up loses
//     messages beyond the high-water mark (the sequence numbers show it).
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bank/tier.h"
#include "common/status.h"

namespace sb {

struct KvEventsOptions {
  // tcp://HOST:PORT: connects to a subscriber there; tcp://*:PORT binds
  // (vLLM's rule: a wildcard binds, a host connects).
  std::string endpoint;
  std::string topic;  // the first frame; "" as vLLM's default
  size_t queue_max = 100000;
  std::chrono::milliseconds batch_window{2};
  int high_water_mark = 100000;
  std::function<void(const std::string&)> log;
};

struct KvEventsStats {
  uint64_t events = 0;   // sent
  uint64_t batches = 0;  // sent (the next sequence number)
  uint64_t dropped = 0;  // lost to a full queue
  uint64_t send_failures = 0;
};

class KvEventPublisher : public TierObserver {
 public:
  static Status open(KvEventsOptions options, std::unique_ptr<KvEventPublisher>* out);
  // Sends what is queued, then closes the socket (without lingering).
  ~KvEventPublisher() override;
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  void stored(TierKind tier, const TierEntry& entry, std::span<const int32_t> tokens) override;
  void removed(TierKind tier, ObjectKind kind, const Key& key) override;
  // Everything was flushed (AllBlocksCleared).
  void cleared();

  KvEventsStats stats() const;

 private:
  struct Event {
    enum class Type : uint8_t { kStored, kRemoved, kCleared } type = Type::kStored;
    TierKind tier = TierKind::kRam;
    ObjectKind kind = ObjectKind::kBlock;
    Key key, parent;
    int64_t position = 0;
    uint32_t block_tokens = 0;
    std::vector<int32_t> tokens;
    double ts = 0;  // when the tier told us
  };
  explicit KvEventPublisher(KvEventsOptions options) : options_(std::move(options)) {}
  void push(Event e);
  void sender_loop();
  // One EventBatch's msgpack bytes.
  static std::string encode(const std::vector<Event>& batch);

  KvEventsOptions options_;
  void* context_ = nullptr;
  void* socket_ = nullptr;  // used by the sender thread only
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> queue_;  // guarded by mu_
  bool stop_ = false;
  KvEventsStats stats_;
  std::thread sender_;
};

}  // namespace sb
