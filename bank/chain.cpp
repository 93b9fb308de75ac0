#include "bank/chain.h"

namespace sb {

std::vector<Key> chain_keys(const Key& root, std::span<const int32_t> tokens, uint32_t block_tokens,
                            int64_t n_blocks) {
  std::vector<Key> keys;
  keys.reserve(static_cast<size_t>(n_blocks) + 1);
  keys.push_back(root);
  for (int64_t k = 0; k < n_blocks; ++k)
    keys.push_back(chain_key(keys.back(), tokens.subspan(static_cast<size_t>(k) * block_tokens, block_tokens)));
  return keys;
}

}  // namespace sb
