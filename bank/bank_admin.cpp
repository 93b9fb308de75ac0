// The Bank's operator view (bank/bank.h, "The operator's view"): listing,
// pins and flushes. Each call walks the tiers' indexes (Tier::entries,
// describe); nothing here runs on the request path.
//
// Parent links come from object headers, which a damaged or crafted bank
// directory may set to anything, cycles included: every walk along them
// keeps the keys it has been through and stops at the first one seen again
// (a chain with a cycle has no root).
#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "bank/bank.h"
#include "bank/chain.h"

namespace sb {
namespace {

// Everything the tiers hold under one name, merged.
struct Node {
  bool block = false, snapshot = false;
  Key parent;
  int64_t position = 0;
  uint32_t tokens = 0;
  uint64_t hits = 0;            // of the block, all tiers
  int64_t last_use_ms = 0;      // of the block or the snapshot
  std::vector<uint64_t> objects, bytes;  // by tier index, block and snapshot together
};

using Nodes = std::unordered_map<Key, Node, KeyHash>;

Nodes merge(const std::vector<Tier*>& tiers) {
  Nodes nodes;
  for (size_t i = 0; i < tiers.size(); ++i) {
    for (const TierEntry& e : tiers[i]->entries()) {
      Node& n = nodes[e.key];
      if (n.objects.empty()) n.objects.assign(tiers.size(), 0), n.bytes.assign(tiers.size(), 0);
      n.objects[i] += 1;
      n.bytes[i] += e.bytes;
      if (e.kind == ObjectKind::kBlock) {
        n.block = true;
        n.parent = e.parent;
        n.position = e.position;
        n.tokens = e.tokens;
        n.hits += e.hits;
        n.last_use_ms = std::max(n.last_use_ms, e.last_use_ms);
      } else {
        n.snapshot = true;
        n.last_use_ms = std::max(n.last_use_ms, e.last_use_ms);
      }
    }
  }
  return nodes;
}

// The root (K0) of the chain through block `key`, when every block back to
// it is stored; memoised in `roots` for every block on the way.
std::optional<Key> root_of(const Nodes& nodes, const Key& key,
                           std::unordered_map<Key, std::optional<Key>, KeyHash>& roots) {
  std::vector<Key> path;
  std::unordered_set<Key, KeyHash> on_path;
  std::optional<Key> root;
  Key at = key;
  for (;;) {
    if (auto known = roots.find(at); known != roots.end()) {
      root = known->second;
      break;
    }
    auto it = nodes.find(at);
    if (it == nodes.end() || !it->second.block) break;  // a hole: nobody's
    if (!on_path.insert(at).second) break;               // a cycle: nobody's either
    path.push_back(at);
    if (it->second.position == 0) {
      root = it->second.parent;
      break;
    }
    at = it->second.parent;
  }
  for (const Key& k : path) roots[k] = root;
  return root;
}

}  // namespace

std::vector<PrefixInfo> Bank::prefixes(bool needs_snapshot, size_t first_tokens) const {
  const Nodes nodes = merge(tiers_);
  std::unordered_set<Key, KeyHash> continued;
  for (const auto& [key, n] : nodes)
    if (n.block) continued.insert(n.parent);
  std::unordered_map<Key, int64_t, KeyHash> pinned;
  for (const Pin& p : pins_.list()) pinned[p.tail] = std::max(pinned[p.tail], p.expires_ms);

  std::vector<PrefixInfo> out;
  for (const auto& [leaf, tail] : nodes) {
    if (!tail.block || continued.count(leaf)) continue;
    PrefixInfo info;
    info.tail = leaf;
    info.tokens = tail.position + tail.tokens;
    if (auto p = pinned.find(leaf); p != pinned.end()) info.pinned_until_ms = p->second;
    info.tiers.resize(tiers_.size());
    for (size_t i = 0; i < tiers_.size(); ++i) info.tiers[i].tier = tiers_[i]->name();
    std::vector<std::pair<Key, const Node*>> path;  // leaf first
    std::unordered_set<Key, KeyHash> on_path;
    Key at = leaf;
    for (;;) {
      auto it = nodes.find(at);
      if (it == nodes.end() || !it->second.block) break;
      if (!on_path.insert(at).second) break;  // a cycle: no root
      path.emplace_back(at, &it->second);
      if (it->second.position == 0) {
        info.has_root = true;
        info.root = it->second.parent;
        break;
      }
      at = it->second.parent;
    }
    for (const auto& [key, n] : path) {
      // Every restore reads blocks 1..k: the most-read block counts the
      // restores that used this prefix or a part of it.
      info.hits = std::max(info.hits, n->hits);
      info.last_use_ms = std::max(info.last_use_ms, n->last_use_ms);
      info.blocks += 1;
      info.snapshots += n->snapshot ? 1 : 0;
      for (size_t i = 0; i < tiers_.size(); ++i) {
        info.tiers[i].objects += n->objects[i];
        info.tiers[i].bytes += n->bytes[i];
        info.bytes += n->bytes[i];
      }
      const int64_t end = n->position + n->tokens;
      if (info.has_root && (!needs_snapshot || n->snapshot)) info.restorable_tokens = std::max(info.restorable_tokens, end);
    }
    if (info.has_root && first_tokens > 0) {
      const Key& first = path.back().first;
      for (const Tier* t : tiers_) {
        Key parent;
        std::vector<int32_t> tokens;
        if (!t->peek_tokens(first, &parent, &tokens).is_ok() || parent != info.root || chain_key(parent, tokens) != first)
          continue;
        tokens.resize(std::min(tokens.size(), first_tokens));
        info.first_tokens = std::move(tokens);
        break;
      }
    }
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const PrefixInfo& a, const PrefixInfo& b) {
    if (a.tokens != b.tokens) return a.tokens > b.tokens;
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return a.tail < b.tail;
  });
  return out;
}

Status Bank::pin_prefix(std::span<const Key> chain, int64_t tokens, int64_t ttl_ms, Pin* out) {
  if (chain.size() < 2) return Status::invalid("a pinned prefix covers at least one whole block");
  if (ttl_ms <= 0) return Status::invalid("a pin's TTL must be positive");
  Pin pin;
  pin.tail = chain.back();
  pin.id = pin.tail.hex();
  pin.root = chain.front();
  pin.has_root = true;
  pin.tokens = tokens;
  pin.keys.assign(chain.begin() + 1, chain.end());
  pin.expires_ms = pins_.now_ms() + ttl_ms;
  pins_.add(pin);
  *out = std::move(pin);
  return Status::ok();
}

Status Bank::pin_chain(const Key& tail, int64_t ttl_ms, Pin* out) {
  if (ttl_ms <= 0) return Status::invalid("a pin's TTL must be positive");
  auto find_block = [&](const Key& key, TierEntry* e) {
    for (const Tier* t : tiers_)
      if (t->describe(ObjectKind::kBlock, key, e)) return true;
    return false;
  };
  TierEntry e;
  if (!find_block(tail, &e)) return Status::not_found("no tier holds a block " + tail.hex());
  Pin pin;
  pin.tail = tail;
  pin.id = tail.hex();
  pin.tokens = e.position + e.tokens;
  pin.keys.push_back(tail);
  std::unordered_set<Key, KeyHash> seen{tail};
  for (;;) {
    if (e.position == 0) {
      pin.root = e.parent;
      pin.has_root = true;
      break;
    }
    const Key parent = e.parent;
    if (!seen.insert(parent).second) break;  // a cycle: no root, and nothing more to name
    if (!find_block(parent, &e)) break;      // a hole: what is before it cannot be named
    pin.keys.push_back(parent);
  }
  std::reverse(pin.keys.begin(), pin.keys.end());
  pin.expires_ms = pins_.now_ms() + ttl_ms;
  pins_.add(pin);
  *out = std::move(pin);
  return Status::ok();
}

bool Bank::unpin(const std::string& id) {
  if (!pins_.remove(id)) return false;
  for (Tier* t : tiers_) t->guard_changed();
  return true;
}

void Bank::sweep_pins() {
  if (pins_.purge_expired() == 0) return;
  for (Tier* t : tiers_) t->guard_changed();
}

std::vector<TierShare> Bank::pinned_share(const Pin& pin) const {
  std::vector<TierShare> out;
  for (const Tier* t : tiers_) {
    TierShare share;
    share.tier = t->name();
    for (const Key& key : pin.keys)
      for (ObjectKind kind : {ObjectKind::kBlock, ObjectKind::kSnapshot}) {
        TierEntry e;
        if (!t->describe(kind, key, &e)) continue;
        share.objects += 1;
        share.bytes += e.bytes;
      }
    out.push_back(share);
  }
  return out;
}

Status Bank::flush(const Key* root, FlushResult* out) {
  FlushResult r;
  // Objects still queued for a tier would be published after the flush.
  for (Tier* t : tiers_) (void)t->flush(std::chrono::steady_clock::time_point::max());
  r.pins = root ? pins_.remove_root(*root) : pins_.clear();
  Status first;
  auto drop = [&](Tier* t, const TierEntry& e) {
    Status s = t->discard(e.kind, e.key);
    if (s.is_ok()) {
      r.objects += 1;
      r.bytes += e.bytes;
    } else if (s.code() != Code::kNotFound && first.is_ok()) {
      first = s;
    }
  };
  if (root == nullptr) {
    for (Tier* t : tiers_)
      for (const TierEntry& e : t->entries()) drop(t, e);
  } else {
    const Nodes nodes = merge(tiers_);
    std::unordered_map<Key, std::optional<Key>, KeyHash> roots;
    for (Tier* t : tiers_)
      for (const TierEntry& e : t->entries()) {
        // A snapshot K(k) belongs where block K(k) does.
        const std::optional<Key> owner = root_of(nodes, e.key, roots);
        if (!owner) r.unattributed += 1;
        else if (*owner == *root) drop(t, e);
      }
  }
  *out = r;
  return first;
}

}  // namespace sb
