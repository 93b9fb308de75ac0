// Random token ids for test prompts: the one generator every test uses.
// Deterministic: the same seed (or the same generator state) gives the same
// ids on every machine (std::mt19937 is specified exactly).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace sb::testing {

// Ids below the first special token of the Qwen vocabularies, so a random
// prompt never holds a control token. Every generated checkpoint has at
// least this many ids.
constexpr int32_t kPlainVocab = 151643;

// n ids in [0, vocab), drawn from `rng` (tests that draw several prompts
// and other choices from one stream).
std::vector<int32_t> random_tokens(std::mt19937& rng, int64_t n, int64_t vocab = kPlainVocab);
// n ids in [0, vocab) from a generator seeded with `seed`.
std::vector<int32_t> random_tokens(uint32_t seed, int64_t n, int64_t vocab = kPlainVocab);

}  // namespace sb::testing
