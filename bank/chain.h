// Chain keys of a prompt: K0 (the root) and K(1)..K(n_blocks), the names of
// its first n_blocks full blocks (docs/bank.md, "Keys").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bank/key.h"

namespace sb {

// Returns n_blocks + 1 keys: out[0] = root, out[k] = K(k).
// REQUIRES: tokens.size() >= n_blocks * block_tokens.
std::vector<Key> chain_keys(const Key& root, std::span<const int32_t> tokens, uint32_t block_tokens,
                            int64_t n_blocks);

}  // namespace sb
