// Compose: the model-independent core of a restore. Builds bank objects from
// a live State, checks objects against a schema and a prompt, and composes a
// restorable prefix (whole blocks + one snapshot) into a new State.
//
// Nothing here is cut or patched: a block holds exactly the rows of tokens
// [kB, (k+1)B) of every sequence and pooled component, a snapshot every
// recurrent component at kB, and a composed State is the concatenation of
// whole blocks followed by the snapshot (docs/bank.md, "Objects").
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <span>

#include "bank/object.h"
#include "common/status.h"
#include "runtime/state.h"

namespace sb {

// Checks that a block object is exactly what the chain expects at index k
// (position = kB): kind, key, parent, position, its B token ids equal to
// `tokens` (the prompt's tokens [kB, (k+1)B)), and one part per sequence or
// pooled component holding B / ratio rows. Returns kCorruption naming the
// first difference.
Status check_block(const Object& object, const StateSchema& schema, const Key& key, const Key& parent,
                   int64_t position, std::span<const int32_t> tokens);
// Checks a snapshot object: kind, key, position, one part per recurrent
// component holding exactly its state.
Status check_snapshot(const Object& object, const StateSchema& schema, const Key& key, int64_t position);

// Leading tokens of `prompt` equal to the stored tokens of `blocks` taken in
// order (what a restore record calls common_prefix_tokens).
int64_t common_prefix(std::span<const ObjectRef> blocks, std::span<const int32_t> prompt);

// The block object for tokens [position, position + tokens.size()) of
// `state`. REQUIRES: state.position() >= position + tokens.size(), position
// and tokens.size() multiples of schema.pooled_lcm().
ObjectRef make_block(const State& state, const Key& key, const Key& parent, int64_t position,
                     std::span<const int32_t> tokens);
ObjectRef make_snapshot(const RecurrentSnapshot& snapshot, const Key& key);

// A new State at position `blocks.size() * B`: the blocks' rows appended in
// order, the snapshot's recurrent parts (REQUIRES a snapshot when the schema
// has recurrent components and blocks is not empty), then check_consistent().
// The objects must have passed check_block / check_snapshot.
Status compose_state(const StateSchema& schema, std::span<const ObjectRef> blocks, const ObjectRef& snapshot,
                     State* out);

}  // namespace sb
