#include "bank/bank_factory.h"

#include <cstdlib>

namespace sb {

Status TieredBank::open(BankOptions options, std::unique_ptr<TieredBank>* out) {
  std::unique_ptr<TieredBank> b(new TieredBank());
  if (options.ram_bytes > 0) {
    b->ram_ = std::make_unique<RamTier>(options.ram_bytes);
    b->tiers_.push_back(b->ram_.get());
  }
  if (options.ssd_mode != SsdMode::kOff) {
    SsdOptions o;
    o.dir = options.ssd_dir;
    o.mode = options.ssd_mode;
    o.budget_bytes = options.ssd_bytes;
    o.schema = options.schema;
    o.fs = options.fs;
    o.log = options.log;
    if (options.verify_blocks) o.verify_block = block_key_matches;
    SB_RETURN_IF_ERROR(SsdTier::open(std::move(o), &b->ssd_));
    b->tiers_.push_back(b->ssd_.get());
  }
  if (!options.remote.empty()) {
    RedisOptions o;
    SB_RETURN_IF_ERROR(parse_redis_url(options.remote, &o.address));
    o.password = options.remote_password;
    o.secret = options.remote_secret;
    o.ttl = options.remote_ttl;
    o.timeout = options.remote_timeout;
    if (!options.remote_key_prefix.empty()) o.key_prefix = options.remote_key_prefix;
    o.schema = options.schema;
    if (options.log) o.log = [log = options.log](const std::string& m) { log("remote: " + m); };
    if (options.verify_blocks) o.verify_block = block_key_matches;
    SB_RETURN_IF_ERROR(RedisTier::open(std::move(o), &b->remote_));
    b->tiers_.push_back(b->remote_.get());
  }
  if (!options.kv_events.empty()) {
    KvEventsOptions o;
    o.endpoint = options.kv_events;
    o.log = options.log;
    SB_RETURN_IF_ERROR(KvEventPublisher::open(std::move(o), &b->events_));
    // The remote tier is shared: what it holds is not this replica's to announce.
    for (Tier* t : {static_cast<Tier*>(b->ram_.get()), static_cast<Tier*>(b->ssd_.get())})
      if (t) t->set_observer(b->events_.get());
  }
  if (!b->tiers_.empty()) b->bank_ = std::make_unique<Bank>(b->tiers_);
  *out = std::move(b);
  return Status::ok();
}

TieredBank::~TieredBank() {
  // The Bank refers to the tiers.
  bank_.reset();
}

Status TieredBank::flush(std::chrono::steady_clock::time_point deadline) {
  Status s = ssd_ ? ssd_->flush(deadline) : Status::ok();
  // The remote tier's writes help other replicas: in whatever time is left.
  Status r = remote_ ? remote_->flush(deadline) : Status::ok();
  return s.is_ok() ? r : s;
}

Status TieredBank::close(std::chrono::steady_clock::time_point deadline) {
  Status s = ssd_ ? ssd_->close(deadline) : Status::ok();
  Status r = remote_ ? remote_->close(deadline) : Status::ok();
  return s.is_ok() ? r : s;
}

std::string default_bank_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/statebank/bank";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/statebank/bank";
  return "";
}

}  // namespace sb
