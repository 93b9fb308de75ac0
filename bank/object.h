// Immutable bank objects (docs/bank.md, "Objects").
//
// Block object, named by K(k+1): the rows of every sequence and pooled
// component for tokens [kB, (k+1)B), the block's token ids and the parent key
// K(k). Snapshot object, named by K(k): every recurrent component at position
// kB. Objects are never modified after construction; tiers share them as
// std::shared_ptr<const Object>.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "bank/key.h"

namespace sb {

enum class ObjectKind : uint8_t { kBlock = 1, kSnapshot = 2 };

const char* object_kind_name(ObjectKind kind);

struct Object {
  ObjectKind kind = ObjectKind::kBlock;
  Key key;       // block: K(k+1); snapshot: K(k)
  Key parent;    // block: K(k); snapshot: unused (zero)
  int64_t position = 0;  // block: first token kB; snapshot: kB
  std::vector<int32_t> tokens;  // block: its B token ids; snapshot: empty
  // Block: one entry per sequence/pooled component in schema order (rows for
  // this block). Snapshot: one entry per recurrent component in schema order.
  std::vector<std::vector<float>> parts;

  uint64_t payload_bytes() const;
};

using ObjectRef = std::shared_ptr<const Object>;

// Whether a block's key is the chain key of its parent and its tokens: what a
// tier that reads blocks from outside the process checks on every read
// (SsdOptions::verify_block).
bool block_key_matches(const Object& block);

}  // namespace sb
