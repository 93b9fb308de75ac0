// Readable keys for tests that need many distinct names: `n` in the last 8
// bytes (big-endian, so the hex name ends in n and keys order by n), `tag`
// in the first 8.
#pragma once

#include <cstdint>

#include "bank/key.h"

namespace sb::testing {

inline Key numbered_key(uint64_t n, uint64_t tag = 0) {
  Key k;
  for (int i = 0; i < 8; ++i) {
    k.bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(tag >> (56 - 8 * i));
    k.bytes[static_cast<size_t>(24 + i)] = static_cast<uint8_t>(n >> (56 - 8 * i));
  }
  return k;
}

inline uint64_t key_number(const Key& k) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n = n << 8 | k.bytes[static_cast<size_t>(24 + i)];
  return n;
}

}  // namespace sb::testing
