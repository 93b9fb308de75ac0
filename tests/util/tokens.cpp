#include "tests/util/tokens.h"

namespace sb::testing {

std::vector<int32_t> random_tokens(std::mt19937& rng, int64_t n, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return t;
}

std::vector<int32_t> random_tokens(uint32_t seed, int64_t n, int64_t vocab) {
  std::mt19937 rng(seed);
  return random_tokens(rng, n, vocab);
}

}  // namespace sb::testing
