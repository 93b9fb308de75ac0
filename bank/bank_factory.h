// TieredBank: the one place that assembles the bank from options: the tiers in
// lookup order (RAM, SSD, a shared remote store) and the Bank over them, so
// server, benchmarks and CLI configure them alike (block verification on
// every SSD read unless a caller turns it off; docs/bank.md, "Tiers").
// Ownership: it owns its tiers and its Bank and destroys the Bank first;
// anything holding bank() (an Engine) must be destroyed before it.
// Shutdown: close(deadline) waits until the SSD write queue, then the remote
// one, is written, or the deadline passes; what is left is dropped (a dropped
// object is simply absent next time) and no thread outlives close() but the
// one finishing its current file, which the destructor joins.
// Thread safety: open() and close() from one thread; bank() and the tier
// accessors are constant after open() and may be used from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bank/bank.h"
#include "bank/ram_tier.h"
#include "bank/events/kv_events.h"
#include "bank/remote/redis_tier.h"
#include "bank/ssd_tier.h"
#include "common/status.h"
#include "runtime/state.h"

namespace sb {

struct BankOptions {
  uint64_t ram_bytes = 0;          // RAM tier budget; 0: no RAM tier
  SsdMode ssd_mode = SsdMode::kOff;
  std::string ssd_dir;             // required unless ssd_mode is kOff
  uint64_t ssd_bytes = 0;          // SSD budget; 0: the default rule (half the file system, bank/ssd_tier.h)
  // When set, SSD objects carry its digest and every read's part sizes are
  // checked against it.
  std::optional<StateSchema> schema;
  bool verify_blocks = true;       // check every SSD block's key against its tokens
  Fs* fs = nullptr;                // nullptr: posix_fs()
  std::function<void(const std::string&)> log;  // the tiers' log lines; nullptr: stderr
  // A shared remote tier below SSD (bank/remote/redis_tier.h): its URL,
  // redis://HOST:PORT[/DB], or empty for none. Its values are checked like
  // SSD files (schema, and block keys unless verify_blocks is off).
  std::string remote;
  std::string remote_password;                    // empty: no AUTH
  std::string remote_secret;                      // the key of every value's MAC; required with `remote`
  std::chrono::seconds remote_ttl{86400};         // after the last use; 0: keys never expire
  std::chrono::milliseconds remote_timeout{500};  // every call to Redis, connecting included
  std::string remote_key_prefix;                  // empty: the tier's own ("statebank:")
  // Where the RAM and SSD tiers' stores and removals are published as
  // vLLM KV-cache events (bank/events/kv_events.h): tcp://HOST:PORT, or
  // empty for none.
  std::string kv_events;
};

class TieredBank {
 public:
  static Status open(BankOptions options, std::unique_ptr<TieredBank>* out);
  ~TieredBank();
  TieredBank(const TieredBank&) = delete;
  TieredBank& operator=(const TieredBank&) = delete;

  // Null when no tier is configured (every request then bypasses the bank).
  Bank* bank() const { return bank_.get(); }
  // In lookup order.
  const std::vector<Tier*>& tiers() const { return tiers_; }
  RamTier* ram() const { return ram_.get(); }  // null without a RAM tier
  SsdTier* ssd() const { return ssd_.get(); }  // null without an SSD tier
  RedisTier* remote() const { return remote_.get(); }  // null without a remote tier
  KvEventPublisher* events() const { return events_.get(); }  // null without --kv-events

  // Waits until everything queued for the lower tiers is stored, at most
  // until `deadline`. Returns the first write failure, or kResourceExhausted
  // when the deadline passed first.
  Status flush(std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());
  // flush(deadline), then drops what is still queued and stops the writers;
  // later publishes reach the RAM tier only.
  Status close(std::chrono::steady_clock::time_point deadline);

 private:
  TieredBank() = default;

  std::unique_ptr<KvEventPublisher> events_;  // first: the tiers tell it things until they are gone
  std::unique_ptr<RamTier> ram_;
  std::unique_ptr<SsdTier> ssd_;
  std::unique_ptr<RedisTier> remote_;
  std::vector<Tier*> tiers_;
  std::unique_ptr<Bank> bank_;
};

// The default --bank-dir: $XDG_CACHE_HOME/statebank/bank, else
// $HOME/.cache/statebank/bank; empty when neither variable is set.
std::string default_bank_dir();

}  // namespace sb
