#include "model/ngram_hash.h"

namespace sb {

namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

// splitmix64 with the increment applied first, as the multipliers' definition
// draws them.
uint64_t mix(uint64_t v) {
  v += kGamma;
  v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ull;
  v = (v ^ (v >> 27)) * 0x94D049BB133111EBull;
  return v ^ (v >> 31);
}

bool is_prime(int64_t v) {
  if (v < 2) return false;
  if (v % 2 == 0) return v == 2;
  for (int64_t d = 3; d * d <= v; d += 2)
    if (v % d == 0) return false;
  return true;
}

}  // namespace

NgramHash ngram_hash(const ModelConfig& c, int64_t ple_index) {
  NgramHash h;
  if (!c.ngram_multipliers.empty()) {  // a GGUF file's own (it holds one PLE layer)
    h.multipliers = c.ngram_multipliers;
    h.head_vocab = c.ngram_head_vocab;
    h.head_offset = c.ngram_head_offset;
    h.table_rows = c.ngram_table_rows;
    return h;
  }
  const int64_t heads = (c.ngram_size - 1) * c.heads_per_ngram;
  // Head g of the whole model (over all PLE layers) takes the (g+1)-th prime
  // at or above the base, so every head of every layer hashes differently.
  int64_t prime = c.ngram_vocab_base - 1;
  for (int64_t g = 0; g < ple_index * heads; ++g) {
    do ++prime;
    while (!is_prime(prime));
  }
  int64_t total = 0;
  for (int64_t i = 0; i < heads; ++i) {
    do ++prime;
    while (!is_prime(prime));
    h.head_vocab.push_back(prime);
    h.head_offset.push_back(total);
    total += prime;
  }
  const int64_t div = c.ngram_vocab_divisor;
  h.table_rows = (total + div - 1) / div * div;
  // Each multiplier stays below 2^63 / vocab, so token * multiplier never
  // overflows a signed 64-bit product.
  const uint64_t bound = static_cast<uint64_t>(INT64_MAX) / static_cast<uint64_t>(c.vocab_size > 0 ? c.vocab_size : 1);
  const uint64_t half = bound / 2 > 0 ? bound / 2 : 1;
  const uint64_t seed = static_cast<uint64_t>(c.ngram_seed) + 10007ull * static_cast<uint64_t>(ple_index);
  for (int64_t i = 0; i < c.ngram_size; ++i)
    h.multipliers.push_back(static_cast<int64_t>(2 * (mix(seed + kGamma * static_cast<uint64_t>(i + 1)) % half) + 1));
  return h;
}

void ngram_rows(const NgramHash& hash, int64_t heads_per_ngram, int64_t token, const int64_t* context, int64_t* rows) {
  const int64_t orders = static_cast<int64_t>(hash.multipliers.size()) - 1;
  uint64_t mixed = static_cast<uint64_t>(token) * static_cast<uint64_t>(hash.multipliers[0]);
  for (int64_t o = 0; o < orders; ++o) {
    mixed ^= static_cast<uint64_t>(context[o]) * static_cast<uint64_t>(hash.multipliers[o + 1]);
    for (int64_t h = 0; h < heads_per_ngram; ++h) {
      const size_t head = static_cast<size_t>(o * heads_per_ngram + h);
      rows[head] = static_cast<int64_t>(mixed % static_cast<uint64_t>(hash.head_vocab[head])) + hash.head_offset[head];
    }
  }
}

void ngram_context(const int64_t* history, int64_t n, int64_t context_len, int64_t eos, int64_t* context) {
  bool cut = false;  // an eos lies between this position and the token
  for (int64_t k = 0; k < context_len; ++k) {
    const int64_t p = n - 1 - k;
    if (p < 0 || cut || history[p] == eos) {
      cut = true;
      context[k] = eos;
    } else {
      context[k] = history[p];
    }
  }
}

}  // namespace sb
