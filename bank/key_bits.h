// How many leading bits of every key root_key() and chain_key() keep; the
// rest are zero. 0 (all 256) in the product, which never changes it: only
// tests do (tests/util/key_bits.h), to forge collisions and see what else
// stops them. Internal to bank/ and its tests.
#pragma once

#include <atomic>

namespace sb {

extern std::atomic<int> g_key_bits_kept;

}  // namespace sb
