// KvEventPublisher: tells routers what this replica's bank holds, as vLLM's
// KV-cache events (ZMQ PUB, msgpack EventBatch; statebank's extension fields
// for positions and snapshots), so that a prefix-aware router can send a
// prompt where most of it can be restored. The wire format in full:
// docs/bank.md, "Bank events".
// Contract:
//  - it never blocks the bank: an observer call appends to a bounded queue
//    under a leaf lock; a full queue drops the event and counts it;
//  - events leave in the order the tiers made them, batched by a background
//    thread (a batch waits at most `batch_window`);
//  - ZMQ PUB never blocks: a subscriber too slow loses messages beyond the
//    high-water mark (the sequence numbers show it).
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
