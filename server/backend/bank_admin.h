// BankAdmin: the bank's administration as the HTTP layer sees it: the
// statistics of /metrics and /v1/bank, the operator's routes (prefixes,
// pins, flush) and closing the bank at shutdown. The serving view of the
// same backend is server/backend/backend.h; a backend without a bank answers
// kUnsupported (the routes say 501).
//
// Thread safety: every method may be called from many threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bank/remote/redis_tier.h"
#include "bank/tier.h"
#include "common/status.h"

namespace sb {

// One tier's statistics as /metrics prints them: the tier's own (one shape
// for every tier, bank/tier.h), under its kind.
struct BankTierStats {
  TierKind tier = TierKind::kRam;  // its label: tier_kind_name(tier)
  TierStats stats;
};

// Bank statistics as /metrics prints them.
struct BankStatsView {
  std::vector<BankTierStats> tiers;
  std::map<std::string, uint64_t> check_failures;  // by kind (checksum, tokens, position, ...)
  std::optional<RedisStats> remote;                // the remote tier's health, when one is configured
  uint64_t audits = 0;            // restored requests recomputed cold
  uint64_t audit_mismatches = 0;  // ... that differed (a broken promise)
  uint64_t audits_dropped = 0;    // sampled, but the audit queue was full or a request interrupted it
};

// A pin request (POST /v1/bank/pins): a prompt's tokens in a namespace, or
// a stored chain by the key of its last block.
struct PinSpec {
  bool by_chain = false;
  std::string chain;            // 64 hex digits (by_chain)
  std::vector<int32_t> tokens;  // the prompt (otherwise)
  std::string name_space;       // the prompt's namespace
  int64_t ttl_s = 0;
};

// A flush request (POST /v1/bank/flush): everything, one namespace, or the
// chains under one root key.
struct FlushSpec {
  enum class Scope { kAll, kNamespace, kRoot } scope = Scope::kAll;
  std::string name_space;  // kNamespace
  std::string root;        // kRoot: 64 hex digits
};

class BankAdmin {
 public:
  virtual ~BankAdmin() = default;

  virtual BankStatsView bank_stats() const = 0;
  virtual nlohmann::json bank_stats_json() const = 0;
  // Shutdown: waits until the bank's write queue is on disk, at most
  // `deadline`, then drops what is left and stops the bank's writers
  // (TieredBank::close). Lookups keep working.
  virtual Status close_bank(std::chrono::milliseconds deadline) = 0;

  // --- The operator's view of the bank (/v1/bank/..., docs/interface.md).
  // A backend without a bank answers kUnsupported (the route says 501).

  // Stored prefixes, sorted by `sort` (tokens, bytes, hits, last_use), at
  // most `limit`, with their first tokens decoded when `text`.
  virtual Status bank_prefixes(const std::string& sort, size_t limit, bool text, nlohmann::json* out) const {
    return no_bank();
  }
  virtual Status bank_pins(nlohmann::json* out) const { return no_bank(); }
  virtual Status bank_pin(const PinSpec& spec, nlohmann::json* out) { return no_bank(); }
  // kNotFound when no pin has that id.
  virtual Status bank_unpin(const std::string& id) { return no_bank(); }
  // The bytes stored under pin `id` in the tier where it holds most (0 when
  // the pin has expired or there is no bank): what a tenant's pins hold.
  virtual uint64_t bank_pinned_bytes(const std::string& id) const { return 0; }
  virtual Status bank_flush(const FlushSpec& spec, nlohmann::json* out) { return no_bank(); }

 protected:
  static Status no_bank() { return Status::unsupported("this server has no bank"); }
};

}  // namespace sb
