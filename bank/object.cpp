#include "bank/object.h"

namespace sb {

const char* object_kind_name(ObjectKind kind) {
  switch (kind) {
    case ObjectKind::kBlock: return "block";
    case ObjectKind::kSnapshot: return "snapshot";
  }
  return "?";
}

uint64_t Object::payload_bytes() const {
  uint64_t total = tokens.size() * sizeof(int32_t);
  for (const auto& p : parts) total += p.size() * sizeof(float);
  return total;
}

bool block_key_matches(const Object& block) { return chain_key(block.parent, block.tokens) == block.key; }

}  // namespace sb
