// Test-only: from now on every key root_key() and chain_key() compute keeps
// only its first `bits` bits (bank/key_bits.h). 0 restores full keys.
// Process-wide. Not part of the shipped binary.
#pragma once

#include "bank/key_bits.h"

namespace sb {

inline void set_key_bits_for_testing(int bits) { g_key_bits_kept.store(bits, std::memory_order_relaxed); }

}  // namespace sb
